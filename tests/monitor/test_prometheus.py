"""`judge monitor --metrics-port`: the Prometheus metrics scraped over HTTP while the
monitor receives traces from the real OpenTelemetry SDK exporter and judges them with the
loopback fake judge, parsed with prometheus_client's own parser: the counts are what was
sent and judged, an alert is counted after a drop and not before, the figures survive a
restart, two monitors in one process keep apart, and the guide's table names what is
served."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from judge.llm.config import LLM
from judge.monitor.monitor import Monitor, MonitorConfig
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.monitor import (
    PER_ROW,
    free_port,
    judge_flags,
    no_retriever_trace,
    rag_traces,
    serving,
    traces_file,
    wait_for,
)

DOCS = Path(__file__).parents[2] / "docs" / "guides" / "monitoring.md"
HOUR = 3600 * 10**9
BUDGET = 12_000  # requests an hour: a thousand in each 5-minute step, never reached here

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """The samples of a scrape, by (name, labels), as prometheus_client's parser reads them."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse(response.read().decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def send(base: str, make: Any) -> list[str]:
    """Traces `make(provider)` makes, exported by the real SDK to the receiver."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    exporter = OTLPSpanExporter(endpoint=f"{base}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=8))
    ids = make(provider)
    provider.shutdown()  # flushed: every request acknowledged
    return ids


def metrics_section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    return text.split("\n## Metrics and Grafana\n", 1)[1].split("\n## ", 1)[0]


def documented_names() -> set[str]:
    """The metric names the table of the guide's "Metrics and Grafana" gives."""
    table = [line for line in metrics_section().splitlines() if line.startswith("| `judge_")]
    return {name for line in table for name in re.findall(r"`(judge_monitor_\w+)`", line)}


def test_the_guide_s_queries_and_panels_name_metrics_of_its_table() -> None:
    blocks = re.findall(r"```(?:yaml|json|python)\n(.*?)```", metrics_section(), re.S)
    queried = {name for block in blocks for name in re.findall(r"judge_monitor_\w+", block)}
    assert len(queried) >= 8, queried  # the panel, the rules, the annotation
    assert queried <= documented_names()


def test_the_scrape_counts_what_was_sent_and_judged_and_the_alert_after_the_drop(
    tmp_path: Path,
) -> None:
    # The traces start in the next hour: the budget's hour is theirs whenever the test runs.
    start = (time.time_ns() // HOUR + 1) * HOUR
    with FakeLLMServer(heuristic_judge) as judge:
        llm = LLM(model="openai/fake-model", api_base=judge.base_url, api_key="x")
        config = MonitorConfig(
            state=tmp_path / "state",
            llm=llm,
            metrics=["faithfulness"],
            cache=str(tmp_path / "cache.sqlite"),
            window="10",
            baseline_windows=1,
            budget=BUDGET,
            linger=0.5,
            progress=False,
        )
        with serving(config, poll=0.05, metrics_port=0) as (monitor, base):
            url = f"http://127.0.0.1:{monitor.metrics_port}/metrics"
            before = scrape(url)  # nothing yet: the counters are there, at 0
            assert value(before, "judge_monitor_traces_received_total") == 0
            assert value(before, "judge_monitor_queue_capacity_requests") == 64

            def good(provider: Any) -> list[str]:
                ids = rag_traces(provider, 30, start=start, step=10**6)
                return [*ids, no_retriever_trace(provider, start=start)]

            send(base, good)
            wait_for(lambda: value(scrape(url), "judge_monitor_windows_closed_total") == 3)
            samples = scrape(url)
            assert value(samples, "judge_monitor_traces_received_total") == 31
            assert value(samples, "judge_monitor_traces_skipped_total", reason="no_retriever") == 1
            assert value(samples, "judge_monitor_traces_sampled_total") == 30
            assert value(samples, "judge_monitor_traces_judged_total") == 30
            assert value(samples, "judge_monitor_judge_requests_total") == judge.count() == 60
            assert value(samples, "judge_monitor_spans_total", outcome="kept") == 61
            assert value(samples, "judge_monitor_pending_traces") == 0
            assert value(samples, "judge_monitor_queue_requests") == 0
            # The dry run's estimate of each row is what it cost: 2 requests.
            hour = {"unit": "requests", "period": "hour"}
            assert value(samples, "judge_monitor_budget", **hour) == BUDGET
            assert value(samples, "judge_monitor_budget_spent", **hour) == 30 * PER_ROW
            assert value(samples, "judge_monitor_budget_left", **hour) == BUDGET - 30 * PER_ROW
            assert value(samples, "judge_monitor_window_mean", metric="faithfulness") == 1.0
            assert value(samples, "judge_monitor_baseline_mean", metric="faithfulness") == 1.0
            assert value(samples, "judge_monitor_alerts_total", metric="faithfulness") == 0
            statistic = value(samples, "judge_monitor_detector_statistic", metric="faithfulness")
            threshold = value(samples, "judge_monitor_detector_threshold", metric="faithfulness")
            assert statistic < threshold == 1000

            send(base, lambda p: rag_traces(p, 30, start=start, step=10**6, first=30, bad_from=30))
            wait_for(lambda: value(scrape(url), "judge_monitor_windows_closed_total") == 6)
            samples = scrape(url)
            assert value(samples, "judge_monitor_traces_judged_total") == 60
            assert value(samples, "judge_monitor_judge_requests_total") == judge.count() == 120
            assert value(samples, "judge_monitor_alerts_total", metric="faithfulness") == 1
            assert value(samples, "judge_monitor_window_mean", metric="faithfulness") == 0.0
            # 10 scores all 0: the exact bound 1 - 0.025^(1/10) of a [0, 1] metric
            assert value(
                samples, "judge_monitor_window_ci_high", metric="faithfulness"
            ) == pytest.approx(1 - ((1 - 0.95) / 2) ** (1 / 10))
            assert value(samples, "judge_monitor_window_scored", metric="faithfulness") == 10
            assert value(samples, "judge_monitor_baseline_mean", metric="faithfulness") == 1.0
            assert value(samples, "judge_monitor_last_window_number") == 5
            closed = value(samples, "judge_monitor_last_window_closed_timestamp_seconds")
            assert time.time() - 600 < closed <= time.time()
            assert value(samples, "judge_monitor_budget_spent", **hour) == 60 * PER_ROW
            # The alerts of the state are the ones counted.
            alerts = monitor.state.read("SELECT metric FROM alerts")
            assert alerts == [("faithfulness",)]
            served = {name for name, _ in samples if name.startswith("judge_monitor_")}
        # The guide's table names every metric served, and no other.
        assert documented_names() == served
        assert monitor.metrics_port is None  # no longer served once stopped
    # prometheus_client's global registry holds none of the monitor's metrics.
    assert "judge_monitor_" not in generate_latest(prometheus_client.REGISTRY).decode()


def watch_command(tmp: Path, server: FakeLLMServer, port: int) -> list[str]:
    command = [sys.executable, "-m", "judge", "monitor", "--watch", str(tmp / "otel")]
    command += ["--state", str(tmp / "state"), *judge_flags(server, tmp)]
    command += ["--window", "4", "--linger", "0.2", "--metrics-port", str(port)]
    return command


def scraped_when_up(process: subprocess.Popen[str], url: str) -> Samples:
    found: list[Samples] = []

    def up() -> bool:
        assert process.poll() is None, process.communicate()
        try:
            found.append(scrape(url))
        except OSError:
            return False
        return True

    wait_for(up)
    return found[-1]


def test_metrics_port_with_watch_and_no_listen_and_the_figures_survive_a_restart(
    tmp_path: Path,
) -> None:
    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 8))
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    env = dict(os.environ, OPENAI_API_KEY="x")
    with FakeLLMServer(heuristic_judge) as server:
        for attempt in ("first", "restart"):
            process = subprocess.Popen(
                watch_command(tmp_path, server, port),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            try:
                scraped_when_up(process, url)
                wait_for(lambda: value(scrape(url), "judge_monitor_windows_closed_total") == 2)
                samples = scrape(url)
            finally:
                process.send_signal(signal.SIGTERM)
                _, stderr = process.communicate(timeout=60)
            assert process.returncode == 143, (attempt, stderr)
            assert value(samples, "judge_monitor_traces_judged_total") == 8
            # The restart judged nothing again, and counts what the state holds.
            assert value(samples, "judge_monitor_judge_requests_total") == 8 * PER_ROW
            assert server.count() == 8 * PER_ROW
            assert value(samples, "judge_monitor_spans_total", outcome="kept") == 16
            assert value(samples, "judge_monitor_alerts_total", metric="faithfulness") == 0
            # --watch alone has no receiver: no queue to show.
            assert ("judge_monitor_queue_requests", ()) not in samples


def test_once_refuses_the_metrics_flags(tmp_path: Path) -> None:
    state = ["--state", tmp_path / "state"]
    done = run("monitor", "--once", *state, "--metrics-port", "9464")
    assert done.returncode == 2
    assert "--metrics-port serves metrics while the monitor runs" in done.stderr
    assert "--once" in done.stderr
    done = run("monitor", "--watch", tmp_path, *state, "--metrics-host", "0.0.0.0")
    assert done.returncode == 2
    assert "--metrics-host HOST: give --metrics-port PORT too" in done.stderr
    assert not (tmp_path / "state").exists()  # refused before anything was started


def test_a_metrics_port_taken_is_said_with_the_flag(tmp_path: Path) -> None:
    with socket.socket() as taken, FakeLLMServer(heuristic_judge) as server:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["monitor", "--watch", tmp_path, "--state", tmp_path / "state"]
        done = run(*args, *judge_flags(server, tmp_path), "--metrics-port", port)
    assert done.returncode == 2
    assert f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}" in done.stderr


def test_two_monitors_in_one_process_each_expose_their_own_state(tmp_path: Path) -> None:
    monitors = []
    with FakeLLMServer(heuristic_judge) as server:
        llm = LLM(model="openai/fake-model", api_base=server.base_url, api_key="x")
        for name, count in (("a", 3), ("b", 5)):
            folder = tmp_path / name / "otel"
            folder.mkdir(parents=True)
            traces_file(folder / "t.json", lambda p, c=count: rag_traces(p, c))
            monitor = Monitor(
                MonitorConfig(
                    state=tmp_path / name / "state",
                    llm=llm,
                    metrics=["faithfulness"],
                    cache=str(tmp_path / "cache.sqlite"),
                    progress=False,
                )
            )
            monitor.once(folder)
            monitors.append(monitor)
    try:
        judged = [
            value(parse(generate_latest(m.registry).decode()), "judge_monitor_traces_judged_total")
            for m in monitors
        ]
        assert judged == [3, 5]
    finally:
        for monitor in monitors:
            monitor.close()


def test_one_trace_from_a_skewed_clock_does_not_hold_the_budget_gauges(tmp_path: Path) -> None:
    """The budget gauges show the period being spent: the clock's, or a later one a trace
    was charged to. One trace stamped a year ahead (an app's clock set wrong) held them
    on its year-ahead day for good: the day's spend read 2 requests, whatever was spent."""
    day = 86400 * 10**9
    now = time.time_ns()
    ahead, today = tmp_path / "ahead", tmp_path / "today"
    for folder in (ahead, today):
        folder.mkdir()
    traces_file(ahead / "t.json", lambda p: rag_traces(p, 1, start=now + 365 * day))
    # a minute ago, a second apart: in today's current hour (its step's share is ample)
    traces_file(
        today / "t.json", lambda p: rag_traces(p, 3, start=now - 60 * 10**9, step=10**9, first=1)
    )
    with FakeLLMServer(heuristic_judge) as server:
        llm = LLM(model="openai/fake-model", api_base=server.base_url, api_key="x")
        config = MonitorConfig(
            state=tmp_path / "state",
            llm=llm,
            metrics=["faithfulness"],
            cache=str(tmp_path / "cache.sqlite"),
            budget="24000/day",
            window="100",
            progress=False,
        )
        for folder in (ahead, today):
            monitor = Monitor(config)
            try:
                monitor.once(folder)
                samples = parse(generate_latest(monitor.registry).decode())
            finally:
                monitor.close()
    labels = {"unit": "requests", "period": "day"}
    if time.time_ns() // day == now // day:  # the test did not straddle midnight (UTC)
        assert value(samples, "judge_monitor_budget_spent", **labels) == 3 * PER_ROW
        assert value(samples, "judge_monitor_budget_left", **labels) == 24000 - 3 * PER_ROW


def test_a_scrape_never_makes_a_state_of_its_own(tmp_path: Path) -> None:
    """The state folder deleted while the monitor runs: a scrape read a new, empty state
    it created in its place (every counter back to 0, a state the restarted monitor then
    took as its own); it reads the monitor's own file, which the monitor still writes."""
    import shutil

    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 3))
    with FakeLLMServer(heuristic_judge) as server:
        monitor = Monitor(
            MonitorConfig(
                state=tmp_path / "state",
                llm=LLM(model="openai/fake-model", api_base=server.base_url, api_key="x"),
                metrics=["faithfulness"],
                progress=False,
            )
        )
        try:
            monitor.once(tmp_path / "otel")
            shutil.rmtree(tmp_path / "state")
            samples = parse(generate_latest(monitor.registry).decode())
        finally:
            monitor.close()
    assert value(samples, "judge_monitor_traces_judged_total") == 3
    assert not (tmp_path / "state").exists()


def test_a_collector_of_a_state_that_is_not_there_says_so(tmp_path: Path) -> None:
    import pytest

    from judge.monitor.prometheus import MonitorCollector
    from judge.monitor.state import MonitorStateError

    collector = MonitorCollector(tmp_path / "gone", baseline_windows=3)
    with pytest.raises(MonitorStateError, match="no monitor state"):
        list(collector.collect())
    assert not (tmp_path / "gone").exists()
