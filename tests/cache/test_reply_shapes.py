"""A recorded reply of the wrong shape (a hand-edited export imported with `judge cache
import`: its checksum is right, its content is not a chat reply) is not served and never
crashes the run: asked again in a read-write run, a CacheMiss in a replay."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel

from judge.aio import run_sync
from judge.cache.store import Cache
from judge.errors import CacheMiss
from judge.llm.config import LLM
from judge.llm.session import LLMSession
from judge.testing import FakeLLMServer


class Verdict(BaseModel):
    verdict: str


def ask(server: FakeLLMServer, cache: Cache) -> str:
    llm = LLM("openai/m", api_base=server.base_url, api_key="k", cache_as="fake")
    session = LLMSession(llm, cache=cache, memo_bytes=0)

    async def go() -> str:
        try:
            (reply,) = await session.chat([{"role": "user", "content": "Is it?"}], Verdict)
            return reply.verdict
        finally:
            await session.aclose()

    return run_sync(go())


@pytest.mark.parametrize("shape", [{}, {"choices": 5}, {"choices": [5]}, [1], "text"])
def test_a_reply_of_another_shape_is_asked_again_or_a_miss(tmp_path, shape: Any):
    path = tmp_path / "c.sqlite"
    with FakeLLMServer(chat=lambda body: json.dumps({"verdict": "yes"})) as server:
        with Cache(path) as cache:
            assert ask(server, cache) == "yes"
            (entry,) = list(cache.entries())
            cache.put(replace(entry, response=shape))  # stored whole, checksum and all
        with Cache(path, mode="replay") as cache, pytest.raises(CacheMiss, match="current checks"):
            ask(server, cache)
        before = server.count()
        with Cache(path) as cache:
            assert ask(server, cache) == "yes"  # asked again...
        assert server.count() == before + 1
        with Cache(path, mode="replay") as cache:
            assert ask(server, cache) == "yes"  # ...and stored again
