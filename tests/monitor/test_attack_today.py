"""Attacks on the monitor's newest parts (issue 41): the webhook answering with a redirect,
429 with Retry-After, or not at all; every server here is on loopback."""

from __future__ import annotations

import asyncio
import http.server
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from aiohttp import web

from judge.monitor.monitor import Monitor, MonitorConfig
from judge.monitor.state import MonitorStateError
from judge.monitor.webhook import post_alert
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.monitor import MINUTE, rag_traces, state_counts, traces_file, wait_for
from tests.helpers.webhook import config, dropping_traces, outbox

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(handler: Handler) -> tuple[web.AppRunner, str]:
    """A loopback server answering every request with `handler`; (its runner, its URL)."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/alerts"


async def elsewhere() -> tuple[web.AppRunner, str, list[tuple[str, bytes]]]:
    """Where a redirect points (on loopback, standing for another host): its runner, URL
    and the requests it got."""
    got: list[tuple[str, bytes]] = []

    async def keep(request: web.Request) -> web.Response:
        got.append((request.method, await request.read()))
        return web.Response(status=200)

    runner, url = await serve(keep)
    return runner, url, got


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_nor_taken_for_a_delivery(status: int) -> None:
    """A 302 made aiohttp GET the Location without the alert, and its 200 marked the alert
    delivered (lost); a 307 sent the alert to whatever host the Location named."""

    async def attempt() -> tuple[Any, list[tuple[str, bytes]], str]:
        other, target, got = await elsewhere()

        async def moved(request: web.Request) -> web.Response:
            await request.read()
            return web.Response(status=status, headers={"Location": target})

        runner, url = await serve(moved)
        try:
            failure = await post_alert(url, {"id": "s-1", "metric": "faithfulness"}, wait=0.01)
        finally:
            await runner.cleanup()
            await other.cleanup()
        return failure, got, target

    failure, got, target = asyncio.run(attempt())
    assert got == []  # nothing went where the redirect pointed
    assert failure is not None
    assert failure.retry  # kept in the outbox: the next start with the right URL posts it
    origin = target.removesuffix("/alerts")  # a URL's path is not said (it can be a secret)
    assert f"HTTP {status}" in failure.reason and f"to {origin}/..." in failure.reason


def busy(status: int, retry_after: str, posts: list[float]) -> Handler:
    """A webhook answering `status` with Retry-After, keeping the times of the POSTs."""

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        posts.append(time.monotonic())
        return web.Response(status=status, headers={"Retry-After": retry_after})

    return answer


def test_a_long_retry_after_stops_the_tries_and_is_said() -> None:
    """429 with Retry-After: 120 was posted again 0.5, 1 and 2 s later (and 60 s after):
    four tries the webhook had asked not to get."""
    posts: list[float] = []

    async def attempt() -> Any:
        runner, url = await serve(busy(429, "120", posts))
        try:
            return await post_alert(url, {"id": "s-1", "metric": "faithfulness"}, wait=0.01)
        finally:
            await runner.cleanup()

    failure = asyncio.run(attempt())
    assert len(posts) == 1
    assert failure is not None and failure.retry and failure.after == 120
    assert "Retry-After" in failure.reason


def test_a_short_retry_after_is_the_wait_between_tries() -> None:
    posts: list[float] = []

    async def attempt() -> Any:
        runner, url = await serve(busy(503, "1", posts))
        try:
            return await post_alert(url, {"id": "s-1"}, attempts=2, wait=0.01)
        finally:
            await runner.cleanup()

    failure = asyncio.run(attempt())
    assert failure is not None and failure.retry
    assert len(posts) == 2 and posts[1] - posts[0] >= 0.95


def test_the_outbox_waits_what_retry_after_asked(tmp_path: Path) -> None:
    """The monitor posted the outbox again 60 s later whatever the webhook had asked."""
    posts: list[float] = []
    dropping_traces(tmp_path / "otel")

    async def watch() -> Any:
        runner, url = await serve(busy(429, "600", posts))
        try:
            with FakeLLMServer(heuristic_judge) as server:
                monitor = Monitor(
                    config(tmp_path, server, webhook=url, window="10", baseline_windows=1)
                )
                try:
                    return await monitor.aonce(tmp_path / "otel")
                finally:
                    monitor.close()
        finally:
            await runner.cleanup()

    report = asyncio.run(watch())
    assert report.alerts and len(posts) == 1
    notes = [n for n in report.notes if "kept in the state's outbox" in n]
    assert len(notes) == 1 and "posted again in 600 s" in notes[0], notes


class _Hanging(http.server.BaseHTTPRequestHandler):
    """A webhook that takes the POST and answers nothing while `hang` is set."""

    posts: ClassVar[list[str]] = []
    hang: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts.append(self.headers.get("Idempotency-Key") or "")
        while type(self).hang.is_set():
            threading.Event().wait(0.05)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hanging() -> Iterator[str]:
    """The URL of a webhook that hangs until the test ends."""
    _Hanging.posts = []
    _Hanging.hang.set()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hanging)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/alerts"
    _Hanging.hang.clear()
    server.shutdown()
    server.server_close()


def serving(monitor: Monitor, folder: Path) -> threading.Thread:
    """The monitor serving `folder` (no receiver) in a thread of its own."""
    thread = threading.Thread(
        target=lambda: asyncio.run(monitor.aserve(host=None, watch=folder, poll=0.05)),
        daemon=True,
    )
    thread.start()
    return thread


def test_judging_goes_on_while_the_webhook_does_not_answer(tmp_path: Path, hanging: str) -> None:
    """close_windows awaited the outbox: a webhook that took the POST and did not answer
    held the judging and the passes (traces completed, folder read) for its 30 s timeout
    times four tries, every minute."""
    dropping_traces(tmp_path / "otel")
    with FakeLLMServer(heuristic_judge) as server:
        options = {"window": "10", "baseline_windows": 1, "linger": 0}
        monitor = Monitor(config(tmp_path, server, webhook=hanging, **options))
        thread = serving(monitor, tmp_path / "otel")
        try:
            wait_for(lambda: bool(_Hanging.posts), 60)
            traces_file(tmp_path / "otel" / "u.json", lambda p: rag_traces(p, 20, first=60))
            wait_for(lambda: state_counts(tmp_path / "state").get("judged") == 80, 20)
        finally:
            monitor.request_stop()
            _Hanging.hang.clear()
            thread.join(180)
            monitor.close()


@pytest.mark.parametrize("serve", [True, False], ids=["serve", "once"])
def test_a_stop_is_not_held_by_a_webhook_that_does_not_answer(
    tmp_path: Path, hanging: str, serve: bool
) -> None:
    """SIGTERM (request_stop) waited for the hanging POST's tries, about two minutes (a
    supervisor's stop timeout kills it first); the alert stays queued for the next start."""
    dropping_traces(tmp_path / "otel")
    with FakeLLMServer(heuristic_judge) as server:
        options = {"window": "10", "baseline_windows": 1, "linger": 0}
        monitor = Monitor(config(tmp_path, server, webhook=hanging, **options))
        if serve:
            thread = serving(monitor, tmp_path / "otel")
        else:
            thread = threading.Thread(target=monitor.once, args=(tmp_path / "otel",))
            thread.start()
        try:
            wait_for(lambda: bool(_Hanging.posts), 60)
            monitor.request_stop()
            stopped = time.monotonic()
            thread.join(10)
            waited = time.monotonic() - stopped
        finally:
            monitor.request_stop()
            _Hanging.hang.clear()
            thread.join(180)
            monitor.close()
    assert waited < 5, f"the stop waited {waited:.0f} s for the webhook"
    assert outbox(tmp_path / "state") == [(1, "pending", 0)]


def test_a_second_monitor_on_a_state_in_use_is_refused(tmp_path: Path) -> None:
    """Two monitors on one --state (two cron passes overlapping, say) judged the same
    pending rows twice: 689 judge requests for 200 traces one monitor judges with 400. The
    guide said never to; nothing stopped it."""
    with FakeLLMServer(heuristic_judge) as server:
        first = Monitor(config(tmp_path, server))
        try:
            with pytest.raises(MonitorStateError, match="another judge monitor") as refused:
                Monitor(config(tmp_path, server))
            assert f"process {os.getpid()}" in str(refused.value)
        finally:
            first.close()
        Monitor(config(tmp_path, server)).close()  # free once the first closed


@pytest.mark.parametrize("status", [408, 425])
def test_a_webhook_that_timed_out_or_asks_again_later_is_retried(status: int) -> None:
    """408 (the webhook's server timed out reading the request) and 425 (too early) say
    "send it again", as 429 does; they were taken for refusals and the alert dropped."""
    posts: list[float] = []

    async def attempt() -> Any:
        runner, url = await serve(busy(status, "0", posts))
        try:
            return await post_alert(url, {"id": "s-1"}, attempts=2, wait=0.01)
        finally:
            await runner.cleanup()

    failure = asyncio.run(attempt())
    assert failure is not None and failure.retry and len(posts) == 2


def test_a_state_of_format_4_with_alerts_posts_only_the_alerts_after_it(
    tmp_path: Path, hanging: str
) -> None:
    """Yesterday's state (format 4, no outbox) held alerts: the migration queues none of
    them (they were posted, at most once, then); the alerts fired after are posted, with
    ids that go on from the old alerts' numbers."""
    import sqlite3

    dropping_traces(tmp_path / "otel")
    _Hanging.hang.clear()
    options = {"window": "10", "baseline_windows": 1, "linger": 0}
    with FakeLLMServer(heuristic_judge) as server:
        monitor = Monitor(config(tmp_path, server, **options))
        try:
            before = monitor.once(tmp_path / "otel")
        finally:
            monitor.close()
        assert before.alerts
        db = sqlite3.connect(tmp_path / "state" / "monitor.sqlite", isolation_level=None)
        db.execute("DROP TABLE outbox")  # as format 4 was
        db.execute("DROP TABLE spend_judged")  # (format 6's)
        db.execute("PRAGMA user_version=4")
        db.close()
        traces_file(tmp_path / "otel" / "u.json", lambda p: rag_traces(p, 30, first=60, bad_from=0))
        monitor = Monitor(config(tmp_path, server, webhook=hanging, **options))
        try:
            after = monitor.once(tmp_path / "otel")
        finally:
            monitor.close()
    old = {a["id"] for a in before.alerts}
    assert after.alerts and not old & {a["id"] for a in after.alerts}
    assert sorted(_Hanging.posts) == sorted(a["id"] for a in after.alerts)
    assert [status for _, status, _ in outbox(tmp_path / "state")] == ["delivered"] * len(
        after.alerts
    )


def test_a_name_of_two_addresses_on_port_0_is_served_on_the_port_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--listen localhost:0 where localhost is ::1 and 127.0.0.1 (most Linux hosts): each
    address got a port of its own from the system, and the port said (and given to
    on_ready) was the first's only; the other address answered nowhere near it."""
    import socket

    resolve = socket.getaddrinfo

    def both(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "localhost":
            return resolve("127.0.0.1", *args, **kwargs) + resolve("::1", *args, **kwargs)
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", both)
    monitor = Monitor(MonitorConfig(state=tmp_path / "state", metrics=["ndcg@10"]))
    answered: dict[str, bool] = {}

    def ready(port: int | None) -> None:
        for address in ("127.0.0.1", "::1"):
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            with socket.socket(family) as probe:
                probe.settimeout(5)
                answered[address] = probe.connect_ex((address, port or 0)) == 0
        monitor.request_stop()

    try:
        asyncio.run(monitor.aserve(host="localhost", port=0, on_ready=ready))
    finally:
        monitor.close()
    assert answered == {"127.0.0.1": True, "::1": True}


def test_a_webhook_url_s_secret_is_not_said_nor_kept() -> None:
    """A Slack or Discord webhook's URL is its secret (the path), and a URL can carry a
    password: every failure said it whole on stderr, in the report's notes and in the
    state's outbox."""
    posts: list[float] = []

    async def attempt() -> list[Any]:
        runner, url = await serve(busy(404, "0", posts))
        secret = url.replace("http://", "http://user:hunter2@").replace(
            "/alerts", "/services/T0/B0/XyZsEcReT"
        )
        try:
            failures = [await post_alert(secret, {"id": "s-1"}, wait=0.01)]
        finally:
            await runner.cleanup()
        failures.append(await post_alert(secret, {"id": "s-1"}, attempts=1))  # nothing there
        return failures

    for failure in asyncio.run(attempt()):
        assert failure is not None
        assert "XyZsEcReT" not in failure.reason and "hunter2" not in failure.reason
        assert "http://127.0.0.1:" in failure.reason  # where it went, still said


def test_a_week_of_backlog_is_not_judged_with_a_week_of_budget_at_once(tmp_path: Path) -> None:
    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 168, step=60 * MINUTE))
    with FakeLLMServer(heuristic_judge) as server:
        monitor = Monitor(config(tmp_path, server, budget="10/day", linger=0))
        try:
            report = monitor.once(tmp_path / "otel")
        finally:
            monitor.close()
    assert report.counts.get("judge_requests", 0) <= 10  # what one day allows


def test_a_cron_pass_overlapping_the_last_is_refused_with_exit_2(tmp_path: Path) -> None:
    from tests.helpers.cli import run

    holder = Monitor(MonitorConfig(state=tmp_path / "state", metrics=["ndcg@10"]))
    try:
        done = run("monitor", "--once", "--state", tmp_path / "state", "--metrics", "ndcg@10")
    finally:
        holder.close()
    assert done.returncode == 2
    assert f"another judge monitor (process {os.getpid()}) is using this state" in done.stderr
    assert "Traceback" not in done.stderr
    done = run("monitor", "--once", "--state", tmp_path / "state", "--metrics", "ndcg@10")
    assert done.returncode == 0, done.stderr


def test_an_alert_s_test_names_windows_as_the_monitor_numbers_them(tmp_path: Path) -> None:
    dropping_traces(tmp_path / "otel")  # faithfulness 1, then 0 from trace 30 (window 3)
    with FakeLLMServer(heuristic_judge) as server:
        monitor = Monitor(config(tmp_path, server, window="10", baseline_windows=1))
        try:
            report = monitor.once(tmp_path / "otel")
        finally:
            monitor.close()
    alert = report.alerts[0]
    assert alert["test"]["window"] == alert["window"]
    assert alert["test"]["since_window"] == 3
