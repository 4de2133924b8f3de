"""judge.testset on the project's conventions: its sync functions work inside a running
event loop (Jupyter's), a configuration error stops every call in flight before it is
raised, failed calls map to rejections in one place, and its modules import one another
without a circle."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

import judge.testset
from judge.llm.config import LLM
from judge.testing import FakeLLMServer
from judge.testset import build, load_corpus, mine
from tests.helpers.testset import Script, write_corpus


def llm_of(server: FakeLLMServer) -> LLM:
    return LLM(model="openai/fake", api_base=server.base_url, api_key="sk-test", max_retries=0)


def test_build_and_mine_work_inside_a_running_event_loop(tmp_path):
    corpus = load_corpus(write_corpus(tmp_path / "docs"), chunk_size=300)

    async def notebook_cell():
        asyncio.get_running_loop()  # a loop runs here, as in Jupyter
        with FakeLLMServer(chat=Script()) as server:
            built = build(corpus, llm=llm_of(server), n=2, mix="single_hop=1")
            mined = mine(["ferry day pass price"], corpus, llm=llm_of(server), n=1)
        return built, mined

    built, mined = asyncio.run(notebook_cell())
    assert len(built.items) == 2 and not built.shortfall
    assert [i.question for i in mined.items] == ["ferry day pass price"]


@pytest.mark.parametrize("maker", ["build", "mine"])
def test_a_configuration_error_stops_the_other_calls_before_the_session_closes(
    tmp_path, monkeypatch, maker
):
    from judge.errors import LLMConfigError
    from judge.llm.session import LLMSession
    from judge.testing import Fault
    from judge.testset import abuild, amine

    corpus = load_corpus(write_corpus(tmp_path / "docs"), chunk_size=300)
    running_at_close: list[int] = []
    aclose = LLMSession.aclose

    async def spying_aclose(self: LLMSession) -> None:
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        running_at_close.append(sum(not t.done() for t in others))
        await aclose(self)

    monkeypatch.setattr(LLMSession, "aclose", spying_aclose)

    async def run(server: FakeLLMServer) -> None:
        llm = llm_of(server)
        with pytest.raises(LLMConfigError):
            if maker == "build":
                await abuild(corpus, llm=llm, n=3, mix="single_hop=1")
            else:
                await amine(["ferry pass", "library year", "tea water"], corpus, llm=llm, n=3)

    with FakeLLMServer(chat=Script()) as server:
        server.fail_next(Fault.status(401, "bad key"), Fault.delay(1.0), Fault.delay(1.0))
        asyncio.run(run(server))
    # The other calls were cancelled and unwound before the build closed its connections:
    # none ran on against a closing session, to fail with a spurious error of its own.
    assert running_at_close == [0]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("InvalidOutputError", "invalid_output"),
        ("TruncatedOutputError", "invalid_output"),
        ("LLMCallError", "llm_error"),
        ("ContextWindowError", "too_long"),
    ],
)
def test_one_mapping_turns_a_failed_call_into_its_questions_rejection(error, reason):
    from judge import errors
    from judge.testset.failures import CallFailed, settle

    kind = getattr(errors, error)
    extra = {"raw": "{", "error": "not JSON"} if issubclass(kind, errors.InvalidOutputError) else {}

    async def failing() -> int:
        raise kind("what went wrong", **extra)

    assert asyncio.run(settle(failing())) == CallFailed(reason, "what went wrong")


def test_other_errors_pass_through_the_mapping():
    from judge.errors import LLMConfigError
    from judge.testset.failures import settle

    async def refused() -> int:
        raise LLMConfigError("bad key")

    async def fine() -> int:
        return 7

    with pytest.raises(LLMConfigError):
        asyncio.run(settle(refused()))
    assert asyncio.run(settle(fine())) == 7


def modules_imported(path: Path, names: set[str]) -> set[str]:
    """The judge.testset modules a module imports anywhere (functions and TYPE_CHECKING
    blocks included: a type-only import is a circle too, for the reader)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("judge.testset."):
                found.add(node.module.removeprefix("judge.testset."))
            elif node.module == "judge.testset":
                found.update(a.name for a in node.names if a.name in names)
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("judge.testset.")
                for a in node.names
                if a.name.startswith("judge.testset.")
            )
    return found & names - {path.stem}


def test_the_testset_modules_import_one_another_without_a_circle():
    folder = Path(judge.testset.__file__).parent
    paths = {p.stem: p for p in folder.glob("*.py") if p.stem != "__init__"}
    graph = {name: modules_imported(path, set(paths)) for name, path in paths.items()}
    circles: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:  # depth first; "open": on the trail
        state[name] = "open"
        for other in sorted(graph[name]):
            if state.get(other) == "open":
                circles.append([*trail[trail.index(other) :], other])
            elif other not in state:
                visit(other, [*trail, other])
        state[name] = "done"

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not circles, circles
