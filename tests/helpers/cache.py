"""Cache entries made up on the spot, the committed format-1 cache, and one judgment asked
through an LLMSession: what the cache tests, the fallbacks' and the Ray actors' share."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from judge.aio import run_sync
from judge.cache.store import CacheEntry, cache_key
from judge.llm.config import LLM, PromptRef
from judge.llm.session import LLMSession
from judge.testing import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
V1_CACHE = ROOT / "fixtures" / "cache-v1" / "cache.sqlite"
MODEL = "openai/judge-fixture"  # the model names of fixtures/cache-v1/make_v1_cache.py
PROMPT = PromptRef("yes-no", "v1")


def entry(i: int, answer: str = "yes") -> CacheEntry:
    request = {
        "kind": "chat",
        "server": "s",
        "model": "m",
        "messages": [{"role": "user", "content": f"q{i}"}],
    }
    return CacheEntry(
        key=cache_key(request),
        kind="chat",
        request=request,
        response={"choices": [{"verdict": answer, "n": i}]},
        model="m",
        prompt="verify",
        prompt_version="abc",
        mode="json_schema",
        usage={"prompt_tokens": 3},
        created=1.5,
    )


class Verdict(BaseModel):
    verdict: str


def messages(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Answer yes or no."},
        {"role": "user", "content": question},
    ]


def says(verdict: str) -> Any:
    return lambda body: json.dumps({"verdict": verdict})


def ask(session: LLMSession, question: str) -> str:
    """One judgment through the session (closing its clients on the loop that made them)."""

    async def go() -> str:
        try:
            (reply,) = await session.chat(messages(question), Verdict, prompt=PROMPT)
            return reply.verdict
        finally:
            await session.aclose()

    return run_sync(go())


def llm(server: FakeLLMServer | None, **settings: Any) -> LLM:
    return LLM(MODEL, api_base=server.base_url if server else None, api_key="k", **settings)


def v1_copy(tmp_path: Path) -> Path:
    path = tmp_path / "v1.sqlite"
    shutil.copyfile(V1_CACHE, path)
    return path
