"""The async helpers: running the async API from sync code (also where an event loop
already runs, as in Jupyter), the sync twin of an async function, awaiting many tasks that
stop together, and coroutines started eagerly.

Eager starts (`start_eagerly`): coroutines run at once, without the event loop, until they
must wait.

A sample whose judgments all come from the cache never waits: started eagerly, its
judges, metrics and row finish in one go, without a task, a callback or a turn of the
loop each (they cost more than the rest of a cached row). A coroutine that does wait (a
request to the model) goes on as an ordinary task from where it stopped. This is what
Python 3.12's `asyncio.eager_task_factory` does for a whole loop; here it is used only
where judge awaits its own coroutines. The first step runs in a copy of the caller's
context, as a task's would, and the task goes on in that copy. On Python 3.10, whose
tasks cannot be given a context, coroutines are started as ordinary tasks.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import sys
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Sequence
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
    Futures that are all done already (started with `start_eagerly` and served from the
    cache) are returned without a turn of the loop.
    """
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    if _finished(tasks):  # nothing left running to cancel
        return [t.result() for t in tasks]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# Whether coroutines start eagerly here (tasks take a context from Python 3.11 on).
EAGER = sys.version_info >= (3, 11)


def start_eagerly(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """Run `coro` up to its first wait: a finished future if it never waited, else a task
    that goes on from there."""
    if not EAGER:
        return asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    try:
        waiting_on = context.run(coro.send, None)
    except StopIteration as stop:
        done: asyncio.Future[T] = loop.create_future()
        done.set_result(stop.value)
        return done
    except (KeyboardInterrupt, SystemExit):
        raise  # as a task lets them through
    except asyncio.CancelledError:
        cancelled: asyncio.Future[T] = loop.create_future()
        cancelled.cancel()
        return cancelled
    except BaseException as exc:
        failed: asyncio.Future[T] = loop.create_future()
        failed.set_exception(exc)
        return failed
    if getattr(waiting_on, "_asyncio_future_blocking", False):
        # Awaiting a pending future marks it "blocking" until a task takes it from the
        # yield and clears the mark; another await of it meanwhile is an error. The task
        # that goes on takes it only later, so the mark is cleared here, as a task would,
        # and set again when the task is given the future (see _resume).
        waiting_on._asyncio_future_blocking = False
    resume = _resume(coro, waiting_on)
    next(resume)  # started, so a cancellation before the task's first step reaches it
    return loop.create_task(resume, context=context)  # type: ignore[call-arg,unused-ignore]


@types.coroutine
def _resume(coro: Coroutine[Any, Any, T], waiting_on: Any) -> Generator[Any, Any, T]:
    """The rest of a started coroutine: what it waits on goes to the task running this, and
    the task's wake-ups (a value, or an exception such as a cancellation) go back in."""
    try:
        yield  # where start() leaves it
    except asyncio.CancelledError as exc:
        # Cancelled before the task took what the coroutine waits on: cancel that, as a
        # task's cancel() does (the coroutine then wakes to its CancelledError), or else
        # throw the cancellation in.
        if not (asyncio.isfuture(waiting_on) and waiting_on.cancel()):
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
    while True:
        if getattr(waiting_on, "_asyncio_future_blocking", None) is False:
            waiting_on._asyncio_future_blocking = True  # as the await left it (see start)
        try:
            sent = yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
        else:
            try:
                waiting_on = coro.send(sent)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]


def _finished(futures: Sequence[asyncio.Future[T]]) -> bool:
    """Whether every future is done; if so, the first exception among them (in order) is
    raised, every other one being marked retrieved."""
    if not all(f.done() for f in futures):
        return False
    errors = [asyncio.CancelledError() if f.cancelled() else f.exception() for f in futures]
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return True
