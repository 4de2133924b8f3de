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
judged row (the span `judge traces extract` read the row from). A row with a trace id but no
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
import json
import math
import os
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from judge.errors import InputFormatError, JudgeError
from judge.formatting import counted
from judge.ir.measure_names import parse_measure
from judge.metrics.registry import JUDGE_ERROR
from judge.run.gates import good_side
from judge.run.rows import ResultRow
from judge.version import __version__

if TYPE_CHECKING:
    import pandas as pd

EVENT_NAME = "gen_ai.evaluation.result"
NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
ERROR_TYPE = "error.type"
PASS, FAIL = "pass", "fail"
ROW_ERROR = "row_error"  # the error.type of a row judge could not read

# The producer of the events, as the resource and instrumentation scope of every record.
SERVICE_NAME = "judge"
BATCH = 512  # records per ExportLogsServiceRequest (the SDK batch processor's default size)
EXPLANATION_CHARS = 400  # an explanation stays short: a trace view shows it in one cell
_LISTED = 3  # claims or checks named in an explanation; the rest are counted
_CLAIM_CHARS = 80

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
            `unreadable_row` (judge could not read the row: no score to send).
        trace_only: the ids of the result rows whose span id is not an OpenTelemetry
            span id (Langfuse's observation ids): their events link to the trace alone.
    """

    events: list[EvaluationEvent] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    trace_only: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[EvaluationEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def notes(self) -> list[str]:
        """One line per reason rows were left out, with a few of their ids."""
        words = {
            "no_trace_row": "had no row of the same id in the rows file",
            "no_trace_id": "had a row without a trace_id",
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
    rows: Iterable[Mapping[str, Any]], *, path: str | None = None
) -> dict[str, TraceLink | None]:
    """The trace link of each row by its id (the row number when it has no id, as `judge
    eval` numbers rows); None for a row without a trace_id.

    Args:
        rows: the rows `judge eval` judged, with `trace_id` and `span_id` columns (as
            `judge traces extract` writes them).
        path: the file the rows come from, for error messages.
    """
    links: dict[str, TraceLink | None] = {}
    for number, row in enumerate(rows):
        key = str(row["id"]) if row.get("id") is not None else str(number)
        trace = _trace_id(row.get("trace_id"), path, number)
        span_value = row.get("span_id")
        span = _span_id(span_value)
        unlinked = None if span is not None or span_value in (None, "") else str(span_value)
        links[key] = None if trace is None else TraceLink(trace, span, unlinked)
    return links


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
) -> EvaluationEvents:
    """The `gen_ai.evaluation.result` events of a run's results, each linked to the trace and
    span its row came from (joined by row id).

    Args:
        results: the run's result rows (`ResultRow`s, or results.jsonl lines as dicts).
        rows: the rows the run judged (with `id`, `trace_id`, `span_id`), or their
            `trace_links`.
        thresholds: metric -> the score at which a row passes; gives the events of that
            metric the label `pass` or `fail` (on the metric's good side).

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
        elif row.error and not row.scores:
            why = "unreadable_row"
        if why is not None or link is None:
            out.skipped.setdefault(why or "no_trace_row", []).append(row_id)
            continue
        seen.update(row.scores)
        if link.unlinked_span is not None and row.scores:
            out.trace_only.append(row_id)
        for metric in sorted(row.scores):
            out.events.append(_event(row, row_id, link, metric, limits.get(metric)))
    unknown = sorted(set(limits) - seen)
    if unknown and out.events:
        raise JudgeError(
            f"thresholds= names {', '.join(map(repr, unknown))}, which no judged row has; "
            f"the metrics are {', '.join(sorted(seen))}"
        )
    return out


def _event(
    row: ResultRow, row_id: str, link: TraceLink, metric: str, threshold: float | None
) -> EvaluationEvent:
    """The event of one metric on one row."""
    value = float(row.scores[metric])
    if not math.isnan(value):
        label = None
        if threshold is not None:
            label = PASS if good_side(metric, threshold).passes(value) else FAIL
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
        row_id, link.trace_id, link.span_id, metric, None, None, _short(text), error_type
    )


def explain(metric: str, row: ResultRow) -> str | None:
    """A short, deterministic explanation of a defined score from the row's evidence, or
    None when the evidence says nothing of this metric (a retrieval metric, for one)."""
    evidence = row.evidence
    base = metric.partition("@")[0]
    text: str | None = None
    if base in ("faithfulness", "faithfulness_strict", "hallucination_rate"):
        text = _claims(evidence, "answer", "answer claim", "by the contexts")
    elif base == "context_recall":
        text = _claims(evidence, "truth", "ground-truth claim", "by the contexts")
    elif base in ("context_precision", "context_relevance", "context_ndcg"):
        grades = [g.get("grade") for g in evidence.get("context_grades") or []]
        if grades:
            text = f"context grades (0-3) in rank order: {', '.join(map(str, grades))}"
    elif base == "answer_correctness":
        text = _correctness(evidence.get("correctness"))
    elif base == "answer_relevancy":
        text = _relevancy(evidence.get("reverse_questions"))
    elif base == "citation_accuracy":
        text = _citations(evidence.get("citation_checks"))
    elif base == "context_focus":
        focus = evidence.get("context_sentences") or {}
        if focus:
            needed = len(focus.get("needed") or [])
            total = sum(focus.get("per_context") or [])
            text = (
                f"{needed} of {counted(total, 'context sentence')} needed. "
                f"{focus.get('reason') or ''}"
            )
    else:  # a custom metric keeps its judge's reply under its name
        reply = evidence.get(metric)
        if isinstance(reply, Mapping):
            for key in ("explanation", "reason", "reasoning", "rationale"):
                if isinstance(reply.get(key), str):
                    text = reply[key]
                    break
    return _short(text.strip()) if text and text.strip() else None


def _claims(evidence: Mapping[str, Any], side: str, what: str, against: str) -> str | None:
    """How many claims were supported, and the first unsupported ones with their reasons
    (`what`: the claims' noun, singular)."""
    claims = evidence.get(f"{side}_claims")
    verdicts = evidence.get(f"{side}_verdicts")
    if not isinstance(claims, list) or not isinstance(verdicts, list):
        return None
    bad = [v for v in verdicts if v.get("verdict") != "supported"]
    if not bad:
        return f"{counted(len(verdicts), what)}, all supported {against}"
    named = []
    for v in bad[:_LISTED]:
        number = v.get("claim")
        claim = claims[number] if isinstance(number, int) and number < len(claims) else "?"
        named.append(f"{_clip(claim)!r} ({v.get('verdict')}: {v.get('reason')})")
    more = f"; and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
    return f"{len(bad)} of {counted(len(verdicts), what)} not supported {against}: " + (
        "; ".join(named) + more
    )


def _correctness(found: Any) -> str | None:
    """The two directions answer_correctness's F1 is made of."""
    if not isinstance(found, Mapping):
        return None
    answer = found.get("answer_claims_vs_ground_truth") or []
    truth = found.get("truth_claims_vs_answer") or []

    def supported(verdicts: list[Mapping[str, Any]]) -> int:
        return sum(v.get("verdict") == "supported" for v in verdicts)

    return (
        f"answer claims supported by the ground truth: {supported(answer)} of {len(answer)}; "
        f"ground-truth claims supported by the answer: {supported(truth)} of {len(truth)}"
    )


def _relevancy(found: Any) -> str | None:
    """Whether the answer was noncommittal, else its reverse questions' similarities."""
    if not isinstance(found, Mapping):
        return None
    if found.get("noncommittal"):
        return "the answer is noncommittal"
    similarities = found.get("similarities") or []
    shown = ", ".join(f"{s:.2f}" for s in similarities)
    return f"similarity of the question to questions generated from the answer: {shown}"


def _citations(checks: Any) -> str | None:
    """The citations not supported by the context they cite, with the judge's reasons."""
    if not isinstance(checks, list) or not checks:
        return None
    bad = [c for c in checks if not c.get("supported")]
    if not bad:
        return f"{counted(len(checks), 'citation')}, all supported by the cited context"
    reasons = "; ".join(str(c.get("reason")) for c in bad[:_LISTED])
    return f"{len(bad)} of {counted(len(checks), 'citation')} not supported: {reasons}"


def _clip(text: str) -> str:
    return text if len(text) <= _CLAIM_CHARS else text[: _CLAIM_CHARS - 3] + "..."


def _short(text: str) -> str:
    """An explanation cut to EXPLANATION_CHARS."""
    text = " ".join(text.split())
    return text if len(text) <= EXPLANATION_CHARS else text[: EXPLANATION_CHARS - 3] + "..."


# --- reading the files ------------------------------------------------------------------


def read_results(path: str | os.PathLike[str]) -> Iterator[ResultRow]:
    """The rows of a run's results.jsonl, one at a time.

    Args:
        path: a `judge eval` output folder (its results.jsonl) or a results.jsonl file.
    """
    target = Path(path)
    if target.is_dir():
        target = target / "results.jsonl"
    if not target.is_file():
        raise JudgeError(
            f"{path}: no results.jsonl there; give the --out folder of `judge eval` (or "
            "`judge experiment`) or its results.jsonl"
        )
    for number, data in _json_lines(target):
        if not isinstance(data, dict) or "scores" not in data:
            raise InputFormatError(
                "not a results.jsonl row (no scores): give the results of `judge eval`",
                path=str(target),
                line=number,
            )
        yield ResultRow.from_json(data)


def read_rows(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The rows of a JSON-lines rows file (as `judge traces extract` writes), one at a time."""
    target = Path(path)
    for number, data in _json_lines(target):
        if not isinstance(data, dict):
            raise InputFormatError("a row must be a JSON object", path=str(target), line=number)
        yield data


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSON-lines file, parsed, with its line number (from 1)."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputFormatError(
                    f"not a JSON line ({exc}): give a JSON-lines file", path=str(path), line=number
                ) from None


# --- OTLP JSON, as the Collector's file exporter writes it ---------------------------------


def otlp_json_lines(events: Sequence[EvaluationEvent], *, time_unix_nano: int = 0) -> list[str]:
    """The events as OTLP JSON: one ExportLogsServiceRequest per line, BATCH records each.

    The OTLP JSON encoding of the OpenTelemetry protocol spec: field names in lowerCamelCase,
    trace and span ids as hex (not base64), 64-bit integers as decimal strings, fields with
    their default value left out; keys in the protobuf fields' order. The same events give the
    same bytes.

    Args:
        events: the events to encode.
        time_unix_nano: when judge judged (the records' time and observed time); 0 for unknown.
    """
    resource = {"attributes": [_kv("service.name", SERVICE_NAME)]}
    scope = {"name": SERVICE_NAME, "version": __version__}
    lines = []
    for start in range(0, len(events), BATCH):
        records = [_record(e, time_unix_nano) for e in events[start : start + BATCH]]
        request = {
            "resourceLogs": [
                {"resource": resource, "scopeLogs": [{"scope": scope, "logRecords": records}]}
            ]
        }
        lines.append(json.dumps(request, ensure_ascii=False, separators=(",", ":")))
    return lines


def _record(event: EvaluationEvent, time_unix_nano: int) -> dict[str, Any]:
    """One LogRecord in OTLP JSON (fields in the order of logs.proto's field numbers)."""
    record: dict[str, Any] = {}
    if time_unix_nano:
        record["timeUnixNano"] = str(time_unix_nano)
        record["observedTimeUnixNano"] = str(time_unix_nano)
    record["attributes"] = [_kv(k, v) for k, v in event.attributes().items()]
    record["traceId"] = event.trace_id
    if event.span_id is not None:
        record["spanId"] = event.span_id
    record["eventName"] = EVENT_NAME
    return record


def _kv(key: str, value: str | float) -> dict[str, Any]:
    """A KeyValue with a string or double AnyValue."""
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    return {"key": key, "value": {"doubleValue": float(value)}}


def write_otlp_json(
    events: Sequence[EvaluationEvent], path: str | os.PathLike[str], *, time_unix_nano: int = 0
) -> Path:
    """Write the events to an OTLP JSON-lines file (the Collector's file exporter format,
    which its `otlpjsonfile` receiver reads back); returns the path.

    Args:
        events: the events to write.
        path: the file to write (replaced).
        time_unix_nano: when judge judged; 0 for unknown.
    """
    target = Path(path)
    lines = otlp_json_lines(events, time_unix_nano=time_unix_nano)
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return target


# --- the OpenTelemetry SDK's OTLP/HTTP log exporter ----------------------------------------

DEFAULT_LOGS_PATH = "/v1/logs"


def logs_endpoint(url: str) -> str:
    """The OTLP/HTTP logs URL of a collector address: `/v1/logs` added to a URL without a
    path (http://host:4318), any other URL kept as given."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise JudgeError(
            f"{url!r} is not an OTLP/HTTP endpoint: give an http:// or https:// URL, e.g. "
            "http://localhost:4318 (the logs path /v1/logs is added) or the full logs URL"
        )
    if parts.path in ("", "/"):
        parts = parts._replace(path=DEFAULT_LOGS_PATH)
    return urlunsplit(parts)


def send_otlp(
    events: Sequence[EvaluationEvent],
    url: str,
    *,
    time_unix_nano: int = 0,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> int:
    """Send the events to an OTLP/HTTP endpoint with the OpenTelemetry SDK's log exporter
    (protobuf over HTTP, extra `judge[otel]`); returns the number sent.

    The SDK's logger provider makes each record (resource and scope `judge`) and its batch
    processor hands them to the exporter BATCH at a time. Headers not given come from the
    exporter's environment variables (OTEL_EXPORTER_OTLP_LOGS_HEADERS or
    OTEL_EXPORTER_OTLP_HEADERS), as for any OpenTelemetry exporter.

    Args:
        events: the events to send.
        url: the collector's address (http://host:4318) or its full logs URL.
        time_unix_nano: when judge judged (the records' time); 0 for unknown.
        headers: HTTP headers, e.g. an API key for a hosted backend.
        timeout: seconds for each request, retries included.

    Raises:
        JudgeError: the SDK is not installed, or the endpoint did not take every batch.
    """
    endpoint = logs_endpoint(url)
    try:
        from opentelemetry._logs import LogRecord
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
        from opentelemetry.sdk._logs.export import (
            BatchLogRecordProcessor,
            LogRecordExporter,
            LogRecordExportResult,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.trace import (
            NonRecordingSpan,
            SpanContext,
            TraceFlags,
            set_span_in_context,
        )
    except ImportError as exc:
        raise JudgeError(
            f"sending scores to an OTLP endpoint needs the OpenTelemetry SDK ({exc.name} is "
            "missing): pip install 'judge[otel]'"
        ) from None

    class Counted(LogRecordExporter):
        """The SDK's OTLP/HTTP exporter, counting the records each export sent or lost."""

        def __init__(self) -> None:
            self.inner = OTLPLogExporter(
                endpoint=endpoint, headers=dict(headers) if headers else None, timeout=timeout
            )
            self.sent = self.lost = 0

        def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
            result = self.inner.export(batch)
            if result == LogRecordExportResult.SUCCESS:
                self.sent += len(batch)
            else:
                self.lost += len(batch)
            return result

        def shutdown(self) -> None:
            self.inner.shutdown()  # type: ignore[no-untyped-call]

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

    exporter = Counted()
    provider = LoggerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    # Flushed after each BATCH records: the processor's queue never drops one.
    provider.add_log_record_processor(
        BatchLogRecordProcessor(exporter, max_export_batch_size=BATCH, max_queue_size=BATCH)
    )
    logger = provider.get_logger(SERVICE_NAME, __version__)
    stamp = time_unix_nano or None
    try:
        for start in range(0, len(events), BATCH):
            for event in events[start : start + BATCH]:
                span = SpanContext(
                    trace_id=int(event.trace_id, 16),
                    span_id=int(event.span_id, 16) if event.span_id else 0,
                    is_remote=True,
                    trace_flags=TraceFlags(TraceFlags.DEFAULT),
                )
                logger.emit(
                    LogRecord(
                        timestamp=stamp,
                        observed_timestamp=stamp,
                        context=set_span_in_context(NonRecordingSpan(span)),
                        attributes=event.attributes(),
                        event_name=EVENT_NAME,
                    )
                )
            provider.force_flush(int(timeout * 1000) + 1000)
            if exporter.lost:
                break
    finally:
        provider.shutdown()
    if exporter.lost or exporter.sent < len(events):
        raise JudgeError(
            f"{endpoint} did not take the scores ({exporter.sent} of "
            f"{counted(len(events), 'event')} sent; the exporter's message is above): check "
            "the URL (an OTLP/HTTP collector listens on port 4318) and the headers a hosted "
            "backend needs (OTEL_EXPORTER_OTLP_HEADERS)"
        )
    return exporter.sent


# --- Phoenix span evaluations --------------------------------------------------------------

PHOENIX_COLUMNS = ("span_id", "score", "label", "explanation")


def annotator_kind(metric: str) -> str:
    """Phoenix's annotator kind of a metric: CODE for a retrieval metric, LLM otherwise."""
    try:
        parse_measure(metric)
    except JudgeError:
        return "LLM"
    return "CODE"


@dataclass
class PhoenixEvaluations:
    """Span evaluations in the shape Phoenix's client logs: one frame per metric.

    Attributes:
        frames: metric -> a frame with columns span_id, score, label, explanation (one row
            per judged span), as `phoenix.trace.SpanEvaluations(eval_name=metric,
            dataframe=frame)` and the client's `log_span_annotations_dataframe(dataframe=
            frame, annotation_name=metric, annotator_kind=...)` take it.
        without_span: events left out because their row had a trace id but no span id.
        without_score: events left out because their score is undefined: Phoenix's client
            reads a frame's null score as NaN, which it cannot send as JSON (the OTLP
            events keep them, with their reason).
    """

    frames: dict[str, pd.DataFrame]
    without_span: int = 0
    without_score: int = 0

    def table(self) -> pd.DataFrame:
        """Every frame in one, with the columns `name` and `annotator_kind` added: what
        `Client().spans.log_span_annotations_dataframe(dataframe=...)` takes in one call."""
        import pandas as pd

        parts = [
            frame.assign(name=metric, annotator_kind=annotator_kind(metric))
            for metric, frame in sorted(self.frames.items())
        ]
        columns = ["name", *PHOENIX_COLUMNS, "annotator_kind"]
        if not parts:
            return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in columns})
        return pd.concat(parts, ignore_index=True)[columns]


def _dtype(column: str) -> str:
    return "float64" if column == "score" else "object"


def phoenix_evaluations(events: Iterable[EvaluationEvent]) -> PhoenixEvaluations:
    """The events with a score as Phoenix span evaluations, one frame per metric (pandas
    needed); events without a span id or without a score are counted, not framed.

    No label or no explanation is an empty string, which Phoenix's client leaves out: a null
    would come back from parquet as NaN, which the client sends as the text "nan".
    """
    import pandas as pd

    by_metric: dict[str, dict[str, list[Any]]] = {}
    without_span = without_score = 0
    for event in events:
        if event.span_id is None:
            without_span += 1
            continue
        if event.score is None:
            without_score += 1
            continue
        columns = by_metric.setdefault(event.metric, {c: [] for c in PHOENIX_COLUMNS})
        columns["span_id"].append(event.span_id)
        columns["score"].append(event.score)
        columns["label"].append(event.label or "")
        columns["explanation"].append(event.explanation or "")
    frames = {
        metric: pd.DataFrame({c: pd.Series(v, dtype=_dtype(c)) for c, v in columns.items()})
        for metric, columns in by_metric.items()
    }
    return PhoenixEvaluations(frames, without_span, without_score)


def write_phoenix(evaluations: PhoenixEvaluations, path: str | os.PathLike[str]) -> Path:
    """Write the span evaluations to one parquet file (`PhoenixEvaluations.table`); returns
    the path. Parquet keeps the types and the null labels as they are, and is what Phoenix
    itself exports spans to: `pd.read_parquet(path)` gives the frame the client logs in one
    call.

    Args:
        evaluations: the span evaluations.
        path: a .parquet file to write (replaced).
    """
    target = Path(path)
    if target.suffix != ".parquet":
        raise JudgeError(
            f"{target}: Phoenix span evaluations are written as parquet; give a .parquet path"
        )
    evaluations.table().to_parquet(target, index=False)
    return target
