"""judge.testset on the project's conventions: its sync functions work inside a running
event loop (Jupyter's)."""

from __future__ import annotations

import asyncio

from judge.llm.config import LLM
from judge.testing import FakeLLMServer
from judge.testset import build, load_corpus, mine
from tests.testset_fakes import Script, write_corpus


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
