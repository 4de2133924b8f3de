"""`judge monitor` when its state or its inputs misbehave while it runs: a state locked by
another process past the busy timeout, a window whose scores the drop test refuses. The
monitor says so and goes on; it never sits up (the receiver answering) while its loops
are dead."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judge.llm.config import LLM
from judge.monitor import state as state_module
from judge.monitor.monitor import MonitorConfig
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.monitor import (
    good_answer,
    rag_traces,
    serving,
    state_counts,
    traces_file,
    wait_for,
)
from tests.helpers.rag_spans import KIND


def test_a_state_locked_for_a_while_stops_nothing_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another process holds the state's write lock past the busy timeout (a backup, a
    second monitor started by mistake, sqlite3 in a shell): the monitor's passes fail
    while it lasts. The pass loop died of the first failure, so a monitor still up,
    answering /healthz and taking spans, never completed a trace again."""
    monkeypatch.setattr(state_module, "_BUSY_SECONDS", 0.2)
    watch = tmp_path / "otel"
    watch.mkdir()
    with FakeLLMServer(heuristic_judge) as server:
        config = MonitorConfig(
            state=tmp_path / "state",
            llm=LLM(model="openai/fake-model", api_base=server.base_url, api_key="x"),
            metrics=["faithfulness"],
            cache=str(tmp_path / "cache.sqlite"),
            window="100",
            linger=0,
        )
        with serving(config, watch=watch, poll=0.05):
            other = sqlite3.connect(tmp_path / "state" / "monitor.sqlite", isolation_level=None)
            other.execute("BEGIN IMMEDIATE")  # the write lock, held
            traces_file(watch / "a.json", lambda p: rag_traces(p, 3))
            wait_for(lambda: "cannot be written" in capsys.readouterr().err, 30)
            other.execute("COMMIT")
            other.close()
            wait_for(lambda: state_counts(tmp_path / "state").get("judged") == 3, 30)


def test_a_loop_that_breaks_stops_the_monitor_instead_of_leaving_it_half_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An error no retry mends (a bug): the monitor stops with it, as a process that exits
    # can be restarted by its supervisor; it sat up with its pass loop dead.
    import asyncio
    import threading

    from judge.monitor.monitor import Monitor

    def broken(self: Monitor, folder: Path) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(Monitor, "_read_folder", broken)
    (tmp_path / "otel").mkdir()
    monitor = Monitor(MonitorConfig(state=tmp_path / "state", metrics=["ndcg@10"]))
    raised: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(monitor.aserve(host=None, watch=tmp_path / "otel", poll=0.05))
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    thread.join(30)
    alive = thread.is_alive()
    if alive:
        monitor.request_stop()
        thread.join(30)
    monitor.close()
    assert not alive, "the monitor stayed up with its pass loop dead"
    assert [str(e) for e in raised] == ["boom"]


def test_a_score_outside_0_1_leaves_its_metric_unchecked_and_windows_closing(
    tmp_path: Path,
) -> None:
    """A custom metric's scorer may return any number (a 1-5 rating not scaled): the drop
    test takes [0, 1]. A window after the baseline with such a score made every closing
    fail: no window closed again (--once failed at each run, exit 2), for every metric."""
    import json as json_module

    from pydantic import BaseModel

    from judge.metrics.custom import judged_metric
    from judge.monitor.monitor import Monitor

    class Rated(BaseModel):
        rating: int

    rating = judged_metric(
        "rating",
        prompt="<<<system>>>\nRate the answer.\n<<<user>>>\n{{answer}}",
        output=Rated,
        score=lambda r: float(r.rating),  # 1 for a good answer, 5 for a bad one
    )

    def rate(body: dict[str, object]) -> str:
        bad = "green cheese" in json_module.dumps(body)
        return json_module.dumps({"rating": 5 if bad else 1})

    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 30, bad_from=20))
    with FakeLLMServer(chat=rate) as server:
        monitor = Monitor(
            MonitorConfig(
                state=tmp_path / "state",
                llm=LLM(model="openai/fake-model", api_base=server.base_url, api_key="x"),
                metrics=[rating],
                window="10",
                baseline_windows=1,
                progress=False,
            )
        )
        try:
            report = monitor.once(tmp_path / "otel")
        finally:
            monitor.close()
    assert [w["number"] for w in report.windows] == [0, 1, 2]
    assert report.windows[2]["metrics"]["rating"]["mean"] == 5.0
    assert report.alerts == []
    [note] = report.notes
    assert note.startswith("rating is not checked for drops: ")
    assert "has a score of 5.0, outside [0, 1]" in note


@pytest.mark.parametrize(
    ("flag", "given", "said"),
    [
        ("--linger", "nan", "--linger nan: give seconds, 0 or more"),
        ("--linger", "-1", "--linger -1: give seconds, 0 or more"),
        ("--late", "nan", "--late nan: give seconds, 0 or more"),
        ("--late", "inf", "--late inf: give seconds, 0 or more"),
        ("--late", "-1", "--late -1: give seconds, 0 or more"),
        ("--sample-rate", "nan", "--sample-rate nan: give a share from 0 to 1"),
        ("--sample-rate", "1.5", "--sample-rate 1.5: give a share from 0 to 1"),
        ("--batch", "0", "--batch 0: give 1 or more"),
        ("--queue", "0", "--queue 0: give 1 or more"),
        ("--baseline-windows", "0", "--baseline-windows 0: give 1 or more"),
    ],
)
def test_the_monitor_s_numbers_are_refused_in_the_flags_words(
    tmp_path: Path, flag: str, given: str, said: str
) -> None:
    """A linger of NaN was taken (no trace would ever be complete: NaN compares with
    nothing), and the numbers refused were said as Python's keywords (`linger=-1.0`)."""
    from tests.helpers.cli import run

    done = run("monitor", "--once", "--state", tmp_path / "s", "--metrics", "ndcg@10", flag, given)
    assert done.returncode == 2, done.stderr
    assert f"judge: error: {said}" in done.stderr
    assert not (tmp_path / "s").exists()


def test_a_linger_of_nan_is_refused_in_python(tmp_path: Path) -> None:
    from judge.errors import JudgeError

    with pytest.raises(JudgeError, match=r"linger=nan: give seconds, 0 or more"):
        MonitorConfig(state=tmp_path, linger=float("nan"))


@pytest.mark.parametrize("late", [float("nan"), float("inf"), -1.0])
def test_a_late_bound_that_could_hold_a_window_forever_is_refused(
    tmp_path: Path, late: float
) -> None:
    from judge.errors import JudgeError

    with pytest.raises(JudgeError, match=rf"late={late}: give seconds, 0 or more"):
        MonitorConfig(state=tmp_path, late=late)


def test_a_state_of_format_3_with_an_open_trace_is_migrated_and_the_trace_counted(
    tmp_path: Path,
) -> None:
    """A state written before open traces had start times (format 3): migrated to format
    4, its open trace (start time unknown: it holds no window) is completed, judged and
    counted in its window, not as late."""
    from judge.cache.migrations import apply_in_order
    from judge.monitor.migrations import MIGRATIONS, SCHEMA_VERSION
    from judge.monitor.monitor import Monitor
    from judge.monitor.state import span_json
    from judge.traces.otlp import spans_of_protobuf
    from tests.helpers.traces import export

    folder = tmp_path / "state"
    folder.mkdir()
    db = sqlite3.connect(folder / "monitor.sqlite", isolation_level=None)
    apply_in_order(db, MIGRATIONS[:3])
    spans = [s for body in export(lambda p: rag_traces(p, 1)) for s in spans_of_protobuf(body)]
    trace_id = spans[0].trace_id
    db.execute("INSERT INTO open_traces VALUES (?, 1.0, 1.0, 1.0)", (trace_id,))
    db.executemany(
        "INSERT INTO spans VALUES (?, ?, ?)", [(trace_id, s.span_id, span_json(s)) for s in spans]
    )
    db.close()
    with FakeLLMServer(heuristic_judge) as server:
        monitor = Monitor(
            MonitorConfig(
                state=folder,
                llm=LLM(model="openai/fake-model", api_base=server.base_url, api_key="x"),
                metrics=["faithfulness"],
                progress=False,
            )
        )
        try:
            report = monitor.once()
            assert monitor.state.read("PRAGMA user_version") == [(SCHEMA_VERSION,)]
        finally:
            monitor.close()
    assert SCHEMA_VERSION >= 4  # format 4 brought start_ns; the later ones keep it
    assert report.counts["judged"] == 1 and "late" not in report.counts
    assert [w["rows"] for w in report.windows] == [1]


def test_traces_received_before_the_clock_went_back_are_not_held_for_the_jump(
    tmp_path: Path,
) -> None:
    """The monitor's clock stepped back an hour (a VM restored, NTP correcting): traces
    received before the step carry receipt times an hour "ahead" of the clock. They waited
    the hour out (`--linger` is 30 s), then came after the traffic that followed them."""
    import time

    from judge.monitor.state import PENDING, Completed, MonitorState
    from judge.traces.otlp import spans_of_protobuf
    from tests.helpers.traces import export

    bodies = export(lambda p: rag_traces(p, 2), batch=4)
    state = MonitorState(tmp_path / "state")
    try:
        now = time.time()
        state.ingest([spans_of_protobuf(b) for b in bodies], now + 3600)  # before the step
        done = state.complete(now + 1, 30.0, lambda db, trace_id, row: Completed(PENDING))
        assert done == 0  # received a second ago: within --linger, still open
        done = state.complete(now + 31, 30.0, lambda db, trace_id, row: Completed(PENDING))
        assert done == 2
    finally:
        state.close()


def test_a_listen_port_taken_is_said_with_the_flag(tmp_path: Path) -> None:
    import socket

    from tests.helpers.cli import run

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(
            "monitor", "--listen", f"127.0.0.1:{port}", "--state", tmp_path / "s",
            "--metrics", "ndcg@10",
        )  # fmt: skip
    assert done.returncode == 2
    assert f"judge: error: --listen 127.0.0.1:{port}: cannot listen (" in done.stderr
    assert "give a free port" in done.stderr


def test_an_ipv6_listen_address_is_said_as_a_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "http://::1:4318/v1/traces" is no URL: an IPv6 host goes in brackets.
    import asyncio

    from judge.monitor.monitor import Monitor

    if not socket_has_ipv6_loopback():
        pytest.skip("no IPv6 loopback here")
    monitor = Monitor(MonitorConfig(state=tmp_path / "s", metrics=["ndcg@10"]))
    try:
        asyncio.run(monitor.aserve(host="::1", port=0, on_ready=lambda _: monitor.request_stop()))
    finally:
        monitor.close()
    assert "monitor listening on http://[::1]:" in capsys.readouterr().err


def socket_has_ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_a_state_damaged_inside_says_what_to_do(tmp_path: Path) -> None:
    """A state whose header is sound but a page is not (a disk fault, a copy cut short)
    opens, then fails at its first query: that said only "cannot be read (database disk
    image is malformed)"; it says what to do, as a state that does not open does."""
    from tests.helpers.cli import run

    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 30))
    args = ["monitor", "--once", "--state", tmp_path / "s", "--metrics", "ndcg@10", "--quiet"]
    done = run(*args, "--watch", tmp_path / "otel")
    assert done.returncode == 0, done.stderr
    path = tmp_path / "s" / "monitor.sqlite"
    data = bytearray(path.read_bytes())
    assert len(data) > 3 * 4096
    data[4096 : 2 * 4096] = bytes(4096)  # a page of the tables zeroed
    path.write_bytes(bytes(data))
    done = run(*args)
    assert done.returncode == 2, done.stderr
    assert "malformed" in done.stderr
    assert "move it away and a new one is started" in done.stderr


def test_a_state_locked_says_who_may_hold_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judge.monitor.state import MonitorState, MonitorStateError

    monkeypatch.setattr(state_module, "_BUSY_SECONDS", 0.1)
    state = MonitorState(tmp_path / "s")
    other = sqlite3.connect(tmp_path / "s" / "monitor.sqlite", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(MonitorStateError) as error, state.writing():
            pass
    finally:
        other.close()
        state.close()
    assert "database is locked" in str(error.value)
    assert "another process" in str(error.value) and "one monitor per --state" in str(error.value)


def _slow_trace(provider: Any, start: int, n: int) -> tuple[Callable[[], None], Any]:
    """A RAG trace (number n) started at `start` (ns): its retriever span is exported now,
    its root when the returned function is called. Returns (end the root, the root)."""
    from opentelemetry.trace import set_span_in_context

    tracer = provider.get_tracer("tests.monitor")
    root = tracer.start_span("RAG", start_time=start)
    root.set_attribute(KIND, "CHAIN")
    root.set_attribute("input.value", f"How long is river {n}?")
    child = tracer.start_span("retrieve", context=set_span_in_context(root), start_time=start)
    child.set_attribute(KIND, "RETRIEVER")
    prefix = "retrieval.documents.0.document"
    child.set_attribute(f"{prefix}.id", f"r{n}")
    child.set_attribute(f"{prefix}.content", f"Document {n} says river {n} is {n * 100} km long.")
    child.end(end_time=start + 10**6)

    def finish() -> None:
        root.set_attribute("output.value", good_answer(n))
        root.end()

    return finish, root


def _provider(base: str) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{base}/v1/traces")))
    return provider


def _windows(folder: Path) -> dict[int, dict[str, Any]]:
    """The closed windows' summaries by number, read as another process reads them."""
    from judge.monitor.state import MonitorState

    state = MonitorState(folder, create=False)
    try:
        return {int(n): json.loads(s) for n, s in state.read("SELECT number, summary FROM windows")}
    finally:
        state.close()


def _sleep_until(ns: int) -> None:
    time.sleep(max(0.0, (ns - time.time_ns()) / 1e9))


def test_a_slow_trace_at_a_window_s_end_is_counted_in_a_window(tmp_path: Path) -> None:
    """A trace that began just before its time window's end and completed after the
    window's --linger grace: the window closed at end + linger without it, and its row,
    judged, was counted in no window, silently. An open trace that started inside a
    window now holds it (up to --late)."""
    seconds = 4 * 10**9
    with FakeLLMServer(heuristic_judge) as server:
        config = MonitorConfig(
            state=tmp_path / "state",
            llm=LLM(model="openai/fake-model", api_base=server.base_url, api_key="x"),
            metrics=["faithfulness"],
            window="4s",
            linger=3,
            progress=False,
        )
        with serving(config, poll=0.05) as (_, base):
            number = time.time_ns() // seconds + 1  # the next window, whole
            _sleep_until(number * seconds)
            provider = _provider(base)
            rag_traces(provider, 1, start=number * seconds + 10**8)  # at the window's start
            end = (number + 1) * seconds
            _sleep_until(end - 10**9 // 2)
            # its retriever's span half a second before the window's end, its root 1.5 s
            # later: complete at end + 4 s, after the grace (end + 3 s)
            finish, _ = _slow_trace(provider, end - 10**9 // 2, 1)
            _sleep_until(end + 10**9)
            finish()
            provider.shutdown()
            wait_for(lambda: number in _windows(tmp_path / "state"), 30)
            counts = state_counts(tmp_path / "state")
    window = _windows(tmp_path / "state")[number]
    assert counts == {"judged": 2}
    assert window["rows"] == 2 and "open_at_close" not in window


def test_a_trace_that_never_completes_holds_its_window_no_longer_than_late(
    tmp_path: Path,
) -> None:
    """A trace whose spans keep coming (it never completes) holds the window it started in
    until --late after the window's end, not forever; its row, judged once it completes,
    is counted as late with its reason and its window, and in no window's figures."""
    seconds = 4 * 10**9
    folder = tmp_path / "state"
    with FakeLLMServer(heuristic_judge) as server:
        config = MonitorConfig(
            state=folder,
            llm=LLM(model="openai/fake-model", api_base=server.base_url, api_key="x"),
            metrics=["faithfulness"],
            window="4s",
            linger=1,
            late=2,
            progress=False,
        )
        with serving(config, poll=0.05) as (monitor, base):
            number = time.time_ns() // seconds + 1
            _sleep_until(number * seconds)
            provider = _provider(base)
            rag_traces(provider, 1, start=number * seconds + 10**8)
            finish, root = _slow_trace(provider, number * seconds + 5 * 10**8, 1)
            tracer = provider.get_tracer("tests.monitor")
            end = (number + 1) * seconds
            trickled = 0
            from opentelemetry.trace import set_span_in_context

            # a span of it every 0.3 s (within --linger): it stays open
            while number not in _windows(folder):
                assert time.time_ns() < end + 20 * 10**9, "the window never closed"
                span = tracer.start_span("step", context=set_span_in_context(root))
                span.end()
                trickled += 1
                time.sleep(0.3)
            closed_after = time.time_ns() - end
            finish()
            provider.shutdown()
            wait_for(lambda: state_counts(folder).get("judged") == 2, 30)
            report = monitor.state.counts()
    window = _windows(folder)[number]
    assert 2 * 10**9 <= closed_after < 5 * 10**9  # at --late (2 s) after its end, not later
    assert window["rows"] == 1 and window["open_at_close"] == 1
    assert report["late"] == 1 and report["late:open_at_close"] == 1
    db = sqlite3.connect(folder / "monitor.sqlite")
    try:
        late = db.execute("SELECT window, late FROM traces WHERE late IS NOT NULL").fetchall()
    finally:
        db.close()
    assert late == [(number, "open_at_close")]


def test_a_trace_of_a_window_closed_by_an_earlier_once_is_counted_as_late(
    tmp_path: Path,
) -> None:
    """Cron with --once: a trace of a window an earlier pass closed is judged and counted
    as late (after_close), said in the report and the metrics; the window's figures stay
    as closed."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from judge.monitor.monitor import Monitor

    otel = tmp_path / "otel"
    otel.mkdir()
    with FakeLLMServer(heuristic_judge) as server:
        config = MonitorConfig(
            state=tmp_path / "state",
            llm=LLM(model="openai/fake-model", api_base=server.base_url, api_key="x"),
            metrics=["faithfulness"],
            window="1h",
            progress=False,
        )
        traces_file(otel / "a.json", lambda p: rag_traces(p, 2))
        monitor = Monitor(config)
        try:
            first = monitor.once(otel)
        finally:
            monitor.close()
        traces_file(otel / "b.json", lambda p: rag_traces(p, 1, first=2))
        monitor = Monitor(config)
        try:
            second = monitor.once(otel)
            scraped = generate_latest(monitor.registry).decode()
        finally:
            monitor.close()
    assert [w["rows"] for w in first.windows] == [2] and second.windows == []
    assert second.counts["judged"] == 3
    assert second.counts["late"] == 1 and second.counts["late:after_close"] == 1
    assert "1 late rows (after their window closed, in no window's figures: 1 after_close)" in (
        second.lines()
    )
    assert _windows(tmp_path / "state")[first.windows[0]["number"]]["rows"] == 2
    late = {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
        if sample.name == "judge_monitor_traces_late_total"
    }
    assert late == {(("reason", "after_close"),): 1.0, (("reason", "open_at_close"),): 0.0}


def test_a_kept_span_that_does_not_read_back_is_a_damaged_state(tmp_path: Path) -> None:
    """A span kept in the state whose protobuf bytes (or JSON) no longer decode (a disk
    fault inside a row, an edit) stopped the monitor with protobuf's DecodeError as an
    internal error, at every restart: it is a damaged state, said with what to do."""
    from judge.monitor.state import MonitorState
    from tests.helpers.cli import run

    for data in (b"\xff\xff\xff", "[1, 2"):
        folder = tmp_path / type(data).__name__
        state = MonitorState(folder)
        try:
            with state.writing() as db:
                db.execute("INSERT INTO spans VALUES (?, ?, ?)", ("ab" * 16, "cd" * 8, data))
                db.execute(
                    "INSERT INTO open_traces (trace_id, first_at, last_at, root_at)"
                    " VALUES (?, 0, 0, 0)",
                    ("ab" * 16,),
                )
        finally:
            state.close()
        done = run("monitor", "--once", "--state", folder, "--metrics", "ndcg@10", "--quiet")
        assert done.returncode == 2, done.stderr
        assert "internal error" not in done.stderr
        assert f"trace {'ab' * 16}" in done.stderr
        assert "move it away and a new one is started" in done.stderr


def test_a_followed_file_whose_name_is_not_utf_8_is_read(tmp_path: Path) -> None:
    """A file of --watch whose name is no UTF-8 (Python's surrogate escapes) could not be
    recorded as read: the monitor stopped with an internal error, at every restart."""
    import json
    import os

    from tests.helpers.cli import run
    from tests.helpers.traces import rag_request

    (tmp_path / "otel").mkdir()
    name = os.path.join(os.fsencode(tmp_path / "otel"), b"traces-\xff.jsonl")
    with open(name, "wb") as handle:
        handle.write(json.dumps(rag_request(1)).encode() + b"\n")
    args = ["monitor", "--once", "--state", tmp_path / "s", "--metrics", "ndcg@10"]
    done = run(*args, "--watch", tmp_path / "otel")
    assert done.returncode == 0, done.stderr
    assert state_counts(tmp_path / "s") == {"judged": 1}


def test_a_watched_protobuf_file_s_spans_of_all_zero_ids_are_refused(tmp_path: Path) -> None:
    """A protobuf file in --watch is held to OTLP's valid ids as a JSON line is: a span of
    trace id 000...0 is refused (counted), not kept as a trace every such span joins."""
    import base64

    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from judge.monitor.state import MonitorState
    from tests.helpers.cli import run
    from tests.helpers.traces import rag_request

    (tmp_path / "otel").mkdir()
    for name, request in (
        ("good.pb", rag_request(1)),
        ("zeros.pb", rag_request(2, trace_id="0" * 32)),
    ):
        for span in request["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            for key in ("traceId", "spanId", "parentSpanId"):
                if span.get(key):  # protobuf's JSON mapping writes bytes in base64
                    span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
        message = json_format.ParseDict(request, ExportTraceServiceRequest())
        (tmp_path / "otel" / name).write_bytes(message.SerializeToString())
    args = ["monitor", "--once", "--state", tmp_path / "s", "--metrics", "ndcg@10"]
    done = run(*args, "--watch", tmp_path / "otel")
    assert done.returncode == 0, done.stderr
    assert state_counts(tmp_path / "s") == {"judged": 1}
    state = MonitorState(tmp_path / "s")
    try:
        assert (state.counts()["spans"], state.counts()["rejected_spans"]) == (2, 2)
    finally:
        state.close()
