"""Spans, read in batches, grouped into whole traces with memory flat in the number of traces.

The spans of one trace may be spread over several export requests (lines). A trace's root
is its local root: a span without a parent, or one whose parent is remote (a service called
with a `traceparent` header, behind a gateway: OTLP's span `flags` say so, bits 8 and 9),
or else the span whose parent is not among the trace's spans. The rule:

- a trace whose root is known (no parent, or a remote one) is complete once `linger` more
  spans have been read after its root. An SDK exports a span when it ends, and a root span
  ends after its children, so within one process a trace's spans arrive before or with its
  root; `linger` catches the spans that arrive a little after it (another service's spans,
  batches exported out of order, a child that outlives the request);
- a trace whose root is not known (no span says it is the local root: a remote parent
  without flags, or a trace cut off above) is complete once `linger` spans have been read
  after its last span; its root is then the earliest span whose parent was not read, and
  `missing_parent` names that parent.

A span read again (a collector's retry is at least once; a file given twice) is a
duplicate: counted, kept once (the first). Memory holds the open traces, each for at most
`linger` spans after its root or its last span: it does not grow with the number of traces
in the files. The limit, said in the summary, never silently: a span of a trace already
emitted (more than `linger` spans after it completed) is a late span: counted, and not in
the row.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from judge.traces.spans import Span

DEFAULT_LINGER = 10_000  # spans read after a root (or a rootless trace's last span)
_RECENT = 20_000  # trace ids remembered after being emitted, to tell late spans


@dataclass
class Trace:
    """The spans of one trace (each span once) and its root span.

    `root` is None only while the trace is being read. `missing_parent` is the root's
    parent when that parent was not read and is not known to be remote: the trace may be
    cut off above (its root in a file not given).
    """

    trace_id: str
    spans: list[Span] = field(default_factory=list)
    root: Span | None = None
    missing_parent: str | None = None
    span_ids: set[str] = field(default_factory=set, repr=False)


@dataclass
class AssemblyCounts:
    """What the assembly saw: spans read, late spans (of a trace already emitted), and
    duplicate spans (a span id read again in its trace, left out)."""

    spans: int = 0
    late_spans: int = 0
    duplicate_spans: int = 0


class Parented(Protocol):
    """What `is_local_root` reads of a span (a `Span`, or a receiver's encoded span)."""

    parent_id: str | None
    parent_remote: bool


def is_local_root(span: Parented) -> bool:
    """Whether the span says it is its trace's root here: no parent, or a remote one."""
    return span.parent_id is None or span.parent_remote


def _finished(trace: Trace) -> Trace:
    """The trace with its root found when no span said it is the root: the earliest span
    whose parent was not read."""
    if trace.root is None and trace.spans:
        tops = [s for s in trace.spans if s.parent_id not in trace.span_ids]
        trace.root = min(tops or trace.spans, key=lambda s: (s.start_ns, s.span_id))
    root = trace.root
    if (
        root is not None
        and root.parent_id is not None
        and not root.parent_remote
        and root.parent_id not in trace.span_ids
    ):
        trace.missing_parent = root.parent_id
    trace.span_ids = set()  # not needed once emitted
    return trace


def assemble(
    batches: Iterable[list[Span]],
    linger: int = DEFAULT_LINGER,
    counts: AssemblyCounts | None = None,
) -> Iterator[Trace]:
    """Whole traces from batches of spans, each once it is complete (see the module's
    docstring); at the end, every trace still held.

    Args:
        batches: the spans of each export request, in file order (`otlp.read_requests`).
        linger: how many spans to read after a root, or after the last span of a trace
            whose root is not known, before the trace is complete.
        counts: filled with the spans read, the late spans and the duplicates.
    """
    counts = counts if counts is not None else AssemblyCounts()
    open_traces: dict[str, Trace] = {}
    rooted: OrderedDict[str, int] = OrderedDict()  # trace id -> span count when its root came
    waiting: OrderedDict[str, int] = OrderedDict()  # no root yet -> span count at its last span
    emitted: OrderedDict[str, None] = OrderedDict()

    def emit(trace_id: str) -> Trace:
        emitted[trace_id] = None
        if len(emitted) > _RECENT:
            emitted.popitem(last=False)
        return _finished(open_traces.pop(trace_id))

    for batch in batches:
        for span in batch:
            counts.spans += 1
            trace_id = span.trace_id
            trace = open_traces.get(trace_id)
            if trace is None:
                if trace_id in emitted:
                    counts.late_spans += 1
                    continue
                trace = open_traces[trace_id] = Trace(trace_id)
            if span.span_id in trace.span_ids:
                counts.duplicate_spans += 1
                continue
            trace.span_ids.add(span.span_id)
            trace.spans.append(span)
            if trace.root is not None:
                continue
            if is_local_root(span):
                trace.root = span
                rooted[trace_id] = counts.spans
                waiting.pop(trace_id, None)
            else:
                waiting[trace_id] = counts.spans
                waiting.move_to_end(trace_id)
        for queue in (rooted, waiting):
            while queue:
                trace_id, at = next(iter(queue.items()))
                if counts.spans - at < linger:
                    break
                del queue[trace_id]
                yield emit(trace_id)
    for queue in (rooted, waiting):
        for trace_id in list(queue):
            yield emit(trace_id)
