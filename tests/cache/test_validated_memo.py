"""A repeated request of a built-in judge is served from the run's memory as validated
replies (its model validators do not run again); a custom judge's replies are validated,
made anew, on every request, since its code may change what it gets."""

from __future__ import annotations

import json

from pydantic import BaseModel, model_validator

from judge.aio import run_sync
from judge.cache.store import Cache
from judge.llm.config import LLM
from judge.llm.session import LLMSession
from judge.metrics import judges
from judge.testing import FakeLLMServer

MESSAGES = [{"role": "user", "content": "Split it."}]
validations = []


class Custom(BaseModel):
    claims: list[str]

    @model_validator(mode="after")
    def _counted(self) -> Custom:
        validations.append(self)
        return self


def replies_of(server: FakeLLMServer, cache: Cache, output: type[BaseModel], times: int) -> list:
    llm = LLM("openai/m", api_base=server.base_url, api_key="k", cache_as="fake")
    session = LLMSession(llm, cache=cache)

    async def go() -> list:
        try:
            return [(await session.chat(MESSAGES, output))[0] for _ in range(times)]
        finally:
            await session.aclose()

    return run_sync(go())


def test_a_built_in_judge_s_repeated_reply_is_validated_once(tmp_path, monkeypatch):
    counted = []
    numbered = judges._numbered
    monkeypatch.setattr(
        judges, "_numbered", lambda *args: (counted.append(args), numbered(*args))[1]
    )
    output = judges._sized(judges._GradeList, "contexts", judges.ContextGrade, 1)
    reply = {"contexts": [{"context": 0, "reason": "It says so.", "grade": 3}]}
    with FakeLLMServer(chat=lambda body: json.dumps(reply)) as server:
        with Cache(tmp_path / "c.sqlite") as cache:
            replies_of(server, cache, output, 1)  # recorded
        counted.clear()
        with Cache(tmp_path / "c.sqlite", mode="replay") as cache:
            got = replies_of(server, cache, output, 3)
    assert len(counted) == 1  # the first replayed request's validation only
    assert [r.model_dump() for r in got] == [reply] * 3


def test_a_custom_judge_s_replies_are_validated_and_made_anew_every_time(tmp_path):
    with FakeLLMServer(chat=lambda body: json.dumps({"claims": ["a"]})) as server:
        with Cache(tmp_path / "c.sqlite") as cache:
            replies_of(server, cache, Custom, 1)
        validations.clear()
        with Cache(tmp_path / "c.sqlite", mode="replay") as cache:
            got = replies_of(server, cache, Custom, 3)
    assert len(validations) == 3
    got[0].claims.append("changed by the judge's code")
    assert got[1].claims == ["a"] and got[2].claims == ["a"]
