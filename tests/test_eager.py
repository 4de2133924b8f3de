"""Coroutines started eagerly (judge.aio.start_eagerly) behave as tasks would, only sooner."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from judge import aio

needs_311 = pytest.mark.skipif(not aio.EAGER, reason="Python 3.10 starts ordinary tasks")


async def at_once(value: int) -> int:
    return value * 2


@needs_311
def test_a_coroutine_that_never_waits_is_done_when_started():
    async def main() -> None:
        future = aio.start_eagerly(at_once(21))
        assert future.done() and future.result() == 42
        assert await aio.gather_or_cancel([future, aio.start_eagerly(at_once(1))]) == [42, 2]

    asyncio.run(main())


def test_a_coroutine_that_waits_goes_on_as_a_task():
    async def main() -> None:
        steps: list[str] = []

        async def slow() -> str:
            steps.append("first")
            await asyncio.sleep(0.01)
            steps.append("second")
            return "done"

        future = aio.start_eagerly(slow())
        assert steps == ["first"] or not aio.EAGER
        assert await future == "done" and steps == ["first", "second"]

    asyncio.run(main())


def test_one_pending_future_awaited_by_several_started_coroutines():
    # A shared judgment: every metric awaiting it is started before any task has run.
    async def main() -> list[int]:
        shared = asyncio.get_running_loop().create_future()

        async def reader(i: int) -> int:
            return await shared + i

        futures = [aio.start_eagerly(reader(i)) for i in range(3)]
        asyncio.get_running_loop().call_later(0.01, shared.set_result, 10)
        return await aio.gather_or_cancel(futures)

    assert asyncio.run(main()) == [10, 11, 12]


def test_an_exception_in_the_first_step_is_the_futures():
    async def fails() -> None:
        raise ValueError("bad input")

    async def main() -> None:
        future = aio.start_eagerly(fails())
        with pytest.raises(ValueError, match="bad input"):
            await future

    asyncio.run(main())


def test_cancelling_before_the_task_runs_cancels_what_the_coroutine_waits_on():
    async def main() -> None:
        inner = asyncio.get_running_loop().create_future()

        async def waiter() -> None:
            await inner

        future = aio.start_eagerly(waiter())
        future.cancel()
        with pytest.raises(asyncio.CancelledError):
            await future
        assert inner.cancelled()  # as cancelling a task cancels the future it awaits

    asyncio.run(main())


def test_at_the_first_failure_the_others_are_cancelled_and_awaited():
    async def main() -> None:
        never = asyncio.get_running_loop().create_future()

        async def hangs() -> None:
            await never

        async def fails_later() -> None:
            await asyncio.sleep(0.01)
            raise RuntimeError("stop")

        hanging = aio.start_eagerly(hangs())
        with pytest.raises(RuntimeError, match="stop"):
            await aio.gather_or_cancel([hanging, aio.start_eagerly(fails_later())])
        assert hanging.cancelled() and never.cancelled()
        assert asyncio.all_tasks() == {asyncio.current_task()}  # nothing left running

    asyncio.run(main())


def test_the_first_step_runs_in_a_copy_of_the_callers_context():
    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller")

    async def sets_and_waits() -> str:
        seen.set("coroutine")
        await asyncio.sleep(0)
        return seen.get()  # its own context, kept across the wait

    async def main() -> None:
        future = aio.start_eagerly(sets_and_waits())
        assert seen.get() == "caller"
        assert await future == "coroutine"

    asyncio.run(main())


def test_a_metric_whose_function_has_no_module_is_scored_as_a_users():
    """A metric defined by exec() (a notebook's cell runner, a config loader) has a
    compute whose __module__ is None: judge.evaluate failed with an AttributeError."""
    import judge

    namespace: dict = {}
    exec(
        "from judge.metrics.registry import Metric, MetricScore\n"
        "async def one(judgments):\n    return MetricScore(1.0)\n"
        "metric = Metric('always_one', 'one', one)\n",
        namespace,
    )
    assert namespace["one"].__module__ is None
    llm = judge.LLM("openai/m", api_base="http://127.0.0.1:9/v1", api_key="k")
    rows = [{"question": "Q?", "answer": "A.", "contexts": ["c"]}]
    result = judge.evaluate(
        rows, metrics=[namespace["metric"]], llm=llm, cache=None, progress=False
    )
    assert result.summary["always_one"].mean == 1.0
