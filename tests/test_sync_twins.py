"""judge.aio.sync_twin: a sync function made from its async twin, with the same parameters,
docstring and types, that also runs inside a running event loop (Jupyter's)."""

from __future__ import annotations

import asyncio
import importlib
import inspect

import pytest

from judge.aio import sync_twin
from judge.errors import JudgeError


class Boom(Exception):
    pass


async def aadd(x: int, y: int = 1, *, scale: int = 1) -> int:
    """Add, then scale.

    Args:
        x: the first term.
    """
    await asyncio.sleep(0)
    return (x + y) * scale


add = sync_twin(aadd)
RAISED = Boom("the very one")


async def araise() -> None:
    await asyncio.sleep(0)
    raise RAISED


raise_ = sync_twin(araise)


def test_the_twin_has_the_async_functions_signature_docstring_and_its_own_name():
    assert inspect.signature(add) == inspect.signature(aadd)
    assert add.__doc__ == aadd.__doc__ and "Args:" in (add.__doc__ or "")
    assert add.__name__ == "add" and add.__qualname__ == "add"
    assert add.__module__ == __name__ and add.__wrapped__ is aadd  # type: ignore[attr-defined]
    assert not inspect.iscoroutinefunction(add)


def test_the_twin_runs_the_coroutine_to_its_result():
    assert add(2) == 3
    assert add(2, 3, scale=2) == 10
    with pytest.raises(TypeError):
        add(2, 3, 4)  # type: ignore[misc]  # scale is keyword-only, as in aadd


def test_the_twin_works_inside_a_running_event_loop():
    async def notebook_cell() -> int:
        asyncio.get_running_loop()  # a loop runs here, as in Jupyter
        return add(1, 1)

    assert asyncio.run(notebook_cell()) == 2


def test_an_exception_propagates_unchanged_outside_and_inside_a_loop():
    with pytest.raises(Boom) as outside:
        raise_()
    assert outside.value is RAISED

    async def cell() -> None:
        raise_()

    with pytest.raises(Boom) as inside:
        asyncio.run(cell())
    assert inside.value is RAISED


def test_only_an_async_def_named_a_something_has_a_twin():
    def plain() -> int:
        return 1

    async def nameless() -> int:
        return 1

    with pytest.raises(JudgeError, match="async def"):
        sync_twin(plain)  # type: ignore[arg-type]
    with pytest.raises(JudgeError, match="starts with 'a'"):
        sync_twin(nameless)


# module, sync name: every public sync function of judge made by sync_twin.
TWINS = [
    ("judge.run.score", "score"),
    ("judge.run.dry_run", "dry_run"),
    ("judge.labels.agreement", "agreement"),
    ("judge.probes.probe", "probe"),
    ("judge.testset.build", "build"),
    ("judge.testset.mine", "mine"),
]


@pytest.mark.parametrize(("module", "name"), TWINS)
def test_the_public_twins_share_signature_and_docstring(module, name):
    found = importlib.import_module(module)
    sync, async_ = getattr(found, name), getattr(found, "a" + name)
    assert inspect.iscoroutinefunction(async_) and not inspect.iscoroutinefunction(sync)
    assert sync.__wrapped__ is async_
    assert inspect.signature(sync) == inspect.signature(async_)
    assert sync.__doc__ == async_.__doc__ and "Returns:" in (sync.__doc__ or "")
    assert sync.__name__ == name and sync.__module__ == module  # picklable by its name
