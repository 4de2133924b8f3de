"""The webhook's outbox: an alert is posted at least once, across a kill -9 between the
POST and its mark and across a webhook that is down, with the same id each time; an alert
delivered, or refused, is not posted again."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from judge.monitor.monitor import Monitor
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.monitor import free_port, judge_flags, wait_for
from tests.helpers.webhook import config, dropping_traces, outbox


class _Hook(http.server.BaseHTTPRequestHandler):
    """A loopback webhook that keeps every POST (body and Idempotency-Key) and answers
    `status`, or, while `hang` is set, answers nothing until it is cleared."""

    posts: ClassVar[list[tuple[dict[str, Any], str | None]]] = []
    status: ClassVar[int] = 200
    hang: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts.append((json.loads(body), self.headers.get("Idempotency-Key")))
        while type(self).hang.is_set():
            threading.Event().wait(0.05)
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[str]:
    """The webhook's URL."""
    _Hook.posts, _Hook.status = [], 200
    _Hook.hang.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/alerts"
    _Hook.hang.clear()
    server.shutdown()
    server.server_close()


def webhook_gauge(monitor: Monitor) -> dict[str, float]:
    """judge_monitor_webhook_alerts by status, as Prometheus reads the monitor's registry."""
    text = generate_latest(monitor.registry).decode()
    return {
        sample.labels["status"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "judge_monitor_webhook_alerts"
        for sample in family.samples
    }


def test_kill_9_between_the_post_and_its_mark_posts_the_alert_again_with_its_id(
    tmp_path: Path, hook: str
) -> None:
    dropping_traces(tmp_path / "otel")
    state = tmp_path / "state"
    args = ["monitor", "--once", "--watch", str(tmp_path / "otel"), "--state", str(state)]
    with FakeLLMServer(heuristic_judge) as server:
        args += [*judge_flags(server, tmp_path), "--window", "10", "--baseline-windows", "1"]
        args += ["--webhook", hook, "--quiet"]
        _Hook.hang.set()  # the webhook takes the POST and does not answer: killed meanwhile
        process = subprocess.Popen(
            [sys.executable, "-m", "judge", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, OPENAI_API_KEY="x"),
        )
        try:
            wait_for(lambda: bool(_Hook.posts) or process.poll() is not None, 120)
        finally:
            process.kill()  # SIGKILL: the POST was sent, its answer never read
            process.communicate(timeout=30)
        assert len(_Hook.posts) == 1, "the monitor ended before posting"
        first, key = _Hook.posts[0]
        assert first["metric"] == "faithfulness" and key == first["id"]
        assert outbox(state) == [(1, "pending", 0)]  # committed with the alert, not marked
        _Hook.hang.clear()
        requests = server.count()
        done = run(*args)  # the restart: nothing new to judge, the outbox posted
        assert done.returncode == 0, done.stderr  # no alert fired by this pass
        assert server.count() == requests
        assert len(_Hook.posts) == 2
        assert _Hook.posts[1] == (first, first["id"])  # the same alert, the same id
        assert outbox(state) == [(1, "delivered", 1)]
        done = run(*args)
        assert done.returncode == 0, done.stderr
        assert len(_Hook.posts) == 2  # delivered: not posted again


def test_an_alert_waits_in_the_outbox_while_the_webhook_is_down(tmp_path: Path) -> None:
    dropping_traces(tmp_path / "otel")
    down = f"http://127.0.0.1:{free_port()}/alerts"  # nothing listens there
    with FakeLLMServer(heuristic_judge) as server:
        options = {"window": "10", "baseline_windows": 1}
        monitor = Monitor(config(tmp_path, server, webhook=down, **options))
        try:
            report = monitor.once(tmp_path / "otel")
            held = webhook_gauge(monitor)
        finally:
            monitor.close()
        assert held == {"pending": len(report.alerts), "delivered": 0, "refused": 0}
        assert report.alerts
        notes = [n for n in report.notes if "kept in the state's outbox" in n]
        assert len(notes) == 1 and "not delivered to" in notes[0]
        assert [status for _, status, _ in outbox(tmp_path / "state")] == ["pending"] * len(
            report.alerts
        )
        # The webhook is up at the next start: every alert held is posted, oldest first.
        _Hook.posts = []
        hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
        threading.Thread(target=hook.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{hook.server_address[1]}/alerts"
            monitor = Monitor(config(tmp_path, server, webhook=url, **options))
            try:
                again = monitor.once(tmp_path / "otel")
                sent = webhook_gauge(monitor)
            finally:
                monitor.close()
        finally:
            hook.shutdown()
            hook.server_close()
    assert not again.alerts and not again.notes
    assert [post for post, _ in _Hook.posts] == json.loads(json.dumps(report.alerts))
    assert {status for _, status, _ in outbox(tmp_path / "state")} == {"delivered"}
    assert sent == {"pending": 0, "delivered": len(report.alerts), "refused": 0}


def test_a_refused_alert_is_not_posted_again(tmp_path: Path, hook: str) -> None:
    dropping_traces(tmp_path / "otel")
    _Hook.status = 404
    with FakeLLMServer(heuristic_judge) as server:
        for _ in range(2):
            monitor = Monitor(
                config(tmp_path, server, webhook=hook, window="10", baseline_windows=1)
            )
            try:
                monitor.once(tmp_path / "otel")
            finally:
                monitor.close()
    assert len(_Hook.posts) == 1  # refused once (a 4xx is not retried), not posted again
    assert outbox(tmp_path / "state") == [(1, "refused", 1)]
