"""judge's scores back beside the traces they judge: OpenTelemetry GenAI evaluation events.

One event per (judged row, metric), named `gen_ai.evaluation.result`, with the attributes of
the OpenTelemetry GenAI semantic conventions (semantic-conventions-genai,
docs/gen-ai/gen-ai-events.md, "Event: gen_ai.evaluation.result", status Development):

- `gen_ai.evaluation.name` (required): the metric's name;
- `gen_ai.evaluation.score.value` (conditionally required "if applicable", a double): the
  score; left out when the score is undefined (NaN), since there is none to give;
- `gen_ai.evaluation.score.label` (conditionally required "if applicable"): `pass` or `fail`
  against a threshold given for the metric, on the metric's good side (`hallucination_rate`
  passes at or below it); left out without a threshold or a score. These two are the only
  labels judge writes (the spec asks implementations to document theirs);
- `gen_ai.evaluation.explanation` (recommended): a short, deterministic account from the
  row's evidence (the unsupported claims for faithfulness, the context grades, ...) or, for
  an undefined score, its reason (`undefined: no_contexts`) or the judge's failure;
- `error.type` (conditionally required "if the operation ended in an error"): `judge_error`
  when the judge failed on the row after its retries, `row_error` when judge could not read
  the row.

The spec says the event "SHOULD be parented to GenAI operation span being evaluated", and
events are log records with an event name (the OpenTelemetry logs data model, "Events"): so
each event is an OTLP LogRecord with `eventName` set and the trace id and span id of the
judged row (the span `judge traces extract` read the row from; for a turn of a session,
the span its turn was read from: each turn is a trace). A row with a trace id but no
span id gets a record linked to the trace alone (a LogRecord's span id is optional); such
events cannot be Phoenix span evaluations, which need a span, and are counted there, as are
the events without a score. Rows read from Langfuse observations made without
OpenTelemetry have Langfuse's own ids, which are not OpenTelemetry ids: a UUID trace id is
taken as its 32 hex digits, and a span id that is not 16 hex digits (an observation id)
links the event to the trace alone, counted in the notes (`EvaluationEvents.trace_only`).

The events leave judge three ways: OTLP JSON lines as the Collector's file exporter writes
them (`write_otlp_json`: one ExportLogsServiceRequest per line, ids in hex), the real
OpenTelemetry SDK's OTLP/HTTP log exporter (`send_otlp`, extra `judge[otel]`, imported there
alone), and Phoenix span evaluations (`phoenix_evaluations`, `write_phoenix`).
"""

from __future__ import annotations

import contextlib
import math
import re
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from judge.conversations import DistinctIds, is_conversation
from judge.errors import InputFormatError, JudgeError
from judge.formatting import counted
from judge.metrics.registry import JUDGE_ERROR
from judge.run.gates import Bound, good_side
from judge.run.rows import ResultRow
from judge.traces.explanations import explain, shorten

EVENT_NAME = "gen_ai.evaluation.result"
NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
ERROR_TYPE = "error.type"
PASS, FAIL = "pass", "fail"
ROW_ERROR = "row_error"  # the error.type of a row judge could not read
_LISTED = 3  # ids named in a note; the rest are counted

_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")
_INVALID_TRACE = "0" * 32
_INVALID_SPAN = "0" * 16


@dataclass(frozen=True)
class TraceLink:
    """The trace and span one judged row came from (hex ids; no span: the trace alone)."""

    trace_id: str
    span_id: str | None
    unlinked_span: str | None = None  # a span id that is not OpenTelemetry's, left out


@dataclass(frozen=True)
class EvaluationEvent:
    """One `gen_ai.evaluation.result` event: a metric's result on one row, linked to its trace.

    Args:
        row_id: the row's id in the rows file and results.jsonl.
        trace_id: the judged trace, 32 lowercase hex digits.
        span_id: the judged span, 16 lowercase hex digits, or None for the trace alone.
        metric: the metric's name (`gen_ai.evaluation.name`).
        score: the score, or None when undefined (`gen_ai.evaluation.score.value` left out).
        label: `pass` or `fail` against the metric's threshold, else None.
        explanation: why the score is what it is, or why there is none.
        error_type: `judge_error` or `row_error` when judging failed, else None.
    """

    row_id: str
    trace_id: str
    span_id: str | None
    metric: str
    score: float | None
    label: str | None = None
    explanation: str | None = None
    error_type: str | None = None

    def attributes(self) -> dict[str, str | float]:
        """The event's attributes by the semantic conventions, unset ones left out."""
        out: dict[str, str | float] = {NAME: self.metric}
        if self.score is not None:
            out[SCORE_VALUE] = self.score
        if self.label is not None:
            out[SCORE_LABEL] = self.label
        if self.explanation:
            out[EXPLANATION] = self.explanation
        if self.error_type is not None:
            out[ERROR_TYPE] = self.error_type
        return out


@dataclass
class EvaluationEvents:
    """The events of a run's results, and the results that gave none, by why (never silent).

    Attributes:
        events: one per (linked row, metric), in results order then metric order.
        skipped: why -> the ids of the result rows left out: `no_trace_row` (no row of
            that id in the rows file), `no_trace_id` (its row has no trace id),
            `other_trace` (the result names another trace than its row: a conversation's
            turn, whose id is its position, in a sessions file extracted again since),
            `unreadable_row` (judge could not read the row: no score to send).
        trace_only: the ids of the result rows whose span id is not an OpenTelemetry
            span id (Langfuse's observation ids): their events link to the trace alone.
        linked_rows: how many result rows gave events (two rows of one id, on one span,
            are two).
    """

    events: list[EvaluationEvent] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    trace_only: list[str] = field(default_factory=list)
    linked_rows: int = 0

    def __iter__(self) -> Iterator[EvaluationEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def notes(self) -> list[str]:
        """One line per reason rows were left out, with a few of their ids."""
        words = {
            "no_trace_row": "had no row of the same id in the rows file",
            "no_trace_id": "had a row without a trace_id",
            "other_trace": "named another trace than their row of the same id (give the "
            "rows file the run judged, not one extracted again since: a turn's id is its "
            "place in its session)",
            "unreadable_row": "judge could not read (no score to send)",
        }
        lines = []
        for why, ids in sorted(self.skipped.items()):
            shown = ", ".join(ids[:_LISTED]) + (", ..." if len(ids) > _LISTED else "")
            lines.append(f"{counted(len(ids), 'result row')} {words.get(why, why)}: {shown}")
        if self.trace_only:
            ids = self.trace_only
            shown = ", ".join(ids[:_LISTED]) + (", ..." if len(ids) > _LISTED else "")
            lines.append(
                f"{counted(len(ids), 'result row')} had a span_id that is not an OpenTelemetry "
                "span id "
                "(16 hex digits; Langfuse's observation ids are not OpenTelemetry ids): their "
                f"events link to the trace alone: {shown}"
            )
        return lines


def trace_links(
    rows: Iterable[Mapping[str, Any]], *, path: str | None = None, named: str | None = None
) -> dict[str, TraceLink | None]:
    """The trace link of each row by its id (the row number when it has no id, as `judge
    eval` numbers rows); None for a row without a trace_id.

    A record that is a conversation (`judge traces extract --sessions` writes one per
    session) gives the links of its assistant turns, by the ids `judge eval` gives their
    rows (`<conversation id>#<turn>`, read by `judge.conversations.DistinctIds`), each
    from its turn's `trace_id` and `span_id`; a conversation of an earlier one's id has
    none (judge eval does not judge it).

    Two rows of one id are refused unless they name the same trace and span: a result row
    finds its trace by its id alone, so one of them would take the other's scores.

    Args:
        rows: the rows `judge eval` judged, with `trace_id` and `span_id` columns (as
            `judge traces extract` writes them), or the conversations it judged.
        path: the file the rows come from, for error messages.
        named: how the caller named the rows, for error messages (the CLI's `--rows
            FILE`); by default the path, or `rows[i]` without one.

    Raises:
        InputFormatError: a trace_id that is not one, or an id that names rows of
            different traces or spans.
    """
    links: dict[str, TraceLink | None] = {}
    ids = DistinctIds()  # a conversation of an earlier one's id is judge eval's error row
    # The number of the first record of each id, to name it when another takes that id.
    firsts: dict[str, int] = {}
    for number, record in enumerate(rows):
        # A conversation is numbered as judge eval numbers it: by its place among the records.
        conversation = is_conversation(record)
        turns = ids.turn_records(record, number) if conversation else [record]
        for row in turns:
            key = str(row["id"]) if row.get("id") is not None else str(number)
            trace = _trace_id(row.get("trace_id"), path, number)
            span_value = row.get("span_id")
            span = _span_id(span_value)
            unlinked = None if span is not None or span_value in (None, "") else str(span_value)
            link = None if trace is None else TraceLink(trace, span, unlinked)
            first = firsts.setdefault(key, number)
            if first != number and links[key] != link:
                turn = row.get("turn") if conversation else None  # a row's "turn" is data
                clash = _Clash(key, first, number, conversation, turn)
                raise clash.error(links[key], link, named or path)
            links[key] = link
    return links


@dataclass(frozen=True)
class _Clash:
    """Two records whose rows have one id: `first` and `second` are the records' numbers,
    `conversation` says whether they are conversations (an input holds one kind: `judge
    eval` refuses a mix), `turn` the turn of theirs that has that id."""

    key: str
    first: int
    second: int
    conversation: bool
    turn: int | None

    def error(
        self, first: TraceLink | None, second: TraceLink | None, where: str | None
    ) -> InputFormatError:
        """The error, in the caller's words: `rows[0]` in Python, `rows 0` after the file
        or flag (`where`)."""
        kind = "conversation" if self.conversation else "row"
        if where is None:
            both = f"rows[{self.first}] and rows[{self.second}]"
            both = "the conversations " + both if self.conversation else both
        else:
            both = f"{kind}s {self.first} and {self.second}"
        # The record's id (a turn's id is its conversation's, "#", and its place).
        ident = self.key.rpartition("#")[0] if self.turn is not None else self.key
        unnamed = [n for n in (self.first, self.second) if ident == str(n)]
        none = "".join(
            f" ({f'rows[{n}]' if where is None else f'{kind} {n}'} has none: it goes by its "
            f"number, as judge eval numbers {kind}s)"
            for n in unnamed
        )
        same_trace = first is not None and second is not None and first.trace_id == second.trace_id
        differ = "spans" if same_trace else "traces"
        text = f"{both} have the same id {ident!r}{none} but different {differ}"
        if self.conversation:
            text += (
                f"{'' if self.turn is None else f' for turn {self.turn}'}: a turn's score "
                "finds its trace by its conversation's id and its place; give each "
                "conversation its own id and evaluate again"
            )
        else:
            text += (
                ": a score finds its trace by its row's id; give each row its own id (an id "
                "column) and evaluate again"
            )
        return InputFormatError(text if where is None else f"{where}: {text}")


def _trace_id(value: Any, path: str | None, number: int) -> str | None:
    """A trace id as 32 lowercase hex digits (a UUID's too: Langfuse's trace ids made
    without OpenTelemetry); None when absent; an error when it is neither."""
    if value is None or value == "":
        return None
    text = str(value).strip().lower().removeprefix("0x")
    if not _TRACE_ID.fullmatch(text):
        with contextlib.suppress(ValueError):
            text = uuid.UUID(text).hex
    if not _TRACE_ID.fullmatch(text) or text == _INVALID_TRACE:
        raise InputFormatError(
            f"trace_id {value!r} is not an OpenTelemetry trace id (32 hex digits, not all "
            "zero) nor a UUID: Langfuse's own ids (of traces made without OpenTelemetry) "
            "are not OpenTelemetry ids, so the events cannot be linked to them; give the "
            "rows `judge traces extract` wrote from OpenTelemetry traces",
            path=path,
            line=number + 1 if path else None,
        )
    return text


def _same_trace(value: str) -> str | None:
    """A result row's trace id as the rows' are read, to compare them; None when it is
    none (it matches no row's)."""
    try:
        return _trace_id(value, None, 0)
    except InputFormatError:
        return None


def _span_id(value: Any) -> str | None:
    """A span id as 16 lowercase hex digits; None when absent or not an OpenTelemetry
    span id (a Langfuse observation id): the event then links to the trace alone."""
    if value is None or value == "":
        return None
    text = str(value).strip().lower().removeprefix("0x")
    return text if _SPAN_ID.fullmatch(text) and text != _INVALID_SPAN else None


def evaluation_events(
    results: Iterable[ResultRow | Mapping[str, Any]],
    rows: Iterable[Mapping[str, Any]] | Mapping[str, TraceLink | None],
    *,
    thresholds: Mapping[str, float] | None = None,
    lower_is_better: Collection[str] = (),
) -> EvaluationEvents:
    """The `gen_ai.evaluation.result` events of a run's results, each linked to the trace and
    span its row came from (joined by row id).

    Args:
        results: the run's result rows (`ResultRow`s, or results.jsonl lines as dicts).
        rows: the rows the run judged (with `id`, `trace_id`, `span_id`), the
            conversations it judged (their turns with `trace_id` and `span_id`, as
            `judge traces extract --sessions` writes them), or their `trace_links`.
        thresholds: metric -> the score at which a row passes; gives the events of that
            metric the label `pass` or `fail` (on the metric's good side).
        lower_is_better: the run's own metrics where lower is better (its summary.json
            config's `lower_is_better`): their thresholds are caps, as the built-ins'.

    Returns:
        The events, and the result rows left out by why (`EvaluationEvents.skipped`).
    """
    links = rows if isinstance(rows, Mapping) else trace_links(rows)
    limits = dict(thresholds or {})
    out = EvaluationEvents()
    seen: set[str] = set()
    for result in results:
        row = result if isinstance(result, ResultRow) else ResultRow.from_json(result)
        row_id = str(row.id if row.id is not None else row.row)
        link = links.get(row_id)
        why = None
        if link is None:
            why = "no_trace_id" if row_id in links else "no_trace_row"
        elif row.trace_id is not None and _same_trace(row.trace_id) != link.trace_id:
            # A turn's id is its place in its session: a session extracted again with a
            # trace that came late puts another turn at that place.
            why = "other_trace"
        elif row.error and not row.scores:
            why = "unreadable_row"
        if why is not None or link is None:
            out.skipped.setdefault(why or "no_trace_row", []).append(row_id)
            continue
        seen.update(row.scores)
        out.linked_rows += bool(row.scores)
        if link.unlinked_span is not None and row.scores:
            out.trace_only.append(row_id)
        for metric in sorted(row.scores):
            threshold = limits.get(metric)
            bound = None if threshold is None else good_side(metric, threshold, lower_is_better)
            out.events.append(_event(row, row_id, link, metric, bound))
    unknown = sorted(set(limits) - seen)
    if unknown and out.events:
        raise JudgeError(
            f"thresholds= names {', '.join(map(repr, unknown))}, which no judged row has; "
            f"the metrics are {', '.join(sorted(seen))}"
        )
    return out


def _event(
    row: ResultRow, row_id: str, link: TraceLink, metric: str, bound: Bound | None
) -> EvaluationEvent:
    """The event of one metric on one row, labelled against its bound if it has one."""
    value = float(row.scores[metric])
    if not math.isnan(value):
        label = None
        if bound is not None:
            label = PASS if bound.passes(value) else FAIL
        return EvaluationEvent(
            row_id, link.trace_id, link.span_id, metric, value, label, explain(metric, row)
        )
    reason = row.reasons.get(metric)
    if row.error:
        error_type: str | None = ROW_ERROR
        text = f"judge could not read the row: {row.error}"
    elif reason == JUDGE_ERROR:
        error_type = JUDGE_ERROR
        text = f"the judge failed: {row.errors.get(metric, 'no message')}"
    else:
        error_type = None
        text = f"undefined: {reason or 'missing'}"
    return EvaluationEvent(
        row_id, link.trace_id, link.span_id, metric, None, None, shorten(text), error_type
    )
