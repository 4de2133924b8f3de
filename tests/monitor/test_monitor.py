"""`judge monitor` over time: --once over a followed folder through rotation, kill -9 and
SIGTERM and the restart (the fake judge's request count: nothing judged twice), sampling
within a budget stratified over the hour, and windows checked against the baseline."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any, ClassVar

import pytest

from judge.monitor.monitor import Monitor
from judge.monitor.state import MonitorState
from judge.testing import FakeLLMServer, heuristic_judge
from judge.traces.extract import sample_key
from tests.helpers.cli import run
from tests.helpers.monitor import (
    MINUTE,
    PER_ROW,
    free_port,
    good_answer,
    judge_flags,
    no_retriever_trace,
    rag_traces,
    state_counts,
    traces_file,
    wait_for,
)
from tests.helpers.webhook import config


def test_once_follows_a_folder_through_rotation_and_judges_only_what_is_new(
    tmp_path: Path,
) -> None:
    otel = tmp_path / "otel"
    otel.mkdir()
    traces_file(otel / "traces.json", lambda p: [*rag_traces(p, 4), no_retriever_trace(p)])
    with FakeLLMServer(heuristic_judge) as server:
        args = ["monitor", "--once", "--watch", otel, "--state", tmp_path / "state"]
        args += [*judge_flags(server, tmp_path), "--window", "3", "--quiet"]
        done = run(*args)
        assert done.returncode == 0, done.stderr
        assert "4 traces judged" in done.stdout
        assert "1 skipped (1 no_retriever)" in done.stdout
        assert "window 0 (baseline): 3 rows: faithfulness 1.000" in done.stdout
        assert server.count() == 4 * PER_ROW
        # Rotation: the file renamed (read to its end already), a new one started, whose
        # last line is still being written.
        (otel / "traces.json").rename(otel / "traces-2026-12-06T10-00-00.000.json")
        traces_file(otel / "traces.json", lambda p: rag_traces(p, 3, first=10))
        traces_file(tmp_path / "more.json", lambda p: rag_traces(p, 2, first=20))
        partial = (tmp_path / "more.json").read_bytes().rstrip(b"\n")
        with open(otel / "traces.json", "ab") as handle:
            handle.write(partial)
        done = run(*args)
        assert done.returncode == 0, done.stderr
        assert "7 traces judged" in done.stdout
        assert server.count() == 7 * PER_ROW
        with open(otel / "traces.json", "ab") as handle:
            handle.write(b"\n")  # the line is whole: read now
        done = run(*args)
        assert "9 traces judged" in done.stdout
        assert server.count() == 9 * PER_ROW
        done = run(*args)  # nothing new
        assert "9 traces judged" in done.stdout
        assert server.count() == 9 * PER_ROW


def start_listening(
    server: FakeLLMServer, tmp: Path, linger: float = 0.5
) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    command = [sys.executable, "-m", "judge", "monitor", "--listen", f"127.0.0.1:{port}"]
    command += ["--state", str(tmp / "state"), *judge_flags(server, tmp)]
    command += ["--linger", str(linger), "--batch", "2", "--window", "100"]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, OPENAI_API_KEY="x"),
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert process.poll() is None, process.communicate()
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5):
                return True
        except OSError:
            return False

    wait_for(up)
    return process, base


def send(base: str, count: int) -> list[str]:
    """`count` traces exported by the real SDK to the monitor (all acknowledged)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    exporter = OTLPSpanExporter(endpoint=f"{base}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=4))
    ids = rag_traces(provider, count)
    provider.shutdown()
    return ids


def test_kill_9_and_restart_lose_nothing_and_judge_nothing_twice(tmp_path: Path) -> None:
    with FakeLLMServer(heuristic_judge) as server:
        server.latency = 0.15  # slow enough to be killed mid-way
        process, base = start_listening(server, tmp_path)
        try:
            ids = send(base, 10)
            wait_for(lambda: state_counts(tmp_path / "state").get("judged", 0) >= 2)
        finally:
            process.kill()  # SIGKILL: no clean-up at all
            process.wait(30)
        state = MonitorState(tmp_path / "state")
        judged = {t for (t,) in state.read("SELECT trace_id FROM traces WHERE status='judged'")}
        state.close()
        assert 2 <= len(judged) < 10  # killed while judging; every span was acknowledged
        before = len(server.requests)
        server.latency = 0
        done = run(
            "monitor",
            "--once",
            "--state",
            tmp_path / "state",
            *judge_flags(server, tmp_path),
            "--window",
            "100",
        )
        assert done.returncode == 0, done.stderr
        assert state_counts(tmp_path / "state") == {"judged": 10}
        # No request for a row judged before the kill: its judgments are recorded. The rows
        # that were not cost at most their price (less what was cached before the kill;
        # the replies in flight at the kill are asked again).
        again = [json.dumps(r.body) for r in server.requests[before:]]
        answers = {good_answer(n): t for n, t in enumerate(ids)}
        asked = {t for text in again for answer, t in answers.items() if answer in text}
        assert asked and not asked & judged
        assert len(again) <= (10 - len(judged)) * PER_ROW


def test_kill_9_between_receipt_and_completion_keeps_the_encoded_spans(tmp_path: Path) -> None:
    """Spans acknowledged (kept as protobuf bytes) and killed before their traces complete:
    a restart completes and judges each trace once, and nothing is judged again after."""
    with FakeLLMServer(heuristic_judge) as server:
        process, base = start_listening(server, tmp_path, linger=3600)
        try:
            send(base, 6)
        finally:
            process.kill()
            process.wait(30)
        state = MonitorState(tmp_path / "state")
        try:
            assert state.open_traces() == 6
            kinds = {kind for (kind,) in state.read("SELECT typeof(data) FROM spans")}
            assert kinds == {"blob"} and state.judged_count() == 0
        finally:
            state.close()
        assert server.requests == []
        flags = ["--state", tmp_path / "state", *judge_flags(server, tmp_path)]
        for _ in range(2):
            done = run("monitor", "--once", *flags, "--window", "100")
            assert done.returncode == 0, done.stderr
            assert state_counts(tmp_path / "state") == {"judged": 6}
            assert len(server.requests) == 6 * PER_ROW


def test_sigterm_finishes_the_batch_in_hand_and_exits_143(tmp_path: Path) -> None:
    with FakeLLMServer(heuristic_judge) as server:
        server.latency = 0.1
        process, base = start_listening(server, tmp_path)
        try:
            send(base, 6)
            wait_for(lambda: state_counts(tmp_path / "state").get("judged", 0) >= 1)
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 143, stderr
        assert "stopped (SIGTERM) after the batch in hand" in stderr
        judged = state_counts(tmp_path / "state").get("judged", 0)
        # The batch in hand was finished and recorded: no request for a row not recorded.
        assert server.count() == judged * PER_ROW
        done = run(
            "monitor",
            "--once",
            "--state",
            tmp_path / "state",
            *judge_flags(server, tmp_path),
            "--window",
            "100",
        )
        assert done.returncode == 0, done.stderr
        assert state_counts(tmp_path / "state") == {"judged": 6}
        assert server.count() == 6 * PER_ROW


def once(tmp: Path, server: FakeLLMServer, folder: Path, **options: Any) -> Any:
    monitor = Monitor(config(tmp, server, **options))
    try:
        return monitor.once(folder)
    finally:
        monitor.close()


def test_a_burst_takes_only_its_share_of_the_hour_s_budget(tmp_path: Path) -> None:
    burst, spread = tmp_path / "burst", tmp_path / "spread"
    burst.mkdir()
    spread.mkdir()
    # 12 traces a second apart: all in the hour's first 5-minute step.
    traces_file(burst / "t.json", lambda p: rag_traces(p, 12, step=10**9))
    # 12 traces 5 minutes apart: one per step.
    traces_file(spread / "t.json", lambda p: rag_traces(p, 12, step=5 * MINUTE))
    with FakeLLMServer(heuristic_judge) as server:
        # 24 requests an hour: 2 per 5-minute step, one row's worth.
        report = once(tmp_path / "a", server, burst, budget=12 * PER_ROW)
        assert (report.counts["judged"], report.counts["over_budget"]) == (1, 11)
        assert server.count() == PER_ROW
        report = once(tmp_path / "b", server, spread, budget=12 * PER_ROW)
        assert report.counts["judged"] == 12
        assert "over_budget" not in report.counts


def test_the_sample_rate_keeps_the_share_chosen_by_trace_id(tmp_path: Path) -> None:
    (tmp_path / "otel").mkdir()
    ids = traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 20))
    kept = [i for i in ids if sample_key(7, i) < 2**63]
    with FakeLLMServer(heuristic_judge) as server:
        report = once(tmp_path, server, tmp_path / "otel", sample_rate=0.5, seed=7)
    assert report.counts["judged"] == len(kept)
    assert report.counts["sampled_out"] == 20 - len(kept)
    state = MonitorState(tmp_path / "state")
    judged = {t for (t,) in state.read("SELECT trace_id FROM traces WHERE status='judged'")}
    assert judged == set(kept)


def test_windows_after_the_baseline_go_to_the_check_and_its_alerts_are_kept(
    tmp_path: Path,
) -> None:
    (tmp_path / "otel").mkdir()
    ids = traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 16, bad_from=12))
    seen: list[tuple[int, int, Any]] = []

    def check(
        metric: str, baseline: Any, window: Any, state: Any, *, number: int
    ) -> tuple[Any, Any]:
        seen.append((len(baseline), len(window), state))
        drop = sum(baseline) / len(baseline) - sum(window) / len(window)
        calls = (state or 0) + 1
        return ({"statistic": drop} if drop > 0.5 else None), calls

    with FakeLLMServer(heuristic_judge) as server:
        report = once(
            tmp_path, server, tmp_path / "otel", window="4", baseline_windows=1, check=check
        )
        assert [w["baseline"] for w in report.windows] == [True, False, False, False]
        assert seen == [(4, 4, None), (4, 4, 1), (4, 4, 2)]  # the state kept between windows
        [alert] = report.alerts
        assert (alert["metric"], alert["window"], alert["test"]) == (
            "faithfulness",
            3,
            {"statistic": 1.0},
        )
        assert alert["current"]["mean"] == 0.0
        assert alert["baseline"]["mean"] == 1.0
        assert {w["trace_id"] for w in alert["worst"]} <= set(ids[12:])
        assert all(w["evidence"] for w in alert["worst"])  # the judge's claims and verdicts
        # A second pass: nothing new, no window closed again, no alert again.
        report = once(tmp_path, server, tmp_path / "otel", window="4", check=check)
        assert (report.windows, report.alerts) == ([], [])
    state = MonitorState(tmp_path / "state")
    assert state.read("SELECT metric, state FROM detectors") == [("faithfulness", "3")]
    [(stored,)] = state.read("SELECT alert FROM alerts")
    assert json.loads(stored)["window"] == 3


def test_windows_of_an_hour_follow_the_traces_start_times(tmp_path: Path) -> None:
    (tmp_path / "otel").mkdir()
    # 9 traces 20 minutes apart from a whole hour: 3 an hour, over 3 hours; the last
    # three unfaithful.
    traces_file(
        tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 9, step=20 * MINUTE, bad_from=6)
    )
    with FakeLLMServer(heuristic_judge) as server:
        report = once(tmp_path, server, tmp_path / "otel", window="1h", baseline_windows=2)
    assert [(w["start"], w["end"], w["rows"], w["baseline"]) for w in report.windows] == [
        ("2026-11-30T01:00:00.000000Z", "2026-11-30T02:00:00.000000Z", 3, True),
        ("2026-11-30T02:00:00.000000Z", "2026-11-30T03:00:00.000000Z", 3, True),
        ("2026-11-30T03:00:00.000000Z", "2026-11-30T04:00:00.000000Z", 3, False),
    ]
    assert [w["metrics"]["faithfulness"]["mean"] for w in report.windows] == [1.0, 1.0, 0.0]
    interval = report.windows[0]["metrics"]["faithfulness"]
    # 3 scores all 1 of a [0, 1] metric: the exact bound 0.025^(1/3), not a zero width
    assert (interval["scored"], interval["ci_low"], interval["ci_high"]) == (
        3,
        ((1 - 0.95) / 2) ** (1 / 3),
        1.0,
    )
    # 6 baseline rows are too few for the drop test: said, not a crash, not silence
    assert report.alerts == []
    assert report.notes == [
        "faithfulness is not checked for drops: faithfulness has 6 scored row(s) in its "
        "baseline (the first 2 windows); a baseline needs at least 10 to bound its mean: take "
        "more windows as the baseline: raise baseline_windows= (now 2), or make the windows "
        "longer, or pin a run with at least that many scored rows of faithfulness "
        "(baseline_run=)"
    ]


def test_the_drop_test_alerts_after_a_drop_and_not_before(tmp_path: Path) -> None:
    """The monitor's default check, the sequential drop test: the windows before the drop
    raise nothing, a window after it raises the alert, with its statistic."""
    (tmp_path / "otel").mkdir()
    ids = traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 60, bad_from=30))
    with FakeLLMServer(heuristic_judge) as server:
        report = once(tmp_path, server, tmp_path / "otel", window="10", baseline_windows=1)
    assert [w["baseline"] for w in report.windows] == [True] + [False] * 5
    assert report.alerts, "no alert after faithfulness fell from 1 to 0"
    first = report.alerts[0]
    assert first["metric"] == "faithfulness" and first["window"] >= 4  # after the drop
    assert first["test"]["statistic"] >= first["test"]["threshold"]
    assert {w["trace_id"] for w in first["worst"]} <= set(ids[30:])


class _Hook(http.server.BaseHTTPRequestHandler):
    """A loopback webhook: answers each POST with the next status of `statuses`."""

    statuses: ClassVar[list[int]] = []
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append(body)
        status = type(self).statuses.pop(0) if type(self).statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Any:
    _Hook.statuses, _Hook.bodies = [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_an_alert_is_posted_to_the_webhook_and_retried(tmp_path: Path, hook: Any) -> None:
    _Hook.statuses = [503]  # the first try fails: retried
    url = f"http://127.0.0.1:{hook.server_address[1]}/alerts"
    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 60, bad_from=30))
    with FakeLLMServer(heuristic_judge) as server:
        report = once(
            tmp_path, server, tmp_path / "otel", window="10", baseline_windows=1, webhook=url
        )
    assert report.alerts and not report.notes
    posted = [json.loads(b) for b in _Hook.bodies]
    assert len(posted) == len(report.alerts) + 1  # one retried
    assert posted[0] == posted[1] == json.loads(json.dumps(report.alerts[0]))


def test_a_webhook_that_refuses_the_alert_is_said_not_silent(tmp_path: Path, hook: Any) -> None:
    _Hook.statuses = [404] * 10
    url = f"http://127.0.0.1:{hook.server_address[1]}/nowhere"
    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 60, bad_from=30))
    with FakeLLMServer(heuristic_judge) as server:
        report = once(
            tmp_path, server, tmp_path / "otel", window="10", baseline_windows=1, webhook=url
        )
    assert report.alerts  # kept in the state and the report whatever the webhook says
    assert any("refused it (HTTP 404)" in note for note in report.notes)


def test_processes_judge_a_batch_as_one_process_does(tmp_path: Path) -> None:
    """--processes N hands each batch to judge eval's processes executor: the same scores
    and evidence per trace, and the same requests, as judging here."""
    otel = tmp_path / "otel"
    otel.mkdir()
    traces_file(otel / "traces.json", lambda p: rag_traces(p, 6, bad_from=4))
    judged = {}
    with FakeLLMServer(heuristic_judge) as server:
        for processes in ("1", "2"):
            folder = tmp_path / processes
            args = ["monitor", "--once", "--watch", otel, "--state", folder / "state"]
            args += [*judge_flags(server, folder), "--window", "6", "--quiet"]
            before = server.count()
            done = run(*args, "--processes", processes)
            assert done.returncode == 0, done.stderr
            assert "6 traces judged" in done.stdout
            assert server.count() - before == 6 * PER_ROW  # each its own cache: asked again
            state = MonitorState(folder / "state")
            judged[processes] = state.read(
                "SELECT trace_id, scores, evidence FROM traces WHERE status='judged'"
                " ORDER BY trace_id"
            )
            state.close()
            assert not list((folder / "state").glob(".judging-*"))  # the batch's files removed
    assert len(judged["2"]) == 6 and judged["2"] == judged["1"]
    assert {json.loads(s)["faithfulness"] for _, s, _ in judged["2"]} == {0.0, 1.0}
