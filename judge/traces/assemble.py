"""Spans, read in batches, grouped into whole traces with memory flat in the number of traces.

The spans of one trace may be spread over several export requests (lines). The rule: a
trace is complete once its root span (the span without a parent) has been read and
`linger` more spans have been read after it. An SDK exports a span when it ends, and a
root span ends after its children, so within one process a trace's spans arrive before
or with its root; `linger` catches the spans that arrive a little after it (another
service's spans, batches exported out of order).

Memory holds the traces whose root has not been read yet, and the spans of the last
`linger` spans read: it does not grow with the number of traces in the files. The limit,
said in the summary, never silently:

- a span of a trace already emitted (it came more than `linger` spans after the root) is
  a late span: counted, and not in the row;
- a trace whose root span never comes (its root in a file not given, or a trace cut off)
  is held until the end of the input, then skipped with the reason "no_root".
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from judge.traces.spans import Span

DEFAULT_LINGER = 10_000  # spans read after a root before its trace is emitted
_RECENT = 20_000  # trace ids remembered after being emitted, to tell late spans


@dataclass
class Trace:
    """The spans of one trace and its root span (None when the root was never read)."""

    trace_id: str
    spans: list[Span] = field(default_factory=list)
    root: Span | None = None


@dataclass
class AssemblyCounts:
    """What the assembly saw: spans read, and late spans (of a trace already emitted)."""

    spans: int = 0
    late_spans: int = 0


def assemble(
    batches: Iterable[list[Span]],
    linger: int = DEFAULT_LINGER,
    counts: AssemblyCounts | None = None,
) -> Iterator[Trace]:
    """Whole traces from batches of spans, each trace once its root has been read and
    `linger` more spans after it; at the end, every trace still held (those without a
    root too, with `root` None).

    Args:
        batches: the spans of each export request, in file order (`otlp.read_requests`).
        linger: how many spans to read after a root before its trace is complete.
        counts: filled with the spans read and the late spans.
    """
    counts = counts if counts is not None else AssemblyCounts()
    open_traces: dict[str, Trace] = {}
    rooted: OrderedDict[str, int] = OrderedDict()  # trace id -> span count when its root came
    emitted: OrderedDict[str, None] = OrderedDict()
    for batch in batches:
        for span in batch:
            counts.spans += 1
            trace = open_traces.get(span.trace_id)
            if trace is None:
                if span.trace_id in emitted:
                    counts.late_spans += 1
                    continue
                trace = open_traces[span.trace_id] = Trace(span.trace_id)
            trace.spans.append(span)
            if span.parent_id is None and trace.root is None:
                trace.root = span
                rooted[span.trace_id] = counts.spans
        while rooted:
            trace_id, at = next(iter(rooted.items()))
            if counts.spans - at < linger:
                break
            del rooted[trace_id]
            emitted[trace_id] = None
            if len(emitted) > _RECENT:
                emitted.popitem(last=False)
            yield open_traces.pop(trace_id)
    for trace_id in rooted:
        yield open_traces.pop(trace_id)
    yield from open_traces.values()  # no root read
