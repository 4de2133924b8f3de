"""`judge monitor --listen`'s OTLP/HTTP receiver, fed by the real OpenTelemetry SDK's
OTLP/HTTP exporter (protobuf, gzip) and by raw bodies: JSON, partial success, bad bodies,
a full queue, the bearer token, and the health endpoint."""

from __future__ import annotations

import base64
import gzip
import json
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from judge.llm.config import LLM
from judge.monitor.monitor import MonitorConfig
from judge.monitor.state import MonitorState
from judge.testing import FakeLLMServer, heuristic_judge
from judge.traces.extract import read_rows
from tests.helpers.monitor import (
    no_retriever_trace,
    post,
    rag_traces,
    serving,
    state_counts,
    wait_for,
)
from tests.helpers.traces import receiver, write_json_lines

SPAN = {
    "traceId": "0af7651916cd43dd8448eb211c80319c",
    "spanId": "b7ad6b7169203331",
    "name": "RAG",
    "startTimeUnixNano": "1796000400000000000",
    "endTimeUnixNano": "1796000400100000000",
    "attributes": [{"key": "input.value", "value": {"stringValue": "Hello?"}}],
}


def request_of(*spans: dict) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}).encode()


def config(tmp_path: Path, **options) -> MonitorConfig:
    # A trace's spans come in several requests: a second for the rest after its first.
    options = {"linger": 1.0, **options}
    return MonitorConfig(state=tmp_path / "state", progress=False, **options)


def test_the_sdk_exporter_sends_to_the_receiver_and_rows_are_extract_s(tmp_path: Path) -> None:
    with FakeLLMServer(heuristic_judge) as judge:
        llm = LLM(model="openai/fake-model", api_base=judge.base_url, api_key="x")
        options = {"llm": llm, "metrics": ["faithfulness"], "cache": str(tmp_path / "c.sqlite")}
        with (
            serving(config(tmp_path, **options), poll=0.05) as (_monitor, base),
            receiver() as (copy_url, bodies),
        ):
            provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
            for exporter in (
                OTLPSpanExporter(endpoint=f"{base}/v1/traces", compression=Compression.Gzip),
                OTLPSpanExporter(endpoint=copy_url),  # the same spans, to compare with
            ):
                provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=3))
            ids = rag_traces(provider, 5, bad_from=3)
            skipped = no_retriever_trace(provider)
            provider.shutdown()
            wait_for(lambda: state_counts(tmp_path / "state").get("judged") == 5)
            health = json.loads(
                __import__("urllib.request").request.urlopen(f"{base}/healthz").read()
            )
        assert health["status"] == "ok"
        assert health["counts"]["spans"] == 11
    db = sqlite3.connect(tmp_path / "state" / "monitor.sqlite")
    stored = {
        t: (s, r, json.loads(row) if row else None, json.loads(sc) if sc else None)
        for t, s, r, row, sc in db.execute(
            "SELECT trace_id, status, reason, row, scores FROM traces"
        )
    }
    # The rows are those `judge traces extract` makes of the same spans in a file.
    skips: list = []
    expected = {
        r["trace_id"]: r
        for r in read_rows(write_json_lines(bodies, tmp_path / "copy.jsonl"), on_skip=skips.append)
    }
    assert {t: v[2] for t, v in stored.items() if v[0] == "judged"} == expected
    assert stored[skipped][:2] == ("skipped", "no_retriever")
    assert [s.reason for s in skips] == ["no_retriever"]
    assert [stored[t][3]["faithfulness"] for t in ids] == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_json_bodies_partial_success_and_bad_bodies(tmp_path: Path) -> None:
    with serving(config(tmp_path), poll=0.05) as (_monitor, base):
        url = f"{base}/v1/traces"
        bad_id = dict(SPAN, spanId="b7ad", traceId="1af7651916cd43dd8448eb211c80319c")
        status, headers, body = post(url, request_of(SPAN, bad_id), "application/json")
        assert status == 200
        answer = json.loads(body)
        assert answer["partialSuccess"]["rejectedSpans"] == 1
        assert "spanId" in answer["partialSuccess"]["errorMessage"]
        # All accepted, protobuf: an empty ExportTraceServiceResponse.
        status, headers, body = post(
            url,
            gzip.compress(request_of(dict(SPAN, spanId="c7ad6b7169203331"))),
            "application/json",
            {"Content-Encoding": "gzip"},
        )
        assert (status, json.loads(body)) == (200, {})
        status, headers, body = post(url, b"\x0a\x05nope", "application/x-protobuf")
        assert status == 400
        assert headers["Content-Type"].startswith("application/x-protobuf")
        for content, kind, extra in (
            (b"{not json", "application/json", {}),
            (b'{"resourceSpans": 3}', "application/json", {}),
            (b"\x1f\x8b not gzip at all", "application/json", {"Content-Encoding": "gzip"}),
        ):
            status, headers, body = post(url, content, kind, extra)
            assert status == 400, content
            assert json.loads(body)["code"] == 3
        assert post(url, request_of(SPAN), "text/plain")[0] == 415
        good = request_of(SPAN)
        message = ExportTraceServiceResponse()
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        proto = json_format.ParseDict(
            collector_json_back(good), ExportTraceServiceRequest()
        ).SerializeToString()
        status, headers, body = post(url, proto, "application/x-protobuf")
        assert status == 200
        message.ParseFromString(body)
        assert not message.HasField("partial_success")
        wait_for(lambda: state_counts(tmp_path / "state") == {"skipped": 1})
    counts = MonitorState(tmp_path / "state").counts()
    # One trace of two spans, the first received twice (a retry): kept once.
    assert (counts["spans"], counts["duplicate_spans"], counts["rejected_spans"]) == (3, 1, 1)
    assert counts["skipped:no_output"] == 1  # as judge traces extract says it


def collector_json_back(body: bytes) -> dict:
    """A hex-id OTLP/JSON request in protobuf's JSON mapping (base64 ids)."""
    import base64

    data = json.loads(body)
    for resource in data["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId"):
                    span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return data


def test_a_bearer_token_is_required_and_health_stays_open(tmp_path: Path) -> None:
    with serving(config(tmp_path), poll=0.05, token="s3cret") as (_monitor, base):
        url = f"{base}/v1/traces"
        status, headers, _ = post(url, request_of(SPAN), "application/json")
        assert status == 401
        assert headers["WWW-Authenticate"].startswith("Bearer")
        wrong = {"Authorization": "Bearer guess"}
        assert post(url, request_of(SPAN), "application/json", wrong)[0] == 401
        right = {"Authorization": "Bearer s3cret"}
        assert post(url, request_of(SPAN), "application/json", right)[0] == 200
        with urllib.request.urlopen(f"{base}/healthz", timeout=30) as response:
            assert response.status == 200
            assert json.loads(response.read())["counts"]["spans"] == 1


def test_a_full_queue_is_answered_503_with_retry_after(tmp_path: Path) -> None:
    with serving(config(tmp_path, queue=1), poll=0.05) as (monitor, base):
        url = f"{base}/v1/traces"
        post(url, request_of(SPAN), "application/json")  # the state exists, tables made
        # Another process holds the state's write lock: what is received waits in the queue.
        blocker = sqlite3.connect(tmp_path / "state" / "monitor.sqlite", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        answers: dict[int, int] = {}

        def send(n: int) -> None:
            span = dict(SPAN, spanId=f"{n:016x}")
            answers[n] = post(url, request_of(span), "application/json")[0]

        first = threading.Thread(target=send, args=(1,))
        first.start()
        time.sleep(1.0)  # taken from the queue: its commit waits for the lock
        second = threading.Thread(target=send, args=(2,))
        second.start()
        time.sleep(1.0)  # in the queue, which is full
        status, headers, _ = post(
            url, request_of(dict(SPAN, spanId=f"{3:016x}")), "application/json"
        )
        assert status == 503
        assert headers["Retry-After"] == "1"
        blocker.execute("COMMIT")
        blocker.close()
        first.join(30)
        second.join(30)
        assert answers == {1: 200, 2: 200}  # kept, once the lock was free
        wait_for(lambda: monitor.state.counts()["spans"] == 3)


def test_a_format_2_state_s_json_spans_complete_with_protobuf_ones(tmp_path: Path) -> None:
    """Spans kept as JSON by a judge of state format 2, and the rest of their trace received
    as protobuf (kept encoded, format 3), make the row `judge traces extract` makes."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from judge.cache.migrations import apply_in_order
    from judge.monitor.migrations import MIGRATIONS, SCHEMA_VERSION
    from judge.monitor.state import SAMPLED_OUT, Completed, span_json
    from judge.traces.otlp import encoded_spans_of_protobuf, spans_of_json
    from tests.helpers.traces import rag_request

    request = rag_request(0, question="Où est la rivière ?")
    root, child = spans_of_json(request)
    folder = tmp_path / "state"
    folder.mkdir()
    db = sqlite3.connect(folder / "monitor.sqlite", isolation_level=None)
    apply_in_order(db, MIGRATIONS[:2])
    db.execute(
        "INSERT INTO spans (trace_id, span_id, data) VALUES (?, ?, ?)",
        (child.trace_id, child.span_id, span_json(child)),
    )
    db.execute("INSERT INTO open_traces VALUES (?, 0, 0, NULL)", (child.trace_id,))
    db.close()
    as_proto = json.loads(json.dumps(request))
    for span in as_proto["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:  # protobuf's JSON mapping writes bytes in base64
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    body = json_format.ParseDict(as_proto, ExportTraceServiceRequest()).SerializeToString()
    rows = []
    state = MonitorState(folder)
    try:
        assert state.read("PRAGMA user_version") == [(SCHEMA_VERSION,)]
        # The root again, protobuf: the child is a duplicate, kept once.
        rejected: list[str] = []
        state.ingest([encoded_spans_of_protobuf(body, rejected)], 1.0)
        assert rejected == []
        kinds = state.read("SELECT span_id, typeof(data) FROM spans ORDER BY rowid")
        assert kinds == [(child.span_id, "text"), (root.span_id, "blob")]

        def choose(db: sqlite3.Connection, trace_id: str, row: dict) -> Completed:
            rows.append(row)
            return Completed(SAMPLED_OUT)

        assert state.complete(2.0, 0.0, choose, everything=True) == 1
        assert state.counts()["duplicate_spans"] == 1
    finally:
        state.close()
    expected = list(read_rows(write_json_lines([body], tmp_path / "t.jsonl")))
    assert rows == expected and rows[0]["question"] == "Où est la rivière ?"


def test_spans_with_an_empty_or_all_zero_id_are_refused_as_partial_success(
    tmp_path: Path,
) -> None:
    """OTLP's ids are valid with a byte that is not zero: a span of trace id 000...0 (or
    none) is refused, JSON or protobuf, not kept as one trace that every such span joins
    (completed once, the others counted late for good)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    zeros = dict(SPAN, traceId="0" * 32)
    no_trace = dict(SPAN, traceId="", spanId="c7ad6b7169203331")
    no_span = dict(SPAN, spanId="0" * 16)
    with serving(config(tmp_path), poll=0.05) as (_monitor, base):
        url = f"{base}/v1/traces"
        status, _headers, body = post(
            url, request_of(zeros, no_trace, no_span, SPAN), "application/json"
        )
        assert status == 200
        assert json.loads(body)["partialSuccess"]["rejectedSpans"] == 3
        proto = json_format.ParseDict(
            collector_json_back(request_of(zeros, no_span)), ExportTraceServiceRequest()
        ).SerializeToString()
        status, _headers, body = post(url, proto, "application/x-protobuf")
        message = ExportTraceServiceResponse()
        message.ParseFromString(body)
        assert (status, message.partial_success.rejected_spans) == (200, 2)
        wait_for(lambda: state_counts(tmp_path / "state") == {"skipped": 1})
    state = MonitorState(tmp_path / "state")
    try:
        counts = state.counts()
        assert (counts["spans"], counts["rejected_spans"]) == (1, 5)
        assert state.read("SELECT trace_id FROM traces") == [(SPAN["traceId"],)]
    finally:
        state.close()


def test_a_lone_surrogate_in_a_json_request_is_kept_and_skipped_as_extract_skips_it(
    tmp_path: Path,
) -> None:
    """ "\\ud800" is valid JSON: its span failed to be kept (SQLite takes UTF-8 alone), so
    the request, and every request committed with it, was answered 503 and retried for good.
    It is kept, and its trace skipped as `judge traces extract` skips it (not_unicode)."""
    from tests.helpers.traces import rag_request

    with serving(config(tmp_path), poll=0.05) as (_monitor, base):
        url = f"{base}/v1/traces"
        body = json.dumps(rag_request(0, question="How \ud800 long?")).encode()
        assert post(url, body, "application/json")[0] == 200
        wait_for(lambda: state_counts(tmp_path / "state") == {"skipped": 1})
    state = MonitorState(tmp_path / "state")
    try:
        assert state.counts()["skipped:not_unicode"] == 1
    finally:
        state.close()


def test_a_json_span_time_past_otlp_s_fixed64_is_refused_not_a_stopped_monitor(
    tmp_path: Path,
) -> None:
    """A startTimeUnixNano past 2**64 - 1 (OTLP/JSON takes any integer; protobuf's fixed64
    cannot hold it) was kept, and its trace's start time overflowed Python's dates when the
    trace completed: the monitor stopped, at every restart. It is refused as a partial
    success, and the monitor goes on."""
    far = dict(SPAN, startTimeUnixNano="1" + "0" * 25, traceId="1af7651916cd43dd8448eb211c80319c")
    before = dict(SPAN, endTimeUnixNano="-1", traceId="2af7651916cd43dd8448eb211c80319c")
    with serving(config(tmp_path), poll=0.05) as (_monitor, base):
        url = f"{base}/v1/traces"
        status, _headers, body = post(url, request_of(far, before, SPAN), "application/json")
        assert status == 200
        answer = json.loads(body)["partialSuccess"]
        assert answer["rejectedSpans"] == 2 and "not an OTLP time" in answer["errorMessage"]
        wait_for(lambda: state_counts(tmp_path / "state") == {"skipped": 1})
