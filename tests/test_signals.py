"""SIGTERM as `Terminated`: a stopped run unwinds without printing tracebacks of its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_task_that_dies_of_terminated_leaves_no_traceback_on_stderr() -> None:
    # What a shard stopped by its parent does when SIGTERM lands inside a task's step: the
    # task keeps the exception, the loop stops, and at collection asyncio used to log
    # "Task exception was never retrieved" with a traceback (seen under load in the suite).
    script = textwrap.dedent(
        """
        import asyncio, gc
        from judge.signals import Terminated, raise_on_sigterm

        raise_on_sigterm()

        async def dies():
            raise Terminated

        async def main():
            asyncio.ensure_future(dies())
            await asyncio.sleep(1)

        try:
            asyncio.run(main())
        except Terminated:
            pass
        gc.collect()

        async def other():
            raise ValueError("a real failure")

        async def keeps():
            asyncio.ensure_future(other())
            await asyncio.sleep(0.01)

        asyncio.run(keeps())
        gc.collect()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Terminated" not in done.stderr, done.stderr
    assert "ValueError: a real failure" in done.stderr  # other failures are still logged
