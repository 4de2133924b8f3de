"""Langfuse's trace export read as batches of spans: observations, or traces with their
observations, as Langfuse's public API returns them.

- observations (`GET /api/public/v2/observations`, the SDK's `ObservationV2`): one JSON
  object per line (JSONL), or a page `{"data": [...]}` or a list; each has `id`,
  `traceId`, `parentObservationId`, `type` (SPAN, GENERATION, RETRIEVER, EMBEDDING, ...),
  `startTime`, `endTime`, `input`, `output`, `model`, `usageDetails`, `sessionId`;
- traces with their observations (`GET /api/public/traces/{id}`): objects with `id`,
  `timestamp`, `input`, `output`, `sessionId` and a list `observations`; the trace is the
  root span (its id the row's `span_id`), its observations without a parent its children.

Each observation becomes a span with OpenInference attributes: GENERATION is an LLM span
(`model`, `usageDetails` input/output/total), RETRIEVER a retriever whose `output` is the
documents (a list, or {"documents": [...]}, of {"id", "page_content" or "content",
"metadata", "score"}), `input`/`output` the span's input and output. JSONL is streamed a
line at a time; a JSON document (a page, a list) is read whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from judge.errors import InputFormatError
from judge.lines import bounded_lines, read_bounded
from judge.traces import openinference as oi
from judge.traces.otlp import NESTED
from judge.traces.spans import (
    GZIP_ERRORS,
    Span,
    damaged_gzip,
    head_bytes,
    is_empty,
    open_bytes,
    unix_ns,
)

PathLike = str | os.PathLike[str]
_KINDS = {"GENERATION": oi.LLM, "RETRIEVER": oi.RETRIEVER, "EMBEDDING": "EMBEDDING"}
_BATCH = 1000


def _is_observation(value: Any) -> bool:
    return isinstance(value, Mapping) and "traceId" in value and "type" in value


def _is_trace(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("observations"), list)


def is_langfuse(path: PathLike) -> bool:
    """Whether the file's first JSON value is a Langfuse observation, trace with
    observations, or a page or list of them."""
    try:
        head = head_bytes(path, 1 << 16).decode("utf-8", errors="ignore").lstrip()
    except OSError:
        return False
    if not head.startswith(("{", "[")):
        return False
    try:
        first = json.loads(head.split("\n", 1)[0])
    except RecursionError:  # nested past Python's limit: no Langfuse export is
        return False
    except ValueError:  # a JSON document over many lines: its first keys
        return ('"traceId"' in head and '"type"' in head) or '"observations"' in head
    if isinstance(first, Mapping) and isinstance(first.get("data"), list):
        first = first["data"][0] if first["data"] else None
    if isinstance(first, list):
        first = first[0] if first else None
    return _is_observation(first) or _is_trace(first)


def _ns(value: Any) -> int:
    """An ISO 8601 time as Unix ns (naive is UTC); 0 when there is none."""
    if not isinstance(value, str) or not value:
        return 0
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputFormatError(f"time {value!r} is not ISO 8601") from None
    return unix_ns(moment)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _documents(output: Any) -> list[Mapping[str, Any]]:
    if isinstance(output, Mapping):
        output = output.get("documents") or output.get("output")
    return [d for d in output if isinstance(d, Mapping)] if isinstance(output, list) else []


def _attributes(item: Mapping[str, Any], kind: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    if kind is not None:
        attributes[oi.SPAN_KIND] = kind
    for key, target, mime in (
        ("input", oi.INPUT_VALUE, oi.INPUT_MIME_TYPE),
        ("output", oi.OUTPUT_VALUE, oi.OUTPUT_MIME_TYPE),
    ):
        value = item.get(key)
        if value is not None:
            attributes[target] = _text(value)
            if not isinstance(value, str):
                attributes[mime] = "application/json"
    if item.get("sessionId"):
        attributes[oi.SESSION_ID] = str(item["sessionId"])
    if kind == oi.LLM:
        if item.get("model"):
            attributes[oi.LLM_MODEL_NAME] = str(item["model"])
        usage = item.get("usageDetails") or item.get("usage") or {}
        if isinstance(usage, Mapping):
            for key, target in (
                ("input", oi.TOKEN_PROMPT),
                ("output", oi.TOKEN_COMPLETION),
                ("total", oi.TOKEN_TOTAL),
            ):
                if isinstance(usage.get(key), int):
                    attributes[target] = usage[key]
    if kind == oi.RETRIEVER:
        for n, doc in enumerate(_documents(item.get("output"))):
            prefix = f"{oi.RETRIEVAL_DOCUMENTS}.{n}."
            found = doc.get("metadata")
            metadata: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
            doc_id = doc.get("id")
            for key in oi.METADATA_ID_KEYS:
                if doc_id is None:
                    doc_id = metadata.get(key)
            content = doc.get("page_content", doc.get("content", doc.get("text")))
            score = doc.get("score", metadata.get("score"))
            if doc_id is not None:
                attributes[prefix + oi.DOCUMENT_ID] = str(doc_id)
            if content is not None:
                attributes[prefix + oi.DOCUMENT_CONTENT] = str(content)
            if isinstance(score, (int, float)) and not isinstance(score, bool):
                attributes[prefix + oi.DOCUMENT_SCORE] = score
    return attributes


def observation_span(item: Mapping[str, Any], parent: str | None = None) -> Span:
    """One Langfuse observation as a span; `parent` stands for a missing parent (the
    trace's id, when the trace is a span of its own)."""
    kind = str(item.get("type") or "").upper()
    return Span(
        str(item["traceId"]),
        str(item["id"]),
        str(item.get("parentObservationId") or parent or "") or None,
        str(item.get("name") or ""),
        _ns(item.get("startTime")),
        _ns(item.get("endTime")),
        _attributes(item, _KINDS.get(kind, kind or None)),
    )


def trace_spans(trace: Mapping[str, Any]) -> list[Span]:
    """A Langfuse trace with its observations: the trace as the root span, then them."""
    trace_id = str(trace["id"])
    start = _ns(trace.get("timestamp"))
    latency = trace.get("latency")
    end = start + int(float(latency) * 1e9) if isinstance(latency, (int, float)) else start
    root = Span(trace_id, trace_id, None, str(trace.get("name") or ""), start, end, {})
    root.attributes = _attributes(trace, "CHAIN")
    spans = [root]
    for item in trace["observations"]:
        if isinstance(item, Mapping):
            spans.append(observation_span({"traceId": trace_id, **item}, parent=trace_id))
    return spans


def _spans(value: Any) -> list[Span]:
    if _is_trace(value):
        return trace_spans(value)
    if _is_observation(value):
        return [observation_span(value)]
    raise InputFormatError(
        "not a Langfuse observation (traceId, type, ...) nor a trace with its observations"
    )


def read_langfuse(path: PathLike) -> Iterator[list[Span]]:
    """The spans of a Langfuse export (UTF-8 JSON, gzip-compressed or not), a line (or a
    page) at a time; an empty file has none."""
    if is_empty(path):
        return
    try:
        yield from _read(path)
    except UnicodeDecodeError as exc:
        raise InputFormatError(
            f"not UTF-8 text ({exc}): a Langfuse export is JSON as its API returns it; "
            "convert the file to UTF-8, or give --from for the format it is in",
            path=str(path),
        ) from None
    except GZIP_ERRORS as exc:
        raise damaged_gzip(path, exc) from None


def _read(path: PathLike) -> Iterator[list[Span]]:
    with open_bytes(path) as handle:
        lines = bounded_lines(handle, path)
        _, first = next(lines, (0, b""))
        try:
            whole_lines = first.strip() and isinstance(json.loads(first.decode()), Mapping)
        except (ValueError, RecursionError):  # not JSON alone: a document over many lines
            whole_lines = False
        if not whole_lines:  # one JSON document: a page {"data": [...]} or a list
            handle.seek(0)
            try:
                document = json.loads(read_bounded(handle, path, "Langfuse JSON document").decode())
            except RecursionError:
                raise InputFormatError(NESTED, path=str(path)) from None
            except UnicodeDecodeError:
                raise
            except ValueError as exc:
                raise InputFormatError(f"not JSON ({exc})", path=str(path)) from None
            items = document.get("data") if isinstance(document, Mapping) else document
            if not isinstance(items, list):
                raise InputFormatError("expected a list of observations or traces", path=str(path))
            for start in range(0, len(items), _BATCH):
                try:
                    yield [s for item in items[start : start + _BATCH] for s in _spans(item)]
                except RecursionError:
                    raise InputFormatError(f"item near {start}: {NESTED}", path=str(path)) from None
                except (InputFormatError, KeyError, TypeError, ValueError, OverflowError) as exc:
                    raise InputFormatError(f"item near {start}: {exc}", path=str(path)) from None
            return
        handle.seek(0)
        for number, line in bounded_lines(handle, path):
            if not line.strip():
                continue
            try:
                value = json.loads(line.decode())
                if isinstance(value, Mapping) and isinstance(value.get("data"), list):
                    yield [s for item in value["data"] for s in _spans(item)]  # a page a line
                else:
                    yield _spans(value)
            except RecursionError:
                raise InputFormatError(NESTED, path=str(path), line=number) from None
            except UnicodeDecodeError:
                raise
            except (InputFormatError, KeyError, TypeError, ValueError, OverflowError) as exc:
                why = f"not JSON ({exc})" if isinstance(exc, json.JSONDecodeError) else str(exc)
                raise InputFormatError(why, path=str(path), line=number) from None
