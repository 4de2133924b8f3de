"""Running the async API from sync code (also where an event loop already runs, as in
Jupyter), and awaiting many tasks that stop together."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run a coroutine to completion from sync code, also inside a running event loop.

    In Jupyter a loop is already running; rather than patching it, the coroutine runs on
    a fresh loop in a worker thread.
    """

    async def wrapper() -> T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrapper())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wrapper()).result()


async def gather_or_cancel(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """Await all, in order; at the first exception cancel the others, wait until they have
    unwound (no request left in flight, nothing running on), then raise it.

    `asyncio.gather` alone would leave the others running after the first failure.
    """
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
