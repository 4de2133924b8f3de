"""Trace files read into `judge eval` rows, streamed: the selection of traces (`since`,
traces judged before, a sample stratified by day) and the files `judge traces extract`
writes (rows.jsonl, skipped.jsonl, TREC runs); or, by session, into conversations.

The Python twin of `judge traces extract` is `read_rows` (rows as dicts, to pass to
`judge.evaluate`), `read_sessions` (`--sessions`: conversations as dicts) and `extract`
(the files).
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import IO, Any

from judge.errors import InputFormatError, JudgeError
from judge.formatting import counted
from judge.ir.trec import check_trec_id
from judge.json_values import escape_surrogates, lone_surrogate_in
from judge.lines import bounded_lines
from judge.run.folder import RunFolder
from judge.run.output_folder import OutputFolder
from judge.traces.assemble import DEFAULT_LINGER, AssemblyCounts, Trace, assemble
from judge.traces.langfuse import is_langfuse, read_langfuse
from judge.traces.otlp import is_otlp, read_requests
from judge.traces.phoenix import is_phoenix, read_phoenix
from judge.traces.rows import Skip, check_mapping, no_answer, retriever_query, trace_row
from judge.traces.sessions import Conversation, SessionSpool, too_long
from judge.traces.spans import unix_ns

PathLike = str | os.PathLike[str]
SOURCES = ("otlp", "phoenix", "langfuse")
RUN_TAG = "judge-traces"


@dataclass
class ExtractSummary:
    """What reading the traces found: counts of traces, rows, and traces left out by why."""

    spans: int = 0
    late_spans: int = 0
    duplicate_spans: int = 0
    traces: int = 0
    rows: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    before_since: int = 0
    judged_before: int = 0
    sampled_out: int = 0
    # By session (`read_sessions`): the sessions written (`rows` then counts their
    # turns), and the traces read twice that are one turn.
    sessions: int | None = None
    duplicate_traces: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON values."""
        by_session = (
            {}
            if self.sessions is None
            else {"sessions": self.sessions, "duplicate_traces": self.duplicate_traces}
        )
        return by_session | {
            "spans": self.spans,
            "late_spans": self.late_spans,
            "duplicate_spans": self.duplicate_spans,
            "traces": self.traces,
            "rows": self.rows,
            "skipped": dict(sorted(self.skipped.items())),
            "before_since": self.before_since,
            "judged_before": self.judged_before,
            "sampled_out": self.sampled_out,
        }

    def lines(self) -> list[str]:
        """The summary as sentences, one per count that is not zero."""
        written = (
            counted(self.rows, "row")
            if self.sessions is None
            else f"{counted(self.rows, 'turn')} in {counted(self.sessions, 'session')}"
        )
        out = [f"{counted(self.traces, 'trace')} ({counted(self.spans, 'span')}) read: {written}"]
        if self.skipped:
            reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items()))
            out.append(f"{counted(sum(self.skipped.values()), 'trace')} skipped ({reasons})")
        if self.before_since:
            out.append(f"{counted(self.before_since, 'trace')} started before since")
        if self.judged_before:
            out.append(f"{counted(self.judged_before, 'trace')} judged before")
        if self.sampled_out:
            out.append(f"{counted(self.sampled_out, 'trace')} left out of the sample")
        if self.duplicate_spans:
            out.append(
                f"{counted(self.duplicate_spans, 'span')} read twice (a span id already read "
                "in its trace: a collector's retry, or a file given twice), used once"
            )
        if self.duplicate_traces:
            out.append(
                f"{counted(self.duplicate_traces, 'trace')} read twice (a trace id already "
                "read: a file given twice), one turn"
            )
        if self.late_spans:
            out.append(
                f"{counted(self.late_spans, 'late span')} not used (more than linger spans "
                "after their trace was complete, or repeats of spans used before: a file "
                "given twice)"
            )
        return out


def parse_since(value: str | datetime | date) -> int:
    """A moment (ISO 8601 text, a datetime, a date) as Unix nanoseconds; naive is UTC."""
    if isinstance(value, str):
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
        except ValueError:
            raise JudgeError(
                f"since={value!r} is not an ISO 8601 date or time (e.g. 2026-12-04 or "
                "2026-12-04T06:00:00Z)"
            ) from None
    elif isinstance(value, datetime):
        moment = value
    else:
        moment = datetime(value.year, value.month, value.day)
    return unix_ns(moment)


def judged_files(paths: Iterable[PathLike]) -> list[Path]:
    """The files `judged_ids` reads: each path, or the results.jsonl in a folder."""
    found = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            path = RunFolder(path).results
        if not path.is_file():
            raise InputFormatError(
                "no such file: give a rows.jsonl or results.jsonl, or a judge eval output "
                "folder, of traces judged before",
                path=str(path),
            )
        found.append(path)
    return found


def judged_ids(paths: Iterable[PathLike]) -> set[str]:
    """The trace ids judged before: the `trace_id` (else `id`) of every line of rows.jsonl
    or results.jsonl files, or of the results.jsonl in a `judge eval` output folder; of a
    conversation's line (`--sessions`), the `trace_id` of each of its turns."""
    ids: set[str] = set()
    for path in judged_files(paths):
        with open(path, "rb") as handle:
            for number, line in bounded_lines(handle, path):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line.decode("utf-8"))
                except RecursionError:
                    raise InputFormatError(
                        "JSON nested too deeply", path=str(path), line=number
                    ) from None
                except ValueError as exc:  # not JSON, not UTF-8
                    raise InputFormatError(
                        f"not JSON ({exc})", path=str(path), line=number
                    ) from None
                if not isinstance(record, dict):
                    continue
                turns = record.get("turns")
                if isinstance(turns, list):  # a conversation (--sessions): its turns' traces
                    ids.update(
                        str(turn["trace_id"])
                        for turn in turns
                        if isinstance(turn, dict) and turn.get("trace_id") is not None
                    )
                    continue
                value = record.get("trace_id") or record.get("id")
                if value is not None:
                    ids.add(str(value))
    return ids


def sample_key(seed: int, trace_id: str) -> int:
    """A trace's place in the sample: a hash of the seed and its id, so a sample does not
    depend on the order of the files or of the traces in them."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{trace_id}".encode()).digest()[:8], "big")


class DaySample:
    """A sample of n rows stratified by day (UTC): each day gets its share of n, in
    proportion to its rows (largest remainders), filled by the rows of lowest
    `sample_key`. Holds at most n rows per day."""

    def __init__(self, n: int, seed: int) -> None:
        if n < 1:
            raise JudgeError(f"sample={n}: give a number of traces, at least 1")
        self.n = n
        self.seed = seed
        self.days: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
        self.counts: Counter[str] = Counter()

    def add(self, row: dict[str, Any]) -> None:
        """Offer one row to the sample."""
        day = str(row["start_time"])[:10]
        self.counts[day] += 1
        heap = self.days.setdefault(day, [])
        item = (-sample_key(self.seed, row["id"]), row["id"], row)  # a max-heap of keys
        if len(heap) < self.n:
            heapq.heappush(heap, item)
        elif item[0] > heap[0][0]:
            heapq.heapreplace(heap, item)

    def quotas(self) -> dict[str, int]:
        """How many rows each day gives."""
        total = sum(self.counts.values())
        if total <= self.n:
            return dict(self.counts)
        shares = {day: self.n * count / total for day, count in self.counts.items()}
        quotas = {day: int(share) for day, share in shares.items()}
        left = self.n - sum(quotas.values())
        by_remainder = sorted(shares, key=lambda d: (-(shares[d] - quotas[d]), d))
        for day in by_remainder[:left]:
            quotas[day] += 1
        return quotas

    def rows(self) -> list[dict[str, Any]]:
        """The sampled rows, in start time order."""
        chosen: list[dict[str, Any]] = []
        for day, quota in self.quotas().items():
            best = sorted(self.days[day], key=lambda item: -item[0])[:quota]
            chosen.extend(item[2] for item in best)
        return sorted(chosen, key=lambda r: (r["start_time"], r["id"]))


def source_of(path: PathLike) -> str | None:
    """The format of a trace file told from its content: "otlp", "phoenix", "langfuse",
    or None when it is none of them."""
    if is_otlp(path):
        return "otlp"
    if is_phoenix(path):
        return "phoenix"
    if is_langfuse(path):
        return "langfuse"
    return None


def read_spans(path: PathLike, source: str | None = None) -> Iterator[list[Any]]:
    """The spans of one trace file in batches, read as `source` says or as its content
    tells (an unknown format is read as OTLP, whose error says what was expected)."""
    source = source or source_of(path) or "otlp"
    if source == "phoenix":
        return read_phoenix(path)
    if source == "langfuse":
        return read_langfuse(path)
    return read_requests(path)


def read_traces(
    paths: Sequence[PathLike],
    linger: int = DEFAULT_LINGER,
    counts: AssemblyCounts | None = None,
    source: str | None = None,
) -> Iterator[Trace]:
    """The whole traces of trace files, read in the order given, as `assemble` groups
    them (a trace may straddle two files of a rotation); each file's format is `source`
    ("otlp", "phoenix", "langfuse"), or told from its content when None."""

    def batches() -> Iterator[list[Any]]:
        for path in paths:
            yield from read_spans(path, source)

    return assemble(batches(), linger=linger, counts=counts)


def read_rows(
    paths: PathLike | Sequence[PathLike],
    *,
    source: str | None = None,
    mapping: Mapping[str, str] | None = None,
    since: str | datetime | date | None = None,
    judged: Iterable[str] = (),
    sample: int | None = None,
    seed: int = 0,
    linger: int = DEFAULT_LINGER,
    on_skip: Callable[[Skip], None] | None = None,
    summary: ExtractSummary | None = None,
    query: bool = False,
    chat_turns: bool = False,
) -> Iterator[dict[str, Any]]:
    """The rows of trace files, one per trace, streamed: a `judge eval` input.

    Args:
        paths: OTLP trace files (JSON lines, protobuf, gzip of either), Phoenix span
            exports (parquet) or Langfuse exports (observations, or traces with their
            observations, as JSON).
        source: "otlp", "phoenix", "langfuse", or None to tell from each file's content.
        mapping: field -> attribute for custom instrumentation (see `judge.traces.rows`).
        since: only traces whose root span started at or after this moment.
        judged: trace ids judged before (`judged_ids`), left out.
        sample: keep a sample of this many traces, stratified by day (the rows then come
            at the end, in start time order).
        seed: the sample's seed: the same seed and traces give the same sample.
        linger: spans read after a trace's root before the trace is complete.
        on_skip: called with each trace that gives no row, and why.
        summary: filled with the counts as the rows are read.
        query: give each row the `query` its first retriever span was given, when that
            is recorded and is not the question (`rows.retriever_query`).
        chat_turns: the traces are turns of conversations: one without a retriever span
            is a row too (`rows.trace_row`'s `chat_turn`).
    """
    path_list = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if source is not None and source not in SOURCES:
        raise JudgeError(f"source={source!r}: traces are read from {', '.join(SOURCES)}")
    checked = check_mapping(mapping)
    since_ns = parse_since(since) if since is not None else None
    judged_set = set(judged)
    sampler = DaySample(sample, seed) if sample is not None else None
    summary = summary if summary is not None else ExtractSummary()
    counts = AssemblyCounts()
    for trace in read_traces(path_list, linger=linger, counts=counts, source=source):
        summary.traces += 1
        result: dict[str, Any] | Skip
        root = trace.root
        assert root is not None  # assemble gives every trace it emits a root
        if since_ns is not None and root.start_ns < since_ns:
            summary.before_since += 1
            continue
        if trace.trace_id in judged_set:
            summary.judged_before += 1
            continue
        result = trace_result(trace, checked, query=query, chat_turn=chat_turns)
        _counted(summary, counts)
        if isinstance(result, Skip):
            summary.skipped[result.reason] += 1
            if on_skip is not None:
                on_skip(result)
            continue
        if result["answer"] is None:  # a chat turn the app failed: no row to judge, but
            # its question is its session's history
            asked = next(s for s in trace.spans if s.span_id == result["span_id"])
            skip = no_answer(trace.trace_id, asked)
            summary.skipped[skip.reason] += 1
            if on_skip is not None:
                on_skip(skip)
        if sampler is not None:
            sampler.add(result)
            continue
        summary.rows += 1
        yield result
    _counted(summary, counts)
    if sampler is not None:
        chosen = sampler.rows()
        summary.rows = len(chosen)
        summary.sampled_out = sum(sampler.counts.values()) - len(chosen)
        yield from chosen


def trace_result(
    trace: Trace,
    mapping: Mapping[str, str] | None = None,
    *,
    query: bool = False,
    chat_turn: bool = False,
) -> dict[str, Any] | Skip:
    """One whole trace (as `read_traces` gives it) as its row, or why it gives none: what
    `read_rows` does with each trace it keeps, for a reader that assembles traces itself.

    Args:
        trace: a trace with its root found.
        mapping: field -> attribute, checked (`rows.check_mapping`).
        query: give the row the `query` its first retriever span was given.
        chat_turn: the trace is a conversation's turn (`rows.trace_row`).
    """
    root = trace.root
    assert root is not None  # assemble gives every trace it emits a root
    result = trace_row(trace.spans, root, dict(mapping or {}), chat_turn=chat_turn)
    if query and not isinstance(result, Skip):
        found = retriever_query(trace.spans, result["question"])
        if found is not None:
            result["query"] = found
    if not isinstance(result, Skip):
        result = _unwritable(result) or result
    if isinstance(result, Skip) and trace.missing_parent is not None:
        # Its top span's parent was not read: most likely the trace is cut off above.
        result = Skip(
            trace.trace_id,
            "no_root",
            f"the trace's top span {root.span_id} ({root.name}) has a parent "
            f"{trace.missing_parent} that was not read: the root span is in a file not "
            f"given, or the trace was cut off; what was read gives no row: {result.message}",
        )
    if isinstance(result, Skip):
        return Skip(*escape_surrogates([result.trace_id, result.reason, result.message]))
    return result


def conversations(
    paths: PathLike | Sequence[PathLike],
    *,
    since: str | datetime | date | None = None,
    judged: Iterable[str] = (),
    sample: int | None = None,
    seed: int = 0,
    on_skip: Callable[[Skip], None] | None = None,
    summary: ExtractSummary | None = None,
    **options: Any,
) -> Iterator[Conversation]:
    """The sessions of trace files as conversations, each as its line (`read_sessions`)."""
    since_ns = parse_since(since) if since is not None else None
    judged_set = set(judged)
    sampler = DaySample(sample, seed) if sample is not None else None
    summary = summary if summary is not None else ExtractSummary()
    summary.sessions = 0

    def skipped(skip: Skip) -> None:
        summary.skipped[skip.reason] += 1
        if on_skip is not None:
            on_skip(skip)

    spool = SessionSpool()
    try:
        # Every trace is read: one judged before or started before `since` is a turn of
        # its session's history, written when the session has a turn that is new.
        rows = read_rows(
            paths, on_skip=on_skip, summary=summary, query=True, chat_turns=True, **options
        )
        for row in rows:
            # A turn the app failed (no answer: reported as no_output already) is history
            # only: nothing of it is judged, so it never makes its session new.
            answered = row["answer"] is not None
            fresh = (
                answered
                and row["trace_id"] not in judged_set
                and (since_ns is None or parse_since(row["start_time"]) >= since_ns)
            )
            runs = (_ranking(row["retrieved_ids"]), retriever_ids(row))
            skip = spool.add(row, fresh, runs)
            if skip is not None and answered:
                skipped(skip)
        summary.rows = 0
        summary.duplicate_traces = spool.duplicates
        chosen: set[str] | None = None
        if sampler is not None:
            for session, first, fresh in spool.sessions():
                if fresh:
                    sampler.add({"id": session, "start_time": first})
            chosen = {item["id"] for item in sampler.rows()}
        spool.keep(chosen)
        for trace_id, session_fresh in spool.left_out():
            if session_fresh:
                summary.sampled_out += 1
            elif trace_id in judged_set:
                summary.judged_before += 1
            else:
                summary.before_since += 1
        for conversation in spool.conversations():
            skips = too_long(conversation)
            for skip in skips:
                skipped(skip)
            if not skips:
                summary.rows += len(conversation.traces)
                summary.sessions += 1
                yield conversation
    finally:
        spool.close()


def read_sessions(paths: PathLike | Sequence[PathLike], **options: Any) -> Iterator[dict[str, Any]]:
    """The conversations of trace files, one per session, as `judge traces extract
    --sessions` writes them: {"id": session id, "turns": [{"role": "user", "content"},
    {"role": "assistant", "content", "contexts", "retrieved_ids", "trace_id", "span_id",
    "query"}, ...]}, each trace one turn (see `judge.traces.sessions`).

    Args:
        paths: trace files, as `read_rows` reads them.
        **options: those of `read_rows`, by session: `since` keeps the sessions with a
            turn that started at or after it, `judged` leaves out the sessions whose turns
            were all judged before (a session kept has all its turns), `sample` keeps
            that many sessions stratified by the day of their first turn. A trace without
            a session id (or one with control characters) is a skip, as is a session
            longer than the longest line judge reads (`JUDGE_MAX_LINE_MB`).
    """
    for conversation in conversations(paths, **options):
        yield json.loads(conversation.line)


def _unwritable(row: dict[str, Any]) -> Skip | None:
    """Why a trace's row cannot be written, as its skip; None when it can. Text that is no
    Unicode (a lone surrogate) cannot be written as UTF-8; an id a TREC file cannot hold
    (white space, control characters, empty) would forge or break the lines of its run."""
    trace_id = escape_surrogates(str(row["id"]))
    where = lone_surrogate_in(row)
    if where is not None:
        field = next(key for key, value in row.items() if lone_surrogate_in(value) is not None)
        return Skip(
            trace_id,
            "not_unicode",
            f"the trace's {field} holds a lone surrogate ({where}), which is not Unicode text: "
            "half of a UTF-16 pair, from a broken \\u escape or a wrong decoding in the "
            "instrumentation",
        )
    try:
        qid = check_trec_id(str(row["id"]), "the trace id")
        for entry in [{"ids": row["retrieved_ids"]}, *(row.get("retrievals") or ())]:
            for doc in _ranking(entry.get("ids")):
                check_trec_id(doc, f"document id of trace {qid}")
    except InputFormatError as exc:
        return Skip(trace_id, "unfit_id", str(exc))
    return None


def _counted(summary: ExtractSummary, counts: AssemblyCounts) -> None:
    summary.spans, summary.late_spans = counts.spans, counts.late_spans
    summary.duplicate_spans = counts.duplicate_spans


def _ranking(ids: Sequence[Any] | None) -> list[str]:
    """A ranked list of ids for a TREC run: None ids dropped, a repeated id kept once."""
    return list(dict.fromkeys(str(i) for i in ids or () if i is not None))


def retriever_ids(row: Mapping[str, Any]) -> list[str]:
    """The ids the retriever spans found, in start order, before any reranker."""
    ids: list[Any] = []
    for entry in row.get("retrievals") or ():
        if entry.get("kind") != "RERANKER":
            ids.extend(entry.get("ids") or ())
    return _ranking(ids)


def write_run_lines(out: IO[str], qid: str, ids: Sequence[Any]) -> None:
    """One query's ranking as TREC run lines; the score falls with the rank (n, n-1, ...)
    so that trec_eval, which ranks by score, keeps the span's order."""
    ranked = _ranking(ids)
    for doc in [qid, *ranked]:  # read_rows skips the traces with such ids: never met there
        check_trec_id(doc, "query id" if doc is qid else f"document id of query {qid!r}")
    for rank, doc in enumerate(ranked, start=1):
        out.write(f"{qid} Q0 {doc} {rank} {len(ranked) - rank + 1} {RUN_TAG}\n")


def extract(
    paths: PathLike | Sequence[PathLike],
    out: PathLike,
    *,
    run: PathLike | None = None,
    retriever_run: PathLike | None = None,
    skipped: PathLike | None = None,
    judged_from: Sequence[PathLike] = (),
    sessions: bool = False,
    **options: Any,
) -> ExtractSummary:
    """Write the rows of trace files to `out` (JSONL), and optionally their TREC runs and
    the traces skipped; returns the counts.

    Args:
        paths: OTLP trace files.
        out: rows.jsonl, one row per trace (`read_rows`).
        run: a TREC run of the documents the generator saw per trace (after a reranker):
            qid = trace id, the ranking in the spans' order.
        retriever_run: the same of the retriever spans' documents, before any reranker
            (the same as `run` for a trace without a reranker): `judge compare` the two.
        skipped: skipped.jsonl, one line per trace that gave no row:
            {"trace_id", "reason", "message"}.
        judged_from: the files or folders the `judged` ids were read from (`judged_ids`):
            no output may be one of them.
        sessions: write conversations, one per session (`read_sessions`), instead of
            rows; the runs and skips stay per trace (qid = the trace id of each turn).
        **options: those of `read_rows` (mapping, since, judged, sample, seed, ...).

    The files are written as `judge eval` writes its folder (`OutputFolder`): each folder
    locked while the extract runs (a second run writing there at once is refused), every
    file written under a temporary name and published whole at the end, the rows last; an
    extract that fails leaves the files before it as they were.
    """
    inputs = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    read = {Path(p).resolve() for p in inputs}
    for written in (out, run, retriever_run, skipped):
        if written is not None and Path(written).resolve() in read:
            raise JudgeError(f"{written} is a trace file being read: write the rows elsewhere")
    judged = {p.resolve() for p in judged_files(judged_from)}
    for written in (out, run, retriever_run, skipped):
        if written is not None and Path(written).resolve() in judged:
            raise JudgeError(
                f"{written} is a file of traces judged before, being read: writing it would "
                "lose that record; write the outputs elsewhere"
            )
    # Published in this order, the rows last: what reads the rows finds the rest there.
    targets = [Path(p) for p in (skipped, run, retriever_run, out) if p is not None]
    if len({p.resolve() for p in targets}) < len(targets):
        raise JudgeError(
            f"{', '.join(map(str, targets))}: two outputs name one file; give each its own path"
        )
    summary = ExtractSummary()
    with contextlib.ExitStack() as stack:
        folders: dict[Path, OutputFolder] = {}
        handles: dict[Path, IO[str]] = {}
        for path in targets:
            where = path.parent.resolve()
            if where not in folders:
                folders[where] = stack.enter_context(OutputFolder(where))
            temporary = stack.enter_context(folders[where].writing(path.name))
            handles[path] = stack.enter_context(open(temporary, "w", encoding="utf-8"))

        def handle(path: PathLike | None) -> IO[str] | None:
            return None if path is None else handles[Path(path)]

        rows_out = handles[Path(out)]
        run_out, retriever_out, skipped_out = handle(run), handle(retriever_run), handle(skipped)

        def on_skip(skip: Skip) -> None:
            if skipped_out is not None:
                skipped_out.write(json.dumps(skip.to_dict(), ensure_ascii=False) + "\n")

        if sessions:
            for conversation in conversations(inputs, on_skip=on_skip, summary=summary, **options):
                rows_out.write(conversation.line + "\n")
                for trace_id, generator, retriever in conversation.traces:
                    if run_out is not None and generator:
                        write_run_lines(run_out, trace_id, generator)
                    if retriever_out is not None:
                        write_run_lines(retriever_out, trace_id, retriever)
        for row in (
            () if sessions else read_rows(inputs, on_skip=on_skip, summary=summary, **options)
        ):
            rows_out.write(json.dumps(row, ensure_ascii=False) + "\n")
            if run_out is not None and row["retrieved_ids"]:
                write_run_lines(run_out, row["id"], row["retrieved_ids"])
            if retriever_out is not None:
                write_run_lines(retriever_out, row["id"], retriever_ids(row))
        for opened in handles.values():
            opened.close()  # flushed (a full disk says so here), before the renames
        for path in targets:
            folders[path.parent.resolve()].publish([path.name])
    return summary
