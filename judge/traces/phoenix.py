"""Arize Phoenix's span export read as batches of spans: the spans dataframe
(`Client().get_spans_dataframe()`, `TraceDataset.save()`) written to parquet.

One row per span, with the columns of Phoenix's `TraceDataset`: `context.trace_id`,
`context.span_id`, `parent_id`, `name`, `span_kind`, `start_time`, `end_time`, and the
attributes as `attributes.KEY` columns (Phoenix keeps the OpenInference names whole:
`attributes.input.value`, `attributes.retrieval.documents` as a list of
{"document.id", "document.content", "document.score"}), or one `attributes` column of
nested mappings. The file is read a record batch at a time (pyarrow, installed with
`datasets`), so it streams as OTLP files do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from judge.errors import InputFormatError
from judge.traces.openinference import SPAN_KIND
from judge.traces.spans import Span, hex_id, unix_ns

PathLike = str | os.PathLike[str]
_PARQUET = b"PAR1"
_ATTRIBUTES = "attributes."
_BATCH = 4096


def is_phoenix(path: PathLike) -> bool:
    """Whether the file is a parquet file with Phoenix's span columns."""
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != _PARQUET:
                return False
        import pyarrow.parquet as pq

        names = set(pq.ParquetFile(path).schema_arrow.names)
    except (OSError, ImportError, ValueError):
        return False
    return {"context.trace_id", "context.span_id"} <= names


def _ns(value: Any, what: str) -> int:
    """A time (datetime, pandas Timestamp, ISO text, or a number of ns) as Unix ns."""
    if value is None:
        return 0
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        text = value[:-1] + "+00:00" if value.endswith("Z") else value
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise InputFormatError(f"{what} {value!r} is not a time") from None
    if hasattr(value, "value") and hasattr(value, "tz_localize"):  # a pandas Timestamp
        moment = value if value.tzinfo is not None else value.tz_localize("UTC")
        return int(moment.value)
    if isinstance(value, datetime):
        return unix_ns(value)
    raise InputFormatError(f"{what} {value!r} is not a time")


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """Nested attribute mappings as OpenInference's dotted keys; lists of documents and
    messages stay lists (the readers take them whole)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flat(f"{prefix}.{key}" if prefix else str(key), item, out)
    elif value is not None and not (isinstance(value, float) and value != value):
        out[prefix] = value.tolist() if hasattr(value, "tolist") else value


def _id(value: Any, size: int, what: str) -> str:
    """An id as hex, or as it is when it is not (old Phoenix versions wrote UUIDs)."""
    text = str(value)
    try:
        return hex_id(text, size, what)
    except InputFormatError:
        return text


def span_of(record: Mapping[str, Any]) -> Span:
    """One row of Phoenix's spans dataframe as a `Span`."""
    attributes: dict[str, Any] = {}
    nested = record.get("attributes")
    if isinstance(nested, str):
        try:
            nested = json.loads(nested)
        except json.JSONDecodeError:
            nested = None
    if isinstance(nested, Mapping):
        _flat("", nested, attributes)
    for column, value in record.items():
        if column.startswith(_ATTRIBUTES):
            _flat(column[len(_ATTRIBUTES) :], value, attributes)
    kind = record.get("span_kind")
    if isinstance(kind, str) and kind and SPAN_KIND not in attributes:
        attributes[SPAN_KIND] = kind
    parent = record.get("parent_id")
    if not isinstance(parent, str) or not parent:
        parent = None
    return Span(
        _id(record["context.trace_id"], 16, "context.trace_id"),
        _id(record["context.span_id"], 8, "context.span_id"),
        _id(parent, 8, "parent_id") if parent else None,
        str(record.get("name") or ""),
        _ns(record.get("start_time"), "start_time"),
        _ns(record.get("end_time"), "end_time"),
        attributes,
    )


def read_phoenix(path: PathLike) -> Iterator[list[Span]]:
    """The spans of a Phoenix spans parquet file, a record batch at a time."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's own errors: not parquet, damaged
        raise InputFormatError(f"cannot be read as parquet ({exc})", path=str(path)) from None
    names = set(parquet.schema_arrow.names)
    missing = {"context.trace_id", "context.span_id"} - names
    if missing:
        raise InputFormatError(
            f"not Phoenix's spans dataframe: no column {', '.join(sorted(missing))} (columns: "
            f"{', '.join(sorted(names)[:12])})",
            path=str(path),
        )
    for batch in parquet.iter_batches(batch_size=_BATCH):
        try:
            yield [span_of(record) for record in batch.to_pylist()]
        except InputFormatError as exc:
            raise InputFormatError(str(exc), path=str(path)) from None
