"""Scores back beside their traces: gen_ai.evaluation.result events from a real `judge eval`
run, read back with the OpenTelemetry protobuf classes, sent through the SDK's OTLP/HTTP
exporter to a loopback receiver, and as Phoenix span evaluations."""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import math
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from judge.cli.traces_export import add_export_parser
from judge.cli.words import cli_words
from judge.errors import InputFormatError, JudgeError
from judge.run.rows import ResultRow
from judge.testing import FakeLLMServer
from judge.traces.export import (
    EVENT_NAME,
    EXPLANATION,
    NAME,
    SCORE_VALUE,
    TraceLink,
    evaluation_events,
    logs_endpoint,
    otlp_json_lines,
    phoenix_evaluations,
    read_results,
    read_rows,
    send_otlp,
    write_phoenix,
)
from tests.helpers.cli import run
from tests.helpers.judging import judge_handler

METRICS = "faithfulness,context_recall,context_precision,hallucination_rate"


def trace_row(i: int, *, contexts: list[str] | None = None) -> dict:
    """A row as `judge traces extract` writes it: id = trace id, and the judged span."""
    trace = f"{0xABC0 + i:032x}"
    return {
        "id": trace,
        "trace_id": trace,
        "span_id": f"{0x5EA0 + i:016x}",
        "question": f"Who created Python? ({i})",
        "answer": "Guido van Rossum created Python. He also likes bananas.",
        "contexts": ["Python was created by Guido van Rossum."] if contexts is None else contexts,
        "ground_truth": "Guido van Rossum created Python.",
    }


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real `judge eval` run on three trace rows (the third without contexts): the rows
    file and the --out folder."""
    tmp = tmp_path_factory.mktemp("judged")
    rows = tmp / "rows.jsonl"
    data = [trace_row(0), trace_row(1), trace_row(2, contexts=[])]
    rows.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    with FakeLLMServer() as server:
        server.chat = judge_handler
        done = run(
            "eval", rows, "--model", "openai/judge", "--api-base", server.base_url,
            "--api-key", "k", "--cache", tmp / "cache.sqlite", "--out", tmp / "out",
            "--metrics", METRICS, "--no-progress", "--no-record",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return rows, tmp / "out"


def export(*argv: str) -> int:
    """`judge traces export ARGV` through its own parser, as the `traces` group will run it."""
    parser = argparse.ArgumentParser(prog="judge traces")
    add_export_parser(parser.add_subparsers())
    args = parser.parse_args(["export", *argv])
    return int(args.func(args))


def cli_error(*argv: str) -> str:
    """The message `judge` prints for the JudgeError the command raises."""
    with pytest.raises(JudgeError) as caught:
        export(*argv)
    return cli_words(str(caught.value))


def as_protobuf(line: str) -> ExportLogsServiceRequest:
    """An OTLP JSON line parsed with the protobuf classes: OTLP JSON writes trace and span
    ids in hex where protobuf's JSON mapping of bytes is base64 (the OTLP spec's one
    exception), so the ids are turned back first, as the Collector's receiver does."""
    data = json.loads(line)
    for resource in data["resourceLogs"]:
        for scope in resource["scopeLogs"]:
            for record in scope["logRecords"]:
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64encode(bytes.fromhex(record[key])).decode()
    return json_format.ParseDict(data, ExportLogsServiceRequest())


def records(request: ExportLogsServiceRequest) -> list[LogRecord]:
    return [r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]


def attrs(record: LogRecord) -> dict:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in record.attributes}


# --- the events ---------------------------------------------------------------------------


def test_each_event_links_to_the_trace_and_span_its_row_came_from(judged):
    rows_path, out = judged
    rows = {r["id"]: r for r in read_rows(rows_path)}
    events = evaluation_events(read_results(out), read_rows(rows_path))
    assert events.skipped == {}
    assert len(events) == 3 * 4  # one per (row, metric)
    for event in events:
        assert event.trace_id == rows[event.row_id]["trace_id"]
        assert event.span_id == rows[event.row_id]["span_id"]
    assert {(e.row_id, e.metric) for e in events} == {
        (r, m) for r in rows for m in METRICS.split(",")
    }


def test_an_undefined_score_is_an_event_without_a_value_but_with_its_reason(judged):
    rows_path, out = judged
    events = evaluation_events(read_results(out), read_rows(rows_path))
    third = trace_row(2)["trace_id"]
    event = next(e for e in events if e.trace_id == third and e.metric == "faithfulness")
    assert event.score is None
    assert event.error_type is None  # no contexts: undefined, not a failure
    attributes = event.attributes()
    assert SCORE_VALUE not in attributes  # conditionally required "if applicable": it is not
    assert attributes[EXPLANATION] == "undefined: no_contexts"


def test_faithfulness_explains_itself_with_the_unsupported_claims(judged):
    rows_path, out = judged
    results = list(read_results(out))
    first = evaluation_events(results, read_rows(rows_path))
    event = next(e for e in first if e.metric == "faithfulness" and e.score is not None)
    claims = results[0].evidence["answer_claims"]
    unsupported = [
        claims[v["claim"]]
        for v in results[0].evidence["answer_verdicts"]
        if v["verdict"] != "supported"
    ]
    assert unsupported, "the heuristic judge finds the bananas unsupported"
    for claim in unsupported:
        assert claim in event.explanation
    assert event.explanation.startswith(f"{len(unsupported)} of {len(claims)} answer claims")
    again = evaluation_events(results, read_rows(rows_path))
    assert again.events == first.events  # deterministic


def test_thresholds_label_pass_or_fail_on_the_metrics_good_side(judged):
    rows_path, out = judged
    limits = {"context_recall": 0.5, "hallucination_rate": 0.5, "faithfulness": 1.0}
    events = evaluation_events(read_results(out), read_rows(rows_path), thresholds=limits)
    for event in events:
        if event.score is None:
            assert event.label is None
            continue
        if event.metric == "hallucination_rate":  # lower is better
            assert event.label == ("pass" if event.score <= 0.5 else "fail")
        elif event.metric in limits:
            assert event.label == ("pass" if event.score >= limits[event.metric] else "fail")
        else:
            assert event.label is None
    assert {e.label for e in events if e.metric == "hallucination_rate"} & {"pass", "fail"}


def test_a_judge_failure_and_an_unreadable_row_carry_error_type():
    links = [
        {"id": "a", "trace_id": "1" * 32, "span_id": "2" * 16},
        {"id": "b", "trace_id": "3" * 32, "span_id": "4" * 16},
    ]
    results = [
        ResultRow(
            row=0,
            id="a",
            scores={"faithfulness": math.nan},
            reasons={"faithfulness": "judge_error"},
            errors={"faithfulness": "the provider kept failing (HTTP 503) after 6 retries"},
        ),
        ResultRow(row=1, id="b", error="no answer column", scores={"faithfulness": math.nan}),
    ]
    a, b = evaluation_events(results, links)
    assert (a.error_type, a.score) == ("judge_error", None)
    assert "HTTP 503" in a.explanation
    assert b.error_type == "row_error"
    assert "no answer column" in b.explanation


def test_results_without_a_trace_row_are_counted_and_named_never_silent(judged, capsys):
    rows_path, out = judged
    some = [r for r in read_rows(rows_path) if r["id"] != trace_row(1)["id"]]
    events = evaluation_events(read_results(out), some)
    assert events.skipped == {"no_trace_row": [trace_row(1)["id"]]}
    assert len(events) == 2 * 4
    assert events.notes() == [
        f"1 result row had no row of the same id in the rows file: {trace_row(1)['id']}"
    ]
    # The command says so on stderr and still writes the others.
    partial = rows_path.parent / "some.jsonl"
    partial.write_text("".join(json.dumps(r) + "\n" for r in some), encoding="utf-8")
    assert export(str(out), "--rows", str(partial), "--otlp-json", str(out / "e.jsonl")) == 0
    assert "judge: note: 1 result row had no row" in capsys.readouterr().err
    # None matching is an error, not an empty file.
    other = rows_path.parent / "other.jsonl"
    other.write_text(json.dumps(trace_row(7)) + "\n", encoding="utf-8")
    message = cli_error(str(out), "--rows", str(other), "--otlp-json", str(out / "x.jsonl"))
    assert "no result row" in message and "--rows" in message
    assert not (out / "x.jsonl").exists()


def test_a_row_without_trace_id_is_counted_apart():
    rows = [{"id": "a", "trace_id": "ab" * 16}, {"id": "b", "question": "no trace"}]
    results = [ResultRow(row=i, id=i_d, scores={"faithfulness": 1.0}) for i, i_d in enumerate("ab")]
    events = evaluation_events(results, rows)
    assert [e.row_id for e in events] == ["a"]
    assert events.skipped == {"no_trace_id": ["b"]}
    assert events.notes() == ["1 result row had a row without a trace_id: b"]


def test_a_result_naming_another_trace_than_its_row_is_counted_apart():
    """A turn's result names the trace it judged (any way a trace id is written); a row of
    its id holding another trace is not where its scores go."""
    trace = "ab" * 16
    links = {k: TraceLink(trace, None) for k in ("same", "upper", "other", "bad", "none")}
    given = {"same": trace, "upper": "0x" + trace.upper(), "other": "cd" * 16, "bad": "t-1"}
    results = [
        ResultRow(row=i, id=k, scores={"faithfulness": 1.0}, trace_id=given.get(k))
        for i, k in enumerate(links)
    ]
    events = evaluation_events(results, links)
    assert [e.row_id for e in events] == ["same", "upper", "none"]
    assert events.skipped == {"other_trace": ["other", "bad"]}


def test_a_row_without_span_id_links_to_its_trace_alone():
    row = {"id": "r", "trace_id": "ab" * 16, "span_id": None}
    (event,) = evaluation_events([ResultRow(row=0, id="r", scores={"faithfulness": 0.5})], [row])
    assert event.span_id is None
    (record,) = records(as_protobuf(otlp_json_lines([event])[0]))
    assert record.trace_id == bytes.fromhex("ab" * 16)
    assert record.span_id == b""
    phoenix = phoenix_evaluations([event])
    assert (phoenix.frames, phoenix.without_span) == ({}, 1)


def test_the_turns_of_conversations_are_linked_by_the_ids_judge_eval_gives_their_rows(tmp_path):
    """A conversations file as rows: each assistant turn that answers a question is linked
    by its row's id (`<conversation>#<turn>`, a conversation without id by its number); a
    message that only calls tools is no turn; an unreadable conversation is one row, with
    no trace."""
    from judge.run.data import load_rows
    from judge.traces.export import trace_links

    t1, t2, t3 = (f"{n:032x}" for n in (1, 2, 3))
    conversations = [
        {
            "id": "c",
            "turns": [
                {"role": "user", "content": "Q1"},
                {"role": "assistant", "content": "A1", "trace_id": t1, "span_id": "a" * 16},
                {"role": "user", "content": "Q2"},
                {"role": "assistant", "content": None, "tool_calls": [{"name": "f"}]},
                {"role": "tool", "content": "42"},
                {"role": "assistant", "content": "A2", "trace_id": t2},
            ],
        },
        {"turns": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A",
                                                     "trace_id": t3, "span_id": "obs-1"}]},
        {"id": "bad", "turns": "not a list"},
    ]  # fmt: skip
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")
    links = trace_links(read_rows(path), path=str(path))
    assert links == {
        "c#2": TraceLink(t1, "a" * 16),
        "c#6": TraceLink(t2, None),
        "1#2": TraceLink(t3, None, "obs-1"),
        "bad": None,
    }
    rows, _, _ = load_rows(path)
    assert [str(row.sample.id if row.sample else row.id) for row in rows] == list(links)
    # A turn's malformed trace id names the line of its conversation.
    conversations[1]["turns"][1]["trace_id"] = "trace-3"
    path.write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"conversations\.jsonl:2: trace_id .trace-3."):
        trace_links(read_rows(path), path=str(path))


def test_a_conversation_of_an_earlier_ones_id_links_no_turn(tmp_path):
    """judge eval judges the first of two conversations of one id and makes the second an
    error row: the second's turn (the same id, `c#2`) took the link of the first's, so the
    first's scores were refused as naming another trace (or sent to the second's trace,
    before results named their traces)."""
    from judge.run.data import load_rows
    from judge.traces.export import trace_links

    t1, t2 = (f"{n:032x}" for n in (1, 2))
    conversations = [
        {"id": "c", "turns": [{"role": "user", "content": "Q1"},
                              {"role": "assistant", "content": "A1", "trace_id": t1}]},
        {"id": "c", "turns": [{"role": "user", "content": "Q2"},
                              {"role": "assistant", "content": "A2", "trace_id": t2}]},
    ]  # fmt: skip
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")
    links = trace_links(read_rows(path), path=str(path))
    assert links == {"c#2": TraceLink(t1, None), "c": None}
    rows, _, _ = load_rows(path)
    assert [str(row.sample.id if row.sample else row.id) for row in rows] == list(links)


def test_a_malformed_trace_id_is_an_input_error(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "r", "trace_id": "not-hex"}) + "\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"rows.jsonl:1: trace_id 'not-hex'"):
        from judge.traces.export import trace_links

        trace_links(read_rows(rows), path=str(rows))


# --- OTLP JSON, read back with the protobuf classes ----------------------------------------


def test_the_otlp_json_file_parses_into_export_logs_service_requests(judged, tmp_path):
    rows_path, out = judged
    target = tmp_path / "events.jsonl"
    assert export(str(out), "--rows", str(rows_path), "--otlp-json", str(target)) == 0
    lines = target.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1  # one ExportLogsServiceRequest per line, up to 512 records each
    request = as_protobuf(lines[0])
    (resource,) = request.resource_logs
    assert attrs_of(resource.resource.attributes) == {"service.name": "judge"}
    assert resource.scope_logs[0].scope.name == "judge"
    got = records(request)
    events = evaluation_events(read_results(out), read_rows(rows_path))
    assert len(got) == len(events)
    stamp = (out / "results.jsonl").stat().st_mtime_ns
    for record, event in zip(got, events, strict=True):
        assert record.event_name == EVENT_NAME
        assert record.trace_id.hex() == event.trace_id
        assert record.span_id.hex() == event.span_id
        assert record.time_unix_nano == record.observed_time_unix_nano == stamp
        assert attrs(record) == event.attributes()
    undefined = [r for r in got if SCORE_VALUE not in attrs(r)]
    assert len(undefined) == 4  # the third row's four metrics, no contexts
    # The same results give the same bytes.
    again = tmp_path / "again.jsonl"
    export(str(out), "--rows", str(rows_path), "--otlp-json", str(again))
    assert again.read_bytes() == target.read_bytes()


def attrs_of(attributes) -> dict:
    return {kv.key: kv.value.string_value for kv in attributes}


def test_many_events_are_split_into_requests_of_512_records():
    rows = [
        {"id": str(i), "trace_id": f"{i + 1:032x}", "span_id": f"{i + 1:016x}"} for i in range(300)
    ]
    results = [
        ResultRow(row=i, id=str(i), scores={"faithfulness": 1.0, "context_recall": 0.5})
        for i in range(300)
    ]
    lines = otlp_json_lines(evaluation_events(results, rows).events)
    assert [len(records(as_protobuf(line))) for line in lines] == [512, 88]


# --- the SDK's OTLP/HTTP exporter, to a loopback receiver ----------------------------------


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP receiver on loopback that keeps every request's path and protobuf body."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.bodies: list[tuple[str, bytes]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        server = self.server
        assert isinstance(server, Receiver)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        server.bodies.append((self.path, body))
        self.send_response(server.status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args) -> None:  # keep the test output quiet
        pass


@pytest.fixture
def receiver(monkeypatch) -> Iterator[Receiver]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")  # the exporter uses requests
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_export_otlp_sends_the_same_records_through_the_sdk(judged, receiver, tmp_path, capsys):
    rows_path, out = judged
    target = tmp_path / "events.jsonl"
    code = export(
        str(out), "--rows", str(rows_path), "--otlp-json", str(target),
        "--export-otlp", receiver.url,
    )  # fmt: skip
    assert code == 0
    assert f"sent 12 evaluation events to {receiver.url}" in capsys.readouterr().out
    assert {path for path, _ in receiver.bodies} == {"/v1/logs"}
    sent = [
        r for _, body in receiver.bodies for r in records(ExportLogsServiceRequest.FromString(body))
    ]
    written = records(as_protobuf(target.read_text(encoding="utf-8").splitlines()[0]))
    # The SDK's protobuf and judge's own OTLP JSON say the same of every event.
    assert len(sent) == len(written) == 12
    for got, want in zip(sent, written, strict=True):
        assert got.event_name == want.event_name == EVENT_NAME
        assert (got.trace_id, got.span_id) == (want.trace_id, want.span_id)
        assert got.time_unix_nano == want.time_unix_nano
        assert attrs(got) == attrs(want)
    request = ExportLogsServiceRequest.FromString(receiver.bodies[0][1])
    assert request.resource_logs[0].scope_logs[0].scope.name == "judge"


def test_export_otlp_sends_every_event_of_more_than_one_batch(receiver):
    rows = [
        {"id": str(i), "trace_id": f"{i + 1:032x}", "span_id": f"{i + 1:016x}"} for i in range(600)
    ]
    results = [ResultRow(row=i, id=str(i), scores={"faithfulness": i / 600}) for i in range(600)]
    events = evaluation_events(results, rows).events
    assert send_otlp(events, receiver.url) == 600
    requests = [ExportLogsServiceRequest.FromString(body) for _, body in receiver.bodies]
    # The SDK's batch processor sends at most 512 records a request; when it sends (a full
    # batch, or its timer on a loaded machine: 330 + 182 + 88 was seen) is its own.
    sizes = [len(records(r)) for r in requests]
    assert len(sizes) >= 2 and max(sizes) <= 512 and sum(sizes) == 600
    sent = [r for request in requests for r in records(request)]
    assert [r.span_id.hex() for r in sent] == [e.span_id for e in events]


def test_an_endpoint_that_refuses_the_scores_is_an_error(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = Receiver(status=400)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        row = {"id": "r", "trace_id": "ab" * 16, "span_id": "cd" * 8}
        events = evaluation_events([ResultRow(row=0, id="r", scores={"faithfulness": 1.0})], [row])
        with pytest.raises(JudgeError, match=r"did not take the scores \(0 of 1 event sent"):
            send_otlp(events.events, server.url, timeout=2)
    finally:
        server.shutdown()
        server.server_close()


def test_export_otlp_without_the_sdk_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http._log_exporter", None)
    row = {"id": "r", "trace_id": "ab" * 16, "span_id": "cd" * 8}
    events = evaluation_events([ResultRow(row=0, id="r", scores={"faithfulness": 1.0})], [row])
    with pytest.raises(JudgeError, match=r"pip install 'judge\[otel\]'"):
        send_otlp(events.events, "http://127.0.0.1:9")


def test_logs_endpoint_adds_the_logs_path_to_a_bare_address():
    assert logs_endpoint("http://localhost:4318") == "http://localhost:4318/v1/logs"
    assert logs_endpoint("http://localhost:4318/") == "http://localhost:4318/v1/logs"
    assert (
        logs_endpoint("https://x.example/api/otlp/v1/logs") == "https://x.example/api/otlp/v1/logs"
    )
    with pytest.raises(JudgeError, match="http:// or https://"):
        logs_endpoint("localhost:4318")


# --- Phoenix span evaluations ---------------------------------------------------------------


def test_phoenix_frames_one_per_metric_in_the_clients_shape(judged, tmp_path):
    rows_path, out = judged
    events = evaluation_events(
        read_results(out), read_rows(rows_path), thresholds={"faithfulness": 0.5}
    )
    phoenix = phoenix_evaluations(events)
    assert phoenix.without_score == 4  # the third row's: Phoenix's client cannot send them
    assert sorted(phoenix.frames) == sorted(METRICS.split(","))
    for metric, frame in phoenix.frames.items():
        assert list(frame.columns) == ["span_id", "score", "label", "explanation"]
        mine = [e for e in events if e.metric == metric and e.score is not None]
        assert frame["span_id"].tolist() == [e.span_id for e in mine]
        assert frame["score"].tolist() == [e.score for e in mine]
        assert frame["label"].tolist() == [e.label or "" for e in mine]
        assert frame["explanation"].tolist() == [e.explanation or "" for e in mine]
    assert set(phoenix.frames["faithfulness"]["label"]) <= {"pass", "fail"}
    assert set(phoenix.frames["context_recall"]["label"]) == {""}  # no threshold, no label

    target = tmp_path / "evals.parquet"
    assert export(str(out), "--rows", str(rows_path), "--phoenix", str(target)) == 0
    table = pd.read_parquet(target)
    assert list(table.columns) == [
        "name", "span_id", "score", "label", "explanation", "annotator_kind",
    ]  # fmt: skip
    assert len(table) == 8
    assert set(table["annotator_kind"]) == {"LLM"}
    assert not table.isna().any().any()


class PhoenixServer(ThreadingHTTPServer):
    """Phoenix's REST API on loopback, as far as logging span annotations goes: keeps the
    JSON bodies and answers with an id per annotation."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict]] = []
        super().__init__(("127.0.0.1", 0), _PhoenixHandler)


class _PhoenixHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        server = self.server
        assert isinstance(server, PhoenixServer)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.bodies.append((self.path, body))
        reply = json.dumps({"data": [{"id": str(i)} for i in range(len(body["data"]))]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(reply.encode())

    def log_message(self, *args) -> None:
        pass


def test_phoenixs_own_client_logs_the_parquet_file(judged, tmp_path, monkeypatch, capsys):
    from phoenix.client import Client

    rows_path, out = judged
    target = tmp_path / "evals.parquet"
    export(
        str(out),
        "--rows",
        str(rows_path),
        "--phoenix",
        str(target),
        "--threshold",
        "faithfulness=0.5",
    )
    assert "4 events without a score" in capsys.readouterr().err
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = PhoenixServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = Client(base_url=f"http://127.0.0.1:{server.server_address[1]}")
        client.spans.log_span_annotations_dataframe(dataframe=pd.read_parquet(target), sync=True)
    finally:
        server.shutdown()
        server.server_close()
    sent = [a for path, body in server.bodies for a in body["data"]]
    assert {path.split("?")[0] for path, _ in server.bodies} == {"/v1/span_annotations"}
    events = [
        e
        for e in evaluation_events(
            read_results(out), read_rows(rows_path), thresholds={"faithfulness": 0.5}
        )
        if e.score is not None
    ]
    assert len(sent) == len(events) == 8
    want = {
        (e.metric, e.span_id): {
            k: v
            for k, v in {"score": e.score, "label": e.label, "explanation": e.explanation}.items()
            if v is not None
        }
        for e in events
    }
    assert {(a["name"], a["span_id"]): a["result"] for a in sent} == want
    assert {a["annotator_kind"] for a in sent} == {"LLM"}
    assert '"nan"' not in json.dumps(sent)  # no null label sent as the text "nan"


def test_a_retrieval_metric_is_a_code_annotation(tmp_path):
    row = {"id": "r", "trace_id": "ab" * 16, "span_id": "cd" * 8}
    result = ResultRow(row=0, id="r", scores={"mrr": 0.5, "faithfulness": 1.0})
    evaluations = phoenix_evaluations(evaluation_events([result], [row]))
    table = pd.read_parquet(write_phoenix(evaluations, tmp_path / "e.parquet"))
    assert dict(zip(table["name"], table["annotator_kind"], strict=True)) == {
        "faithfulness": "LLM",
        "mrr": "CODE",
    }


# --- the command's errors, in its flags ------------------------------------------------------


def test_errors_name_the_flags(judged, tmp_path):
    rows_path, out = judged
    base = (str(out), "--rows", str(rows_path))
    assert "--otlp-json, --export-otlp or --phoenix" in cli_error(*base)
    assert "--threshold 'faithfulness'" in cli_error(
        *base, "--otlp-json", str(tmp_path / "e.jsonl"), "--threshold", "faithfulness"
    )
    unknown = cli_error(
        *base, "--otlp-json", str(tmp_path / "e.jsonl"), "--threshold", "faithfulnes=0.5"
    )
    assert unknown.startswith("--threshold names 'faithfulnes', which no judged row has")
    assert "--phoenix" in cli_error(*base, "--phoenix", str(tmp_path / "e.csv"))
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"id": "s0", "question": "q"}) + "\n", encoding="utf-8")
    no_traces = cli_error(str(out), "--rows", str(plain), "--otlp-json", "e.jsonl")
    assert no_traces.startswith(f"--rows {plain}: no row has a trace_id")
    no_results = cli_error(str(tmp_path), "--rows", str(rows_path), "--otlp-json", "e.jsonl")
    assert "no results.jsonl" in no_results


# --- rows read from Langfuse: ids that are not OpenTelemetry's --------------------------


def test_a_uuid_trace_id_becomes_its_32_hex_digits():
    from judge.traces.export import trace_links

    uuid = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
    links = trace_links([{"id": "r", "trace_id": uuid, "span_id": "ab" * 8}])
    assert links["r"] is not None and links["r"].trace_id == uuid.replace("-", "")
    assert links["r"].span_id == "ab" * 8


def test_a_span_id_that_is_not_an_otel_id_links_to_the_trace_alone_and_is_counted():
    row = {"id": "r", "trace_id": "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "span_id": "o1"}
    results = [ResultRow(row=0, id="r", scores={"faithfulness": 0.5})]
    events = evaluation_events(results, [row])
    (event,) = events
    assert event.trace_id == "3f2504e04f8911d39a0c0305e82c3301" and event.span_id is None
    assert events.trace_only == ["r"]
    (note,) = events.notes()
    assert note.startswith("1 result row had a span_id that is not an OpenTelemetry span id")
    assert "Langfuse" in note and note.endswith(": r")


def test_a_langfuse_trace_id_that_is_no_uuid_says_langfuse_ids_are_not_otel_ids(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "r", "trace_id": "t1", "span_id": "o1"}) + "\n")
    from judge.traces.export import trace_links

    with pytest.raises(InputFormatError, match=r"rows.jsonl:1: trace_id 't1'") as caught:
        trace_links(read_rows(rows), path=str(rows))
    assert "Langfuse" in str(caught.value) and "UUID" in str(caught.value)


def test_export_takes_the_rows_extract_wrote_from_langfuse(tmp_path):
    """Rows from Langfuse observations made without OpenTelemetry: UUID trace ids and
    observation ids; the events link to the traces alone, and the command says so."""
    uuid = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
    observations = [
        {"id": "6c1b", "traceId": uuid, "parentObservationId": None, "type": "SPAN",
         "name": "rag", "startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T00:00:02Z",
         "input": "How long is river 1?", "output": "100 km"},
        {"id": "7d2c", "traceId": uuid, "parentObservationId": None, "type": "RETRIEVER",
         "name": "retrieve", "startTime": "2026-01-01T00:00:00.1Z",
         "endTime": "2026-01-01T00:00:00.5Z", "input": "river 1",
         "output": [{"id": "d1", "page_content": "river 1 is 100 km"}]},
    ]  # fmt: skip
    traces = tmp_path / "observations.jsonl"
    traces.write_text("".join(json.dumps(o) + "\n" for o in observations), encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    assert run("traces", "extract", traces, "-o", rows).returncode == 0
    results = tmp_path / "results.jsonl"
    result = ResultRow(row=0, id=uuid, scores={"faithfulness": 1.0})
    results.write_text(json.dumps(result.to_json()) + "\n", encoding="utf-8")
    out = tmp_path / "events.jsonl"
    done = run("traces", "export", results, "--rows", rows, "--otlp-json", out)
    assert done.returncode == 0, done.stderr
    assert "not an OpenTelemetry span id" in done.stderr
    (record,) = records(as_protobuf(out.read_text(encoding="utf-8").splitlines()[0]))
    assert record.trace_id == bytes.fromhex(uuid.replace("-", "")) and record.span_id == b""


def test_the_phoenix_line_counts_the_metrics_it_wrote(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"id": "r", "trace_id": "ab" * 16, "span_id": "cd" * 8}) + "\n",
        encoding="utf-8",
    )
    results = tmp_path / "results.jsonl"
    result = ResultRow(row=0, id="r", scores={"faithfulness": 1.0, "answer_relevancy": math.nan})
    results.write_text(json.dumps(result.to_json()) + "\n", encoding="utf-8")
    done = run(
        "traces", "export", results, "--rows", rows, "--otlp-json", tmp_path / "e.jsonl",
        "--phoenix", tmp_path / "p.parquet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote 2 evaluation events (1 row, 2 metrics)" in done.stdout
    assert "wrote 1 Phoenix span evaluation (1 metric)" in done.stdout


def test_judge_eval_of_a_trace_file_sends_its_scores_back_beside_the_traces(
    receiver, tmp_path, fake_llm_server: FakeLLMServer
):
    from tests.helpers.rag_spans import scenarios
    from tests.helpers.traces import export as export_spans
    from tests.helpers.traces import write_json_lines

    fake_llm_server.chat = judge_handler
    ids: dict[str, str] = {}
    bodies = export_spans(lambda provider: ids.update(scenarios(provider)), batch=4)
    traces = write_json_lines(bodies, tmp_path / "traces.jsonl")
    rows = jsonl_rows(run("traces", "extract", traces, "-o", tmp_path / "rows.jsonl"), tmp_path)
    common = ["--model", "openai/judge", "--api-base", fake_llm_server.base_url, "--api-key", "k"]
    common += ["--cache", str(tmp_path / "c.sqlite"), "--no-progress", "--metrics", "faithfulness"]
    done = run(
        "eval", traces, "--out", tmp_path / "out", "--export-otlp", receiver.url,
        "--threshold", "faithfulness=0.5", *common,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"sent 3 evaluation events to {receiver.url}" in done.stdout
    sent = [
        r for _, body in receiver.bodies for r in records(ExportLogsServiceRequest.FromString(body))
    ]
    spans = {(row["trace_id"], row["span_id"]) for row in rows}
    assert {(r.trace_id.hex(), r.span_id.hex()) for r in sent} == spans
    assert {attrs(r)["gen_ai.evaluation.score.label"] for r in sent} <= {"pass", "fail"}
    # the same flags on a file of rows, which holds no traces, stop before any judging
    plain = run("eval", tmp_path / "rows.jsonl", "--out", tmp_path / "o2", "--export-otlp",
                receiver.url, *common)  # fmt: skip
    assert plain.returncode == 2 and "holds no traces: give a trace file" in plain.stderr
    assert not (tmp_path / "o2").exists()


def jsonl_rows(done, tmp_path: Path) -> list[dict]:
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "rows.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


# --- a sessions run: each turn's scores back on its own trace --------------------------------


def test_the_scores_of_a_sessions_run_land_on_each_turns_trace_and_root_span(tmp_path):
    """Chat turns made by the real OpenTelemetry SDK, two sessions interleaved, each turn a
    trace: `judge traces extract --sessions`, `judge eval` of the conversations, and
    `judge traces export --rows sessions.jsonl`. Each turn's events land on its own trace,
    parented to its root span, with that turn's scores (which differ from turn to turn)."""
    from judge.testing.replies import heuristic_judge
    from tests.helpers.session_traces import Traces

    traces = Traces()
    said = "Document {0} says river {0} is {0}00 km long."
    turns = {  # row id -> the turn's trace id
        "A#2": traces.turn(0, "How long is river 1?", said.format(1), "A", docs=("d1",)),
        "B#2": traces.turn(10, "How long is river 2?", "River 2 is pink.", "B", docs=("d2",)),
        "A#4": traces.turn(20, "And river 3?", said.format(3) + " It is pink.", "A", docs=("d3",)),
        "B#4": traces.turn(30, "And river 4?", said.format(4), "B", docs=("d4",)),
    }
    sessions = tmp_path / "sessions.jsonl"
    done = run(
        "traces", "extract", traces.write(tmp_path / "t.jsonl"), "-o", sessions, "--sessions"
    )
    assert done.returncode == 0, done.stderr
    with FakeLLMServer(chat=heuristic_judge) as server:
        done = run(
            "eval", sessions, "--model", "openai/judge", "--api-base", server.base_url,
            "--api-key", "k", "--cache", tmp_path / "c.sqlite", "--out", tmp_path / "out",
            "--metrics", "faithfulness,hallucination_rate", "--no-progress", "--no-record",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    scores = {r.id: r.scores for r in read_results(tmp_path / "out")}
    assert set(scores) == set(turns)
    assert len({s["faithfulness"] for s in scores.values()}) == 3  # 1, 0, 0.5: told apart

    events_file, phoenix_file = tmp_path / "events.jsonl", tmp_path / "evals.parquet"
    done = run(
        "traces", "export", tmp_path / "out", "--rows", sessions, "--otlp-json", events_file,
        "--phoenix", phoenix_file, "--threshold", "faithfulness=0.8",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote 8 evaluation events (4 rows, 2 metrics)" in done.stdout
    assert "note" not in done.stderr  # no row left out, none linked to its trace alone
    sent = [r for line in events_file.read_text().splitlines() for r in records(as_protobuf(line))]
    assert len(sent) == 8
    row_of = {trace_id: row_id for row_id, trace_id in turns.items()}
    for record in sent:
        trace_id = record.trace_id.hex()
        assert record.span_id.hex() == traces.roots[trace_id]  # the turn's root span
        got = attrs(record)
        metric = got[NAME]
        assert got[SCORE_VALUE] == scores[row_of[trace_id]][metric]
    assert {r.trace_id.hex() for r in sent} == set(turns.values())
    table = pd.read_parquet(phoenix_file)
    faithful = table[table["name"] == "faithfulness"]
    assert dict(zip(faithful["span_id"], faithful["score"], strict=True)) == {
        traces.roots[trace_id]: scores[row_id]["faithfulness"] for row_id, trace_id in turns.items()
    }
    # A trace that came late, before A's first turn: extracted again, A's turns move one
    # place on, so A#2 and A#4 are other turns. Their results name the traces they judged:
    # their events are not put on the wrong traces, and the note names them.
    traces.turn(-5, "Hello?", "Hi.", "A")
    again = tmp_path / "again.jsonl"
    done = run("traces", "extract", traces.write(tmp_path / "t2.jsonl"), "-o", again, "--sessions")
    assert done.returncode == 0, done.stderr
    moved = tmp_path / "moved.jsonl"
    done = run("traces", "export", tmp_path / "out", "--rows", again, "--otlp-json", moved)
    assert done.returncode == 0, done.stderr
    assert "wrote 4 evaluation events (2 rows, 2 metrics)" in done.stdout
    assert "2 result rows named another trace than their row of the same id" in done.stderr
    assert "A#2, A#4" in done.stderr
    sent = [r for line in moved.read_text().splitlines() for r in records(as_protobuf(line))]
    assert {r.trace_id.hex() for r in sent} == {turns["B#2"], turns["B#4"]}


# --- ids that repeat: a score must never reach another row's trace -------------------------


def judge_rows(records: list[dict], tmp_path: Path, server: FakeLLMServer) -> tuple[Path, Path]:
    """`judge eval` (faithfulness) of these records, written as a rows file: the rows file
    and the run's --out folder."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    done = run(
        "eval", rows, "--model", "openai/judge", "--api-base", server.base_url, "--api-key",
        "k", "--cache", tmp_path / "c.sqlite", "--out", tmp_path / "out", "--metrics",
        "faithfulness", "--no-progress", "--no-record",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return rows, tmp_path / "out"


def test_rows_of_one_id_on_different_traces_are_refused_not_sent_to_one_trace(
    tmp_path, fake_llm_server: FakeLLMServer
):
    """Two rows named `r1` on traces 1 and 2: the last one's trace used to take both rows'
    scores (trace 1 got none, trace 2 got trace 1's). A score finds its trace by its row's
    id, so such a file is refused, before anything is written."""
    fake_llm_server.chat = judge_handler
    records = [trace_row(1), trace_row(2), trace_row(3)]
    records[1]["id"] = records[0]["id"] = "r1"
    rows, out = judge_rows(records, tmp_path, fake_llm_server)
    events = tmp_path / "events.jsonl"
    message = cli_error(str(out), "--rows", str(rows), "--otlp-json", str(events))
    assert message.startswith(
        f"--rows {rows}: rows 0 and 1 have the same id 'r1' but different traces: a score "
        "finds its trace by its row's id; give each row its own id"
    )
    assert not events.exists()
    # In Python, the rows passed are named as Python names them.
    with pytest.raises(InputFormatError) as caught:
        evaluation_events(read_results(out), read_rows(rows))
    assert str(caught.value).startswith("rows[0] and rows[1] have the same id 'r1' but different")


def test_rows_of_one_id_on_the_same_span_each_send_their_scores_there(
    tmp_path, capsys, fake_llm_server: FakeLLMServer
):
    """The same row twice (the same trace and span): both are that span's, nothing to
    mistake; each result row's events go to it, and each row is counted."""
    fake_llm_server.chat = judge_handler
    twice = trace_row(1)
    records = [twice, {**twice, "question": "Who made Python?"}, trace_row(2)]
    rows, out = judge_rows(records, tmp_path, fake_llm_server)
    events = tmp_path / "events.jsonl"
    assert export(str(out), "--rows", str(rows), "--otlp-json", str(events)) == 0
    assert "wrote 3 evaluation events (3 rows, 1 metric)" in capsys.readouterr().out
    sent = [r for line in events.read_text().splitlines() for r in records_of(line)]
    spans = [(r.trace_id.hex(), r.span_id.hex()) for r in sent]
    assert sorted(spans) == sorted((r["trace_id"], r["span_id"]) for r in records)


def records_of(line: str) -> list[LogRecord]:
    return records(as_protobuf(line))


def test_a_row_without_id_known_by_its_number_cannot_take_the_row_of_that_id(tmp_path):
    """A row without an id goes by its number, as `judge eval` numbers it: row 1 without an
    id and row 0 whose id is "1" would share a trace link, so they are refused."""
    a, b = f"{0xA:032x}", f"{0xB:032x}"
    rows = [{"id": "1", "trace_id": a, "span_id": "a" * 16}, {"trace_id": b, "span_id": "b" * 16}]
    rows[0]["turn"] = rows[1]["turn"] = 3  # a column of the rows, not a conversation's turn
    results = [
        ResultRow(row=0, id="1", scores={"faithfulness": 1.0}),
        ResultRow(row=1, id=None, scores={"faithfulness": 0.0}),
    ]
    with pytest.raises(InputFormatError) as caught:
        evaluation_events(results, rows)
    assert str(caught.value).startswith(
        "rows[0] and rows[1] have the same id '1' (rows[1] has none: it goes by its number, "
        "as judge eval numbers rows) but different traces"
    )
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    from judge.traces.export import trace_links

    with pytest.raises(InputFormatError, match=r"rows\.jsonl: rows 0 and 1 have the same id '1' "):
        trace_links(read_rows(path), path=str(path))


def test_conversations_of_one_id_send_only_the_judged_ones_scores(
    tmp_path, fake_llm_server: FakeLLMServer
):
    """Two conversations named `c1`: their turns were both `c1#2`, on two traces, and one
    turn's scores went out while the other was left out with a note blaming a file
    extracted again. judge eval now judges the first and makes the second an error row:
    the first's scores go to its own trace, nothing to the second's."""
    fake_llm_server.chat = judge_handler

    def chat(i: int) -> dict:
        row = trace_row(i)
        turn = {"role": "assistant", "content": row["answer"], "contexts": row["contexts"]}
        turn |= {"trace_id": row["trace_id"], "span_id": row["span_id"]}
        return {"id": "c1", "turns": [{"role": "user", "content": row["question"]}, turn]}

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(c) + "\n" for c in (chat(1), chat(2))), encoding="utf-8")
    done = run(
        "eval", rows, "--model", "openai/judge", "--api-base", fake_llm_server.base_url,
        "--api-key", "k", "--cache", tmp_path / "c.sqlite", "--out", tmp_path / "out",
        "--metrics", "faithfulness", "--no-progress", "--no-record", "--max-error-rate", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = evaluation_events(read_results(tmp_path / "out"), read_rows(rows))
    assert {(e.row_id, e.trace_id) for e in events} == {("c1#2", trace_row(1)["trace_id"])}


def test_an_id_repeated_in_python_names_the_rows_as_python_indexes_them():
    """Through the Python API: the rows given are `rows[i]`; one trace with two spans is
    "different spans"; two conversations of one id name their turn; unreadable
    conversations of one id (no trace: nothing to send) are let be."""
    trace = "ab" * 16
    spans = [{"id": "r", "trace_id": trace, "span_id": s * 16} for s in "ab"]
    with pytest.raises(InputFormatError) as caught:
        evaluation_events([], spans)
    assert str(caught.value) == (
        "rows[0] and rows[1] have the same id 'r' but different spans: a score finds its "
        "trace by its row's id; give each row its own id (an id column) and evaluate again"
    )

    def chat(trace_id: str) -> dict:
        return {
            "id": "c",
            "turns": [
                {"role": "user", "content": "Q"},
                {"role": "assistant", "content": "A", "trace_id": trace_id},
            ],
        }

    from judge.traces.export import trace_links

    # Two conversations of one id: the first's turn links (judge eval judges it only).
    links = trace_links([chat("ab" * 16), chat("cd" * 16)])
    assert links == {"c#2": TraceLink("ab" * 16, None), "c": None}  # (c: the error row's)

    unreadable = {"id": "c", "turns": "not a list"}
    assert trace_links([chat("ab" * 16), chat("ab" * 16), unreadable, unreadable]) == {
        "c#2": TraceLink("ab" * 16, None),
        "c": None,
    }
