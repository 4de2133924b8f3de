"""Attacks on the monitor's newest parts (issue 41): the webhook answering with a redirect,
429 with Retry-After, or not at all; every server here is on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from judge.monitor.webhook import post_alert

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
