"""Running the async API from sync code, also where an event loop already runs (Jupyter)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
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
