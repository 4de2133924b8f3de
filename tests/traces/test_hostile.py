"""Hostile trace files: text that is no Unicode (a lone surrogate), ids a TREC file cannot
hold, JSON nested past any depth, and lines without end. Each gives rows, skips naming
why, or exit 2 naming the file and line: never exit 70, never a forged TREC line, never
memory without bound."""

from __future__ import annotations

import gc
import gzip
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge.errors import InputFormatError
from judge.ir import read_run
from judge.traces.extract import extract as extract_files
from judge.traces.extract import read_rows
from tests.helpers.cli import run
from tests.helpers.traces import rag_request


def write_requests(path: Path, *requests: dict | str) -> Path:
    lines = (r if isinstance(r, str) else json.dumps(r) for r in requests)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def extract(tmp_path: Path, traces: Path, *extra: str, **options):
    return run(
        "traces",
        "extract",
        traces,
        "-o",
        tmp_path / "rows.jsonl",
        "--run",
        tmp_path / "run.trec",
        "--retriever-run",
        tmp_path / "retriever.trec",
        "--skipped",
        tmp_path / "skipped.jsonl",
        *extra,
        **options,
    )


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(
    "broken",
    [
        {"answer": "River 1 is \ud800 long."},
        {"question": "How long\udfff?"},
        {"doc_ids": ("d1", "d\ud83d")},
    ],
)
def test_a_lone_surrogate_in_a_span_is_that_traces_skip_reason(tmp_path, broken):
    traces = write_requests(
        tmp_path / "traces.jsonl", rag_request(0), rag_request(1, **broken), rag_request(2)
    )
    done = extract(tmp_path, traces)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(tmp_path / "rows.jsonl")
    assert [r["id"][-1] for r in rows] == ["1", "3"]  # the whole file, the broken trace out
    (skip,) = read_jsonl(tmp_path / "skipped.jsonl")
    assert skip["trace_id"].endswith("2") and skip["reason"] == "not_unicode"
    assert "lone surrogate" in skip["message"] and "\\ud" in skip["message"]  # escaped
    assert "1 not_unicode" in done.stdout + done.stderr


def test_a_lone_surrogate_in_a_span_name_of_a_skipped_trace_is_escaped(tmp_path):
    request = rag_request(0, answer="")
    del request["resourceSpans"][0]["scopeSpans"][0]["spans"][1]  # no retriever: a skip
    request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] = "R\ud800G"
    request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].pop()  # no output
    done = extract(tmp_path, write_requests(tmp_path / "traces.jsonl", request))
    assert done.returncode == 0, done.stderr
    assert len(read_jsonl(tmp_path / "skipped.jsonl")) == 1


@pytest.mark.parametrize(
    "doc", ["d1\nq Q0 forged 1 99 judge-traces", "d 1", "", "d\x00", "d\x1c1", "d\u2028"]
)
def test_a_document_id_trec_cannot_hold_is_a_skip_naming_it(tmp_path, doc):
    traces = write_requests(
        tmp_path / "traces.jsonl", rag_request(0), rag_request(1, doc_ids=("d1", doc))
    )
    done = extract(tmp_path, traces)
    assert done.returncode == 0, done.stderr
    (skip,) = read_jsonl(tmp_path / "skipped.jsonl")
    assert skip["reason"] == "unfit_id" and repr(doc) in skip["message"]
    assert len(read_jsonl(tmp_path / "rows.jsonl")) == 1
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(f"{1:032x} 0 d1 1\n", encoding="utf-8")
    for name in ("run.trec", "retriever.trec"):  # judge ir reads back what was written
        assert read_run(tmp_path / name) == {f"{1:032x}": {"d1": 2.0, "d2": 1.0}}
        shown = run("ir", qrels, tmp_path / name)
        assert shown.returncode == 0, shown.stderr


def test_a_langfuse_trace_id_trec_cannot_hold_is_a_skip(tmp_path):
    observations = [
        {"id": "o1", "traceId": "my trace", "type": "SPAN", "name": "rag", "input": "q?",
         "output": "a.", "startTime": "2026-01-01T00:00:00Z"},
        {"id": "o2", "traceId": "my trace", "parentObservationId": "o1", "type": "RETRIEVER",
         "name": "retrieve", "input": "q?", "output": [{"id": "d1", "content": "x"}],
         "startTime": "2026-01-01T00:00:01Z"},
    ]  # fmt: skip
    path = tmp_path / "observations.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in observations), encoding="utf-8")
    skipped: list = []
    rows = list(read_rows(path, source="langfuse", on_skip=skipped.append))
    assert rows == [] and [s.reason for s in skipped] == ["unfit_id"]
    assert "'my trace'" in skipped[0].message


def deep_request(depth: int) -> str:
    value = "[" * depth + "]" * depth
    return (
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "' + "1" * 32 + '", '
        '"spanId": "' + "2" * 16 + '", "name": "x", "attributes": [{"key": "k", "value": '
        '{"arrayValue": {"values": ['
        + '{"arrayValue": {"values": [' * depth
        + "]}}" * depth
        + ']}}}], "other": '
        + value
        + "}]}]}]}"
    )


@pytest.mark.parametrize("depth", [100_000, 2_000])
def test_json_nested_past_any_depth_is_an_input_error_with_file_and_line(tmp_path, depth):
    traces = write_requests(tmp_path / "traces.jsonl", rag_request(0), deep_request(depth))
    # The parse reaches the recursion limit: a collection there would run earlier tests'
    # finalizers with no stack left (an "unraisable" RecursionError pytest fails on).
    gc.collect()
    with pytest.raises(InputFormatError) as caught:
        list(read_rows(traces))
    assert f"{traces}:2:" in str(caught.value) and "nested" in str(caught.value)
    done = extract(tmp_path, traces)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{traces}:2:" in done.stderr
    done = run("eval", traces, "--dry-run", "--metrics", "mrr", "--out", tmp_path / "out")
    assert done.returncode == 2 and f"{traces}:2:" in done.stderr, done.stderr


@pytest.mark.parametrize("packed", [False, True])
def test_a_line_over_the_limit_is_an_input_error_naming_file_line_and_limit(tmp_path, packed):
    long_line = json.dumps(rag_request(1, answer="x" * 5000))
    plain = write_requests(tmp_path / "traces.jsonl", rag_request(0), long_line, rag_request(2))
    traces = plain
    if packed:
        traces = tmp_path / "traces.jsonl.gz"
        traces.write_bytes(gzip.compress(plain.read_bytes()))
    env = {
        **os.environ,
        "JUDGE_MAX_LINE_MB": "0.004",
    }  # 4194 bytes: the first line fits, the second not
    done = extract(tmp_path, traces, env=env)
    assert done.returncode == 2, done.stderr
    assert f"{traces}:2:" in done.stderr and "4194 bytes" in done.stderr
    assert "JUDGE_MAX_LINE_MB" in done.stderr and "Traceback" not in done.stderr
    done = run("eval", traces, "--dry-run", "--metrics", "mrr", "--out", tmp_path / "o", env=env)
    assert done.returncode == 2 and f"{traces}:2:" in done.stderr, done.stderr
    assert extract(tmp_path, traces, env={**os.environ, "JUDGE_MAX_LINE_MB": "1"}).returncode == 0


@pytest.mark.parametrize("prefixed", [True, False])
def test_a_protobuf_message_over_the_limit_is_refused(tmp_path, monkeypatch, prefixed):
    monkeypatch.setenv("JUDGE_MAX_LINE_MB", "1")
    body = b"\n" + b"\x00" * (2 << 20)  # 2 MiB of one OTLP protobuf request
    path = tmp_path / "traces.binpb"
    path.write_bytes(len(body).to_bytes(4, "big") + body if prefixed else body)
    with pytest.raises(InputFormatError) as caught:
        list(read_rows(path))
    message = str(caught.value)
    assert "1 MiB" in message and "JUDGE_MAX_LINE_MB" in message
    assert ("message 1" if prefixed else "protobuf request") in message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(
            st.text(st.characters() | st.sampled_from(["\n", " ", "\x00", "\ud800"]), max_size=4),
            min_size=1,
            max_size=3,
            unique=True,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_every_run_written_reads_back_as_the_rows_rankings(rankings):
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        traces = write_requests(
            out / "traces.jsonl",
            *(rag_request(i, doc_ids=tuple(ids)) for i, ids in enumerate(rankings)),
        )
        summary = extract_files(traces, out / "rows.jsonl", run=out / "run.trec")
        rows = read_jsonl(out / "rows.jsonl")
        assert summary.rows == len(rows) and summary.rows + sum(summary.skipped.values()) == len(
            rankings
        )
        expected = {r["id"]: r["retrieved_ids"] for r in rows if r["retrieved_ids"]}
        run = read_run(out / "run.trec") if expected else {}
        assert {q: sorted(d, key=d.get, reverse=True) for q, d in run.items()} == expected


@pytest.mark.parametrize(
    ("trace_id", "span_id", "wrong"),
    [(b"\x01" * 20, b"\x02" * 8, "traceId"), (b"\x01" * 16, b"\x02" * 2, "spanId")],
)
def test_ids_of_the_wrong_length_are_refused_in_protobuf_as_in_json(
    tmp_path, trace_id, span_id, wrong
):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = trace_id, span_id, "rag"
    proto = tmp_path / "traces.binpb"
    proto.write_bytes(request.SerializeToString())
    as_json = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {"spans": [{"traceId": trace_id.hex(), "spanId": span_id.hex(), "name": "rag"}]}
                ]
            }
        ]
    }
    for path in (proto, write_requests(tmp_path / "traces.jsonl", as_json)):
        with pytest.raises(InputFormatError) as caught:
            list(read_rows(path))
        assert wrong in str(caught.value) and str(path) in str(caught.value)
        done = extract(tmp_path, path)
        assert done.returncode == 2 and wrong in done.stderr, done.stderr
