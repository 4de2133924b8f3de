"""The streamed readers fed arbitrary bytes: OTLP/JSON lines, OTLP protobuf (one request
or length-prefixed), Langfuse exports, JSON-lines test sets and eval inputs, the files of
traces judged before; plain, gzip, or gzip cut short. Whatever the bytes (invalid UTF-8,
NUL, lone surrogates, huge integers, deep nesting, mixed line endings, lines over the
limit), each reader gives rows, skips, or a `JudgeError` with a message (exit 2 under the
CLI), never another exception."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from judge.errors import JudgeError
from judge.run.data import JsonlRecords, load_rows
from judge.traces.extract import judged_ids, read_rows
from tests.helpers.traces import rag_request

REQUEST = rag_request(0)
OTLP_LINE = json.dumps(REQUEST).encode()
PROTOBUF = json_format.ParseDict(REQUEST, ExportTraceServiceRequest()).SerializeToString()
ROW_LINE = json.dumps(
    {"id": "q1", "question": "Who?", "answer": "Ann.", "contexts": ["Ann."], "trace_id": "t1"}
).encode()
OBSERVATION = json.dumps(
    {"id": "o1", "traceId": "t1", "type": "SPAN", "name": "rag", "input": "q?", "output": "a."}
).encode()

PIECES = [
    OTLP_LINE, ROW_LINE, OBSERVATION, PROTOBUF, b"\n", b"\r\n", b"\r", b"\x00", b"\xff\xfe",
    b"\xed\xa0\x80", b'"\\ud800"', b"[" * 3000, b'{"a":' * 3000, b"7" * 5000, b"1e999",
    b'{"resourceSpans": [', b'{"resourceSpans": []}', b"\x1f\x8b", b"\n\x00", b"{}", b"[]",
    b'{"intValue": "' + b"9" * 5000 + b'"}', b'"NaN"', b"\xef\xbb\xbf", b"\t \x0b\x0c",
    b'{"resourceSpans": [' + b"[" * 3000,
]  # fmt: skip
CHARACTERS = st.characters() | st.sampled_from(["\ud800", "\udfff", "\n", " ", "\x00", "\x1b"])
# Well-formed requests of one trace whose texts and ids are any text (lone surrogates,
# white space, newlines, control characters): rows, or skips saying why.
requests = st.builds(
    rag_request,
    trace=st.integers(0, 3),
    question=st.text(CHARACTERS, max_size=8),
    answer=st.text(CHARACTERS, max_size=8),
    doc_ids=st.lists(st.text(CHARACTERS, max_size=4), max_size=3).map(tuple),
).map(lambda request: json.dumps(request).encode() + b"\n")


def mutated(seed: bytes) -> st.SearchStrategy[bytes]:
    """A valid record with a slice of it replaced by other bytes."""
    return st.tuples(st.integers(0, len(seed)), st.integers(0, 40), st.binary(max_size=20)).map(
        lambda t: seed[: t[0]] + t[2] + seed[t[0] + t[1] :]
    )


piece = st.one_of(
    st.sampled_from(PIECES),
    requests,
    st.binary(max_size=48),
    mutated(OTLP_LINE),
    mutated(PROTOBUF),
    mutated(ROW_LINE),
)
contents = st.one_of(
    st.lists(piece, max_size=10).map(b"".join),
    # a valid first line (the file is told to be OTLP/JSON lines), then anything
    st.lists(piece, max_size=6).map(lambda pieces: b"".join([OTLP_LINE, b"\n", *pieces])),
    # the collector's length-prefixed messages, sizes right or wrong
    st.lists(
        st.tuples(st.integers(0, 2**32 - 1) | st.just(-1), st.one_of(piece, st.just(PROTOBUF))),
        max_size=4,
    ).map(
        lambda items: b"".join((len(m) if n < 0 else n).to_bytes(4, "big") + m for n, m in items)
    ),
)
packings = st.sampled_from(["plain", "gzip", "gzip cut short"])
# Small enough that some generated lines go over it.
limits = st.sampled_from(["", "0.0005", "0.01"])


def packed(data: bytes, packing: str) -> bytes:
    if packing == "plain":
        return data
    squeezed = gzip.compress(data)
    return squeezed if packing == "gzip" else squeezed[: max(2, len(squeezed) // 2)]


def assert_rows_or_judge_error(read: Callable[[Path], Any], data: bytes, name: str, limit: str):
    with (
        tempfile.TemporaryDirectory() as folder,
        mock.patch.dict(os.environ, {"JUDGE_MAX_LINE_MB": limit}),
    ):
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            read(path)
        except JudgeError as exc:
            assert str(exc).strip()  # a message, not an empty error


FUZZ = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(contents, packings, limits, st.sampled_from([None, "otlp", "langfuse"]))
def test_trace_readers_give_rows_skips_or_an_input_error(data, packing, limit, source):
    def read(path: Path) -> None:
        skipped: list = []
        for row in read_rows(path, source=source, on_skip=skipped.append):
            json.dumps(row, ensure_ascii=False).encode("utf-8")  # every row can be written
        for skip in skipped:
            json.dumps(skip.to_dict(), ensure_ascii=False).encode("utf-8")

    assert_rows_or_judge_error(read, packed(data, packing), "traces.jsonl.gz", limit)


@FUZZ
@given(contents, limits)
def test_jsonl_readers_give_rows_or_an_input_error(data, limit):
    def read(path: Path) -> None:
        for record in JsonlRecords.scan(path):
            assert isinstance(record, dict)
        load_rows(path)
        judged_ids([path])

    assert_rows_or_judge_error(read, data, "rows.jsonl", limit)
