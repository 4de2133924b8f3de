"""Attacks on the monitor's newest parts (issue 41): the webhook answering with a redirect,
429 with Retry-After, or not at all; every server here is on loopback."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from judge.monitor.monitor import Monitor
from judge.monitor.webhook import post_alert
from judge.testing import FakeLLMServer, heuristic_judge
from tests.monitor.test_webhook import config, dropping_traces

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
    assert f"HTTP {status}" in failure.reason and target in failure.reason


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
