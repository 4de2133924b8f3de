"""Judgments stored one transaction per event-loop turn: batched, never lost, never asked twice."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from judge.cache.store import Cache, CacheEntry
from judge.cache.write_batch import WriteBatch
from judge.errors import CacheError
from judge.llm.config import LLM
from judge.llm.session import LLMSession
from judge.testing import FakeLLMServer


class Verdict(BaseModel):
    verdict: str


def echo(body: dict) -> str:
    return json.dumps({"verdict": body["messages"][-1]["content"]})


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def entry(key: str) -> CacheEntry:
    return CacheEntry(key=key, kind="chat", request={"k": key}, response={"r": key}, model="m")


def test_concurrent_judgments_share_transactions_and_all_are_stored(tmp_path):
    path = tmp_path / "c.sqlite"
    texts = [f"t{i}" for i in range(40)]
    with FakeLLMServer(chat=echo) as server, Cache(path) as cache:
        transactions = []
        put_many = cache.put_many
        cache.put_many = lambda entries: (transactions.append(len(entries)), put_many(entries))
        session = LLMSession(
            LLM("openai/m", api_base=server.base_url, api_key="k", max_concurrency=16),
            cache=cache,
        )

        async def run() -> list[list[Verdict]]:
            return await asyncio.gather(*(session.chat(ask(t), Verdict) for t in texts))

        replies = asyncio.run(run())
        assert [r[0].verdict for r in replies] == texts
        assert sum(transactions) == 40 and len(transactions) < 40
        with Cache(path) as other:  # another connection sees every judgment
            assert len(other) == 40
        again = LLMSession(session.llm, cache=cache)
        assert asyncio.run(again.chat(ask("t7"), Verdict))[0].verdict == "t7"
        assert server.count() == 40  # the rerun was answered from the file


def test_a_lone_request_is_written_before_the_call_returns(tmp_path):
    path = tmp_path / "c.sqlite"
    with FakeLLMServer(chat=echo) as server, Cache(path) as cache, Cache(path) as other:
        session = LLMSession(LLM("openai/m", api_base=server.base_url, api_key="k"), cache=cache)

        async def one() -> int:
            await session.chat(ask("alone"), Verdict)
            return len(other)  # still inside the loop: no later turn has run

        assert asyncio.run(one()) == 1


def test_a_waiting_judgment_is_answered_from_memory_then_stored(tmp_path):
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache, Cache(path) as other:
        batch = WriteBatch(cache)

        async def turns() -> None:
            batch.put(entry("a"), alone=False)
            batch.put(entry("b"), alone=False)
            assert batch.get_response("a") == {"r": "a"}  # waiting, yet found
            assert other.get_response("a") is None  # not yet in the file
            await asyncio.sleep(0)  # the next turn
            assert other.get_response("a") == {"r": "a"} and len(other) == 2

        asyncio.run(turns())


@pytest.mark.parametrize("mode", ["replay", "off"])
def test_modes_that_do_not_store_keep_nothing_waiting(tmp_path, mode):
    with Cache(tmp_path / "c.sqlite", mode=mode) as cache:
        batch = WriteBatch(cache)
        batch.put(entry("a"), alone=True)
        assert batch.get_response("a") is None
    with Cache(tmp_path / "c.sqlite") as cache:
        assert len(cache) == 0


def test_record_mode_stores_but_never_answers_from_what_waits(tmp_path):
    with Cache(tmp_path / "c.sqlite", mode="record") as cache:
        batch = WriteBatch(cache)

        async def turn() -> None:
            batch.put(entry("a"), alone=False)
            assert batch.get_response("a") is None

        asyncio.run(turn())
        cache.mode = "read-write"
        assert cache.get_response("a") == {"r": "a"}


def test_a_failed_later_write_is_raised_by_the_next_put(tmp_path):
    cache = Cache(tmp_path / "c.sqlite")
    batch = WriteBatch(cache)

    async def turns() -> None:
        batch.put(entry("a"), alone=False)
        cache.close()  # the flush of the next turn fails
        await asyncio.sleep(0)
        with pytest.raises(CacheError, match="judgments received earlier were not stored"):
            batch.put(entry("b"), alone=False)

    asyncio.run(turns())


def test_embeddings_are_stored_one_transaction_per_batch_not_per_vector(tmp_path):
    from judge.llm.config import Embeddings

    path = tmp_path / "c.sqlite"
    texts = [f"text {i}" for i in range(8)]
    with FakeLLMServer() as server, Cache(path) as cache:
        transactions = []
        put_many, put = cache.put_many, cache.put
        cache.put_many = lambda entries: (transactions.append(len(entries)), put_many(entries))
        cache.put = lambda entry: (transactions.append(1), put(entry))
        embeddings = Embeddings("openai/e", api_base=server.base_url, api_key="k", batch_size=4)
        session = LLMSession(embeddings=embeddings, cache=cache)

        async def embed_and_count() -> tuple[list[list[float]], int]:
            vectors = await session.embed(texts)
            return vectors, sum(transactions)  # what was stored when the call returned

        vectors, stored = asyncio.run(embed_and_count())
        # One transaction per event-loop turn: the two batches may land in one turn or two.
        assert stored == 8 and len(transactions) <= 2
        with Cache(path) as other:
            assert len(other) == 8
        again = LLMSession(embeddings=embeddings, cache=cache)
        assert asyncio.run(again.embed(texts)) == vectors
        assert server.count("/v1/embeddings") == 2  # two batches of 4, asked once
