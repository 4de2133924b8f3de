"""OTLP trace files read as batches of spans, one batch per export request, streamed.

The files the OpenTelemetry Collector's file exporter writes, and what an OTLP/HTTP
receiver stores:

- OTLP/JSON lines (the exporter's default `format: json`, and the spec's "OTLP File
  Exporter"): one `ExportTraceServiceRequest` (or `TracesData`, the same shape) per line,
  `resourceSpans[].scopeSpans[].spans[]`, ids in hex (base64 ids, from protobuf's own JSON
  mapping, are read too), attributes as typed `AnyValue`s;
- length-prefixed messages (`format: proto`, or JSON with `compression`): each message
  preceded by its size as a 4-byte big-endian unsigned integer; the message is protobuf,
  or JSON;
- one protobuf `ExportTraceServiceRequest` per file (an OTLP/HTTP request body);
- any of these gzip-compressed (told by the magic bytes, not the name). The collector's
  own `compression: zstd` is not read: decompress with `zstd -d` first.

Protobuf needs `opentelemetry-proto` (the extra `judge[traces]`); JSON needs nothing.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from judge.errors import InputFormatError
from judge.lines import bounded_lines, max_line_bytes, read_bounded, too_long
from judge.traces.spans import (
    GZIP_ERRORS,
    Span,
    attributes_of,
    damaged_gzip,
    head_bytes,
    hex_id,
    is_empty,
    open_bytes,
    parent_is_remote,
)

PathLike = str | os.PathLike[str]
_JSON_LINES = "json"
_PREFIXED = "length-prefixed"
_PROTO = "protobuf"


def encoding_of(path: PathLike) -> str | None:
    """How an OTLP trace file is encoded ("json", "length-prefixed", "protobuf"), or None
    when its first bytes are none of them (not an OTLP trace file)."""
    try:
        head = head_bytes(path)
    except OSError:
        return None
    stripped = head.lstrip()
    if not stripped or _blank(stripped):
        return None  # blank lines (or nothing): no request, and a rows file of no rows
    if stripped.startswith(b"{"):
        # An OTLP/JSON request starts with its only field (camelCase, or snake_case from
        # protobuf's JSON mapping); "{}" is an empty request.
        body = stripped[1:].lstrip()
        if body.startswith((b'"resourceSpans"', b'"resource_spans"', b"}")):
            return _JSON_LINES
        return None
    if len(head) >= 5 and head[0] == 0 and head[4:5] in (b"\n", b"{"):
        return _PREFIXED  # a size below 16 MB starts with a zero byte; no message does
    if head[:1] == b"\n" and not _text(head):  # field 1 (resource_spans), length-delimited
        return _PROTO
    return None


def _text(head: bytes) -> bool:
    """Whether a file's first bytes are text (UTF-8, no control characters but spaces and
    line breaks): a rows file after a blank line. A protobuf request holds 16-byte binary
    trace ids, which are text by chance about once in ten million files."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head)
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c.isspace() for c in text)


def _blank(head: bytes) -> bool:
    """Whether a file's first bytes are blank as `str.strip` sees text: Unicode spaces too
    (an ideographic space U+3000, as an editor in a CJK locale leaves), which the rows
    readers take for blank lines; a character cut at the end of the head is left out."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head)
    except UnicodeDecodeError:  # protobuf, or no text
        return False
    return not text.strip()


def is_otlp(path: PathLike) -> bool:
    """Whether the file is an OTLP trace file of a kind `read_requests` reads."""
    return Path(path).is_file() and encoding_of(path) is not None


def read_requests(path: PathLike) -> Iterator[list[Span]]:
    """The spans of each export request in the file, in file order, one request at a time.

    Args:
        path: an OTLP trace file (see the module's docstring for the encodings).

    Raises:
        InputFormatError: the file is no OTLP trace file, or a request in it is malformed
            (with its line or message number).
    """
    if is_empty(path):
        return  # a quiet hour's rotated file: no traces
    kind = encoding_of(path)
    if kind is None:
        try:  # a gzip file cut short in its first bytes says so, not that it is no OTLP
            with open_bytes(path) as handle:
                while handle.read(1 << 16):
                    pass
        except GZIP_ERRORS as exc:
            raise damaged_gzip(path, exc) from None
        raise InputFormatError(
            "not an OTLP trace file: expected OTLP/JSON lines (one ExportTraceServiceRequest "
            '{"resourceSpans": [...]} per line), length-prefixed protobuf, or one protobuf '
            "request, optionally gzip-compressed",
            path=str(path),
        )
    try:
        with open_bytes(path) as handle:
            if kind == _JSON_LINES:
                yield from _json_lines(handle, path)
            elif kind == _PREFIXED:
                yield from _prefixed(handle, path)
            else:
                yield _protobuf(read_bounded(handle, path, "protobuf request"), path, None)
    except GZIP_ERRORS as exc:
        raise damaged_gzip(path, exc) from None


def _json_lines(handle: IO[bytes], path: PathLike) -> Iterator[list[Span]]:
    for number, line in bounded_lines(handle, path):
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except RecursionError:
            raise InputFormatError(NESTED, path=str(path), line=number) from None
        except ValueError as exc:  # not JSON, not UTF-8, an integer of 5,000 digits
            raise InputFormatError(
                f"not JSON ({exc}); OTLP/JSON files hold one request per line",
                path=str(path),
                line=number,
            ) from None
        yield spans_of_json(request, path, number)


NESTED = "JSON nested too deeply (arrays or objects inside one another past Python's limit)"


def _prefixed(handle: IO[bytes], path: PathLike) -> Iterator[list[Span]]:
    number = 0
    limit = max_line_bytes()
    while True:
        size_bytes = handle.read(4)
        if not size_bytes:
            return
        number += 1
        if int.from_bytes(size_bytes, "big") > limit:  # refused before it is read
            raise too_long(path, limit, what="message", which=f"message {number}")
        message = handle.read(int.from_bytes(size_bytes.ljust(4, b"\0"), "big"))
        if len(size_bytes) < 4 or len(message) < int.from_bytes(size_bytes, "big"):
            raise InputFormatError(
                f"message {number} is cut short (a truncated file?)", path=str(path)
            )
        if message[:1] == b"{":
            try:
                request = json.loads(message)
            except RecursionError:
                raise InputFormatError(f"message {number}: {NESTED}", path=str(path)) from None
            except ValueError as exc:  # not JSON, not UTF-8, an integer of 5,000 digits
                raise InputFormatError(
                    f"message {number}: not JSON ({exc})", path=str(path)
                ) from None
            yield spans_of_json(request, path, number)
        else:
            yield _protobuf(message, path, number)


def _camel(item: dict[str, Any], camel: str, snake: str) -> Any:
    value = item.get(camel)
    return item.get(snake) if value is None else value


def spans_of_json(
    request: Any,
    path: PathLike = "",
    line: int | None = None,
    rejected: list[str] | None = None,
) -> list[Span]:
    """The spans of one OTLP/JSON request (a parsed `ExportTraceServiceRequest`).

    Args:
        request: the parsed request.
        path: the file it was read from, for the error's message.
        line: its line in that file.
        rejected: when given, a span whose ids or fields are malformed is left out and why
            is appended here (an OTLP receiver's partial success), instead of failing the
            whole request.
    """
    where_path, where_line = (str(path), line) if path else (None, None)
    if not isinstance(request, dict):
        raise InputFormatError(
            "an OTLP/JSON request must be an object", path=where_path, line=where_line
        )
    spans: list[Span] = []
    try:
        for resource_spans in _camel(request, "resourceSpans", "resource_spans") or ():
            scopes = (
                _camel(resource_spans, "scopeSpans", "scope_spans")
                or resource_spans.get("instrumentationLibrarySpans")  # OTLP before 0.15
                or ()
            )
            for scope_spans in scopes:
                for span in scope_spans.get("spans") or ():
                    if rejected is None:
                        spans.append(_json_span(span))
                        continue
                    try:
                        parsed = _json_span(span)
                        check_ids(parsed.trace_id, parsed.span_id)
                        spans.append(parsed)
                    except InputFormatError as exc:
                        rejected.append(str(exc))
                    except (AttributeError, KeyError, TypeError, ValueError) as exc:
                        rejected.append(f"not an OTLP span ({type(exc).__name__}: {exc})")
    except InputFormatError as exc:
        raise InputFormatError(str(exc), path=where_path, line=where_line) from None
    except RecursionError:  # an AnyValue of arrays inside arrays
        raise InputFormatError(NESTED, path=where_path, line=where_line) from None
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as exc:
        raise InputFormatError(
            f"not an OTLP trace request ({type(exc).__name__}: {exc})",
            path=where_path,
            line=where_line,
        ) from None
    return spans


def check_ids(trace_id: str, span_id: str) -> None:
    """Refuse the ids of a monitored span that are not valid: OTLP's trace and span ids
    are valid with a byte that is not zero, and a span without one (empty, or zeros) would
    join every other such span into one trace, completed once and the rest late for good.

    Raises:
        InputFormatError: an id is empty or all zeros.
    """
    for what, value in (("traceId", trace_id), ("spanId", span_id)):
        if not value.strip("0"):
            raise InputFormatError(
                f"{what} {value!r} is not a valid id (OTLP's ids have a byte that is not zero)"
            )


MAX_NANOS = 2**64 - 1  # OTLP's times are fixed64: nanoseconds since 1970 to the year 2554


def _nanos(value: Any, what: str) -> int:
    """An OTLP/JSON time (nanoseconds since 1970), held to protobuf's fixed64 as a protobuf
    request's are: a time past it has no date, and its trace no start time.

    Raises:
        InputFormatError: the time is below 0 or past 2**64 - 1.
    """
    number = int(value or 0)
    if not 0 <= number <= MAX_NANOS:
        raise InputFormatError(
            f"{what} {str(number)[:40]} is not an OTLP time (nanoseconds since 1970, from 0 to "
            "2**64 - 1)"
        )
    return number


def _json_span(span: Any) -> Span:
    parent = _camel(span, "parentSpanId", "parent_span_id") or ""
    return Span(
        hex_id(_camel(span, "traceId", "trace_id"), 16, "traceId"),
        hex_id(_camel(span, "spanId", "span_id"), 8, "spanId"),
        hex_id(parent, 8, "parentSpanId") or None,
        span.get("name") or "",
        _nanos(_camel(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano"),
        _nanos(_camel(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano"),
        attributes_of(span.get("attributes")),
        bool(span.get("flags")) and parent_is_remote(span["flags"]),
    )


def spans_of_protobuf(message: bytes, rejected: list[str] | None = None) -> list[Span]:
    """The spans of one protobuf `ExportTraceServiceRequest` (an OTLP/HTTP request body).

    Args:
        message: the serialized request.
        rejected: when given, a span whose ids are malformed is left out and why is
            appended here (an OTLP receiver's partial success), instead of failing the
            whole request.
    """
    return _protobuf(message, "", None, rejected)


class EncodedSpan:
    """A span of an OTLP protobuf request with its ids read (and checked as `Span`'s are)
    and the rest kept as the span's protobuf bytes, `data`, until `decode`: a receiver that
    stores spans before it reads them decodes their attributes once, when it reads them."""

    __slots__ = ("data", "parent_id", "parent_remote", "span_id", "start_ns", "trace_id")

    def __init__(
        self,
        trace_id: str,
        span_id: str,
        parent_id: str | None,
        parent_remote: bool,
        data: bytes,
        start_ns: int = 0,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.parent_remote = parent_remote
        self.data = data
        self.start_ns = start_ns  # read with the ids: the monitor's windows wait on it

    def decode(self) -> Span:
        """The span, as `spans_of_protobuf` gives it."""
        return decode_span(self.data)


def encoded_spans_of_protobuf(message: bytes, rejected: list[str]) -> list[EncodedSpan]:
    """The spans of one protobuf `ExportTraceServiceRequest`, each kept encoded: what
    `spans_of_protobuf` gives, as `EncodedSpan`s (decoded later, by `decode_span`).

    Args:
        message: the serialized request.
        rejected: a span whose ids are malformed is left out and why is appended here.
    """
    spans = []
    for span, ids in _checked_spans(_request(message, "", None), "", None, rejected):
        spans.append(
            EncodedSpan(
                *ids,
                parent_is_remote(span.flags),
                span.SerializeToString(),
                int(span.start_time_unix_nano),
            )
        )
    return spans


def decode_span(data: bytes) -> Span:
    """A span back from its protobuf bytes (an `EncodedSpan`'s `data`), its ids checked
    when it was received."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

    span = ProtoSpan.FromString(data)
    return _span(
        span,
        (span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex() or None),
    )


def _request(message: bytes, path: PathLike, number: int | None) -> Any:
    """One protobuf `ExportTraceServiceRequest`, parsed."""
    try:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        raise InputFormatError(
            "reading OTLP protobuf needs the package opentelemetry-proto: "
            "pip install 'judge[traces]'",
            path=str(path),
        ) from None
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(message)
    except DecodeError as exc:
        which = f"message {number}: " if number is not None else ""
        raise InputFormatError(
            f"{which}not an OTLP protobuf request ({exc})", path=str(path)
        ) from None
    return request


def _checked_spans(
    request: Any, path: PathLike, number: int | None, rejected: list[str] | None
) -> Iterator[tuple[Any, tuple[str, str, str | None]]]:
    """Each protobuf span of a request with its ids (trace, span, parent) as hex; a span
    whose ids are malformed is rejected (why appended to `rejected`), or fails the request
    when `rejected` is None."""
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                try:  # the ids' lengths are checked as OTLP/JSON's are
                    ids = (
                        hex_id(span.trace_id, 16, "traceId"),
                        hex_id(span.span_id, 8, "spanId"),
                        hex_id(span.parent_span_id, 8, "parentSpanId") or None,
                    )
                    if rejected is not None:
                        check_ids(ids[0], ids[1])
                except InputFormatError as exc:
                    if rejected is not None:
                        rejected.append(str(exc))
                        continue
                    which = f"message {number}: " if number is not None else ""
                    raise InputFormatError(f"{which}{exc}", path=str(path)) from None
                yield span, ids


def _protobuf(
    message: bytes, path: PathLike, number: int | None, rejected: list[str] | None = None
) -> list[Span]:
    """The spans of one protobuf `ExportTraceServiceRequest`."""
    request = _request(message, path, number)
    return [_span(span, ids) for span, ids in _checked_spans(request, path, number, rejected)]


def _span(span: Any, ids: tuple[str, str, str | None]) -> Span:
    """A protobuf span as a `Span`, given its ids."""
    return Span(
        *ids,
        span.name,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        _proto_attributes(span.attributes),
        parent_is_remote(span.flags),
    )


def _proto_attributes(items: Any) -> dict[str, Any]:
    """A protobuf span's attributes (`KeyValue`s) as a dict."""
    out = {}
    for kv in items:
        value = kv.value
        # Most values are text: a non-empty string_value is the value, without asking
        # which field is set (half the cost of reading an attribute).
        out[kv.key] = value.string_value or _proto_value(value)
    return out


def _proto_value(value: Any) -> Any:
    """A protobuf `AnyValue` as Python."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which)
