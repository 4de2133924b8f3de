"""The span of a trace as judge reads it, and OTLP attribute values decoded to Python.

Every reader (OTLP JSON, OTLP protobuf) makes `Span`s with the same fields: ids as
lowercase hex (32 digits for a trace, 16 for a span), times in Unix nanoseconds, and the
attributes as one flat dict of Python values (str, bool, int, float, lists, dicts).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import os
import zlib
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, BinaryIO, cast

from judge.errors import InputFormatError


class Span:
    """One span: its ids, name, start and end (Unix ns), attributes, and whether its
    parent is remote (a service called with a traceparent: the span is its trace's root
    here)."""

    __slots__ = (
        "attributes",
        "end_ns",
        "name",
        "parent_id",
        "parent_remote",
        "span_id",
        "start_ns",
        "trace_id",
    )

    def __init__(
        self,
        trace_id: str,
        span_id: str,
        parent_id: str | None,
        name: str,
        start_ns: int,
        end_ns: int,
        attributes: dict[str, Any],
        parent_remote: bool = False,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.name = name
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.attributes = attributes
        self.parent_remote = parent_remote  # the parent is in another process (OTLP flags)

    def __repr__(self) -> str:
        return f"Span({self.name!r}, trace_id={self.trace_id}, span_id={self.span_id})"


GZIP_MAGIC = b"\x1f\x8b"
# What reading a gzip file cut short (EOFError) or damaged (a bad CRC, bad data) raises.
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def open_bytes(path: str | os.PathLike[str]) -> BinaryIO:
    """A trace file's bytes, decompressed when it is gzip (told by its magic bytes)."""
    handle = open(path, "rb")  # noqa: SIM115 (returned open)
    if handle.peek(2)[:2] == GZIP_MAGIC:
        handle.close()
        return cast(BinaryIO, gzip.GzipFile(path, "rb"))
    return handle


def head_bytes(path: str | os.PathLike[str], size: int = 4096) -> bytes:
    """Up to `size` first bytes of a trace file, decompressed when it is gzip; of a gzip
    file cut short or damaged, what can be decompressed of its start."""
    with open(path, "rb") as handle:
        raw = handle.read(max(size, 1 << 16))
    if raw[:2] != GZIP_MAGIC:
        return raw[:size]
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, size)
    except zlib.error:
        return b""


def is_empty(path: str | os.PathLike[str]) -> bool:
    """Whether a trace file holds nothing but white space (a quiet hour's rotated file),
    gzip-compressed or not."""
    try:
        with open_bytes(path) as handle:
            while chunk := handle.read(1 << 16):
                if chunk.strip():
                    return False
    except (OSError, *GZIP_ERRORS):
        return False  # a damaged file is not empty: reading it says what is wrong
    return True


def damaged_gzip(path: str | os.PathLike[str], exc: BaseException) -> InputFormatError:
    """The error of a gzip trace file that cannot be read to its end."""
    why = "is cut short" if isinstance(exc, EOFError) else f"is damaged ({exc})"
    return InputFormatError(
        f"the gzip file {why}: a file the collector is still writing (read it once it is "
        "rotated, or leave it out until then) or a damaged copy (copy it again)",
        path=str(path),
    )


def hex_id(value: Any, size: int, what: str) -> str:
    """An OTLP id as lowercase hex of `size` bytes: OTLP/JSON writes hex, protobuf's own
    JSON mapping (some exporters) base64, and protobuf bytes are bytes.

    A hex id is 2 * size digits and base64 of `size` bytes is never that long, so the two
    cannot be confused. An empty id is "" (a root span's parent).
    """
    if isinstance(value, bytes):
        if value and len(value) != size:  # the rule of hex and base64 ids below
            raise InputFormatError(
                f"{what} {value.hex()} is {len(value)} bytes, not an id of {size} bytes"
            )
        return value.hex()
    if not isinstance(value, str):
        raise InputFormatError(f"{what} {value!r} is not an id (hex or base64 text)")
    if len(value) == 2 * size:
        try:
            return bytes.fromhex(value).hex()  # lowercase; fromhex refuses what is not hex
        except ValueError:
            pass
    if not value:
        return ""
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise InputFormatError(
            f"{what} {value!r} is neither {2 * size} hex digits (OTLP/JSON) nor base64 of "
            f"{size} bytes (protobuf's JSON mapping)"
        )
    return raw.hex()


def any_value(value: Mapping[str, Any]) -> Any:
    """An OTLP/JSON `AnyValue` ({"stringValue": "x"}, {"intValue": "3"}, ...) as Python;
    the protobuf JSON mapping's snake_case names are read too."""
    if "stringValue" in value:  # the most common, first
        return value["stringValue"]
    for key, item in value.items():
        if key in ("stringValue", "string_value", "boolValue", "bool_value"):
            return item
        if key in ("intValue", "int_value"):
            return int(item)  # int64 is a JSON string in OTLP/JSON
        if key in ("doubleValue", "double_value"):
            return float(item)  # "NaN" and "Infinity" are strings in protobuf JSON
        if key in ("arrayValue", "array_value"):
            return [any_value(v) for v in item.get("values", ())]
        if key in ("kvlistValue", "kvlist_value"):
            return {kv["key"]: any_value(kv.get("value") or {}) for kv in item.get("values", ())}
        if key in ("bytesValue", "bytes_value"):
            return base64.b64decode(item)
    return None  # an empty AnyValue


# OTLP's SpanFlags: bit 8 says whether bit 9 is known; bit 9 says the parent is remote.
HAS_IS_REMOTE = 0x100
IS_REMOTE = 0x200


def parent_is_remote(flags: Any) -> bool:
    """Whether an OTLP span's `flags` say its parent is remote (both bits 8 and 9 set)."""
    try:
        value = int(flags or 0)
    except (TypeError, ValueError):
        return False
    return value & (HAS_IS_REMOTE | IS_REMOTE) == HAS_IS_REMOTE | IS_REMOTE


def attributes_of(items: Any) -> dict[str, Any]:
    """OTLP/JSON attributes ([{"key", "value": AnyValue}, ...]) as a dict."""
    return {kv["key"]: any_value(kv.get("value") or {}) for kv in items or ()}


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def iso_utc(ns: int) -> str:
    """Unix nanoseconds as ISO 8601 UTC with microseconds and a Z (exact: no float)."""
    moment = EPOCH + timedelta(microseconds=ns // 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unix_ns(moment: datetime) -> int:
    """A datetime as Unix nanoseconds (exact to the microsecond); naive is UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - EPOCH) // _MICROSECOND * 1000
