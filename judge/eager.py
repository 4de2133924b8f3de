"""Coroutines started at once and run without the event loop until they must wait.

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
import sys
import types
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

from judge import aio

T = TypeVar("T")

# Whether coroutines start eagerly here (tasks take a context from Python 3.11 on).
EAGER = sys.version_info >= (3, 11)


def start(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
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


def _finished(futures: list[asyncio.Future[T]]) -> bool:
    """Whether every future is done; if so, the first exception among them (in order) is
    raised, every other one being marked retrieved."""
    if not all(f.done() for f in futures):
        return False
    errors = [asyncio.CancelledError() if f.cancelled() else f.exception() for f in futures]
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return True


async def gather_or_cancel(futures: list[asyncio.Future[T]]) -> list[T]:
    """`judge.aio.gather_or_cancel` of started futures, without a turn of the loop
    when all are done."""
    if _finished(futures):  # nothing left running to cancel
        return [f.result() for f in futures]
    return await aio.gather_or_cancel(futures)
