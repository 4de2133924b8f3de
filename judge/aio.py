"""Running the async API from sync code (also where an event loop already runs, as in
Jupyter), the sync twin of an async function, and awaiting many tasks that stop together."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from judge.errors import JudgeError

T = TypeVar("T")
P = ParamSpec("P")


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


def sync_twin(async_fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The sync twin of an async function `aname`: `name = sync_twin(aname)`.

    The twin takes the same arguments (for mypy too), returns what the coroutine returns
    and raises what it raises; it runs the coroutine with `run_sync`, so it also works
    where an event loop already runs (Jupyter). Its name is the async one without the
    leading "a"; its docstring is the async function's, and `inspect.signature` and
    `help()` show the async function's parameters (`__wrapped__`): the public docstring
    (Args:, Returns:, Raises:) and the parameters are written once, on the async function.
    """
    name = async_fn.__name__
    if not inspect.iscoroutinefunction(async_fn) or not name.startswith("a") or len(name) < 2:
        raise JudgeError(
            f"sync_twin({name}): give an async def whose name starts with 'a' (ascore -> score)"
        )

    @functools.wraps(async_fn)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(async_fn(*args, **kwargs))

    twin.__name__ = name[1:]
    twin.__qualname__ = async_fn.__qualname__[: -len(name)] + name[1:]
    return twin


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
