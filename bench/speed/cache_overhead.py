"""Overhead of a cached judge call: key, SQLite lookup, JSON decode, pydantic validation.

Fills a cache with 100,000 recorded judgments (a claim-verification verdict list of 5
items each), then replays N of them through `LLMSession.chat` in replay mode (so nothing
can reach the network) and prints microseconds per call. Target (issue 3): < 100 us.

Run: python -m bench.speed.cache_overhead [--entries 100000] [--calls 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from judge.cache.identity import server_identity
from judge.cache.store import Cache, CacheEntry, cache_key
from judge.llm.config import LLM, PromptRef
from judge.llm.session import LLMSession
from judge.llm.structured import schema_of


class Verdict(BaseModel):
    claim: str
    verdict: Literal["supported", "contradicted", "not_found"]
    reason: str
    context: int | None


class Verdicts(BaseModel):
    verdicts: list[Verdict]


LLM_CONFIG = LLM(model="openai/bench-model", api_base="http://127.0.0.1:9/v1")
PROMPT = PromptRef("verify", "0" * 16)


def messages(i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You verify claims against contexts. " * 20},
        {"role": "user", "content": f"Question {i}: ... contexts ... claims ... " * 10},
    ]


def material(i: int) -> dict:
    return {
        "kind": "chat",
        "server": server_identity(LLM_CONFIG.model, LLM_CONFIG.api_base, LLM_CONFIG.cache_as),
        "model": LLM_CONFIG.model,
        "messages": messages(i),
        "schema": schema_of(Verdicts),
        "n": 1,
        "temperature": 0.0,
        "seed": None,
        "max_tokens": None,
        "prompt": PROMPT.name,
        "prompt_version": PROMPT.version,
    }


def fill(cache: Cache, entries: int) -> None:
    reply = {
        "verdicts": [
            {"claim": f"claim {j}", "verdict": "supported", "reason": "stated", "context": j}
            for j in range(5)
        ]
    }
    batch = []
    for i in range(entries):
        m = material(i)
        batch.append(
            CacheEntry(
                key=cache_key(m),
                kind="chat",
                request=m,
                response={"choices": [reply]},
                model=LLM_CONFIG.model,
                prompt=PROMPT.name,
                prompt_version=PROMPT.version,
            )
        )
        if len(batch) == 5000:
            cache._write(batch)
            batch = []
    if batch:
        cache._write(batch)


async def replay(session: LLMSession, calls: int, entries: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        (result,) = await session.chat(messages(i * 7919 % entries), Verdicts, prompt=PROMPT)
        assert len(result.verdicts) == 5
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        start = time.perf_counter()
        with Cache(path) as cache:
            fill(cache, args.entries)
        size = path.stat().st_size + sum(p.stat().st_size for p in Path(tmp).glob("*-wal"))
        print(
            f"filled {args.entries:,} judgments in {time.perf_counter() - start:.1f} s "
            f"({size / 2**20:.0f} MiB)"
        )
        with Cache(path, mode="replay") as cache:
            session = LLMSession(LLM_CONFIG, cache=cache)
            asyncio.run(replay(session, 100, args.entries))  # warm-up
            seconds = asyncio.run(replay(session, args.calls, args.entries))
        per_call = seconds / args.calls * 1e6
        print(
            f"cached call overhead: {per_call:.1f} us per call over {args.calls:,} calls "
            f"(target < 100 us)"
        )


if __name__ == "__main__":
    main()
