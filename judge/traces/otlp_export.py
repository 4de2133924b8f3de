"""Evaluation events leaving judge as OTLP: JSON lines as the Collector's file exporter
writes them, and the OpenTelemetry SDK's OTLP/HTTP log exporter (extra `judge[otel]`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from judge.errors import JudgeError
from judge.formatting import counted
from judge.traces.events import EVENT_NAME, EvaluationEvent
from judge.version import __version__

# The producer of the events, as the resource and instrumentation scope of every record.
SERVICE_NAME = "judge"
BATCH = 512  # records per ExportLogsServiceRequest (the SDK batch processor's default size)


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
