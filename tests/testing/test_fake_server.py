"""judge.testing.FakeLLMServer, exercised through the real openai and litellm clients over HTTP."""

# The fixture is imported the way a user's conftest.py does; test arguments then shadow it.
# ruff: noqa: F811

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from enum import Enum
from typing import Literal

import openai
import pytest
from pydantic import BaseModel, Field

from judge.testing import (
    FakeLLMServer,
    Fault,
    Reply,
    fake_llm_server,  # noqa: F401
    hashed_embedding,
)

# litellm fetches its model cost map from GitHub at import unless told not to; tests stay offline.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


pytest_plugins = ["pytester"]  # to run a user's test session that uses the fixture

USER = [{"role": "user", "content": "Is the sky blue?"}]


def client(server: FakeLLMServer, timeout: float = 10.0) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url, api_key="sk-test-secret", max_retries=0, timeout=timeout
    )


def ask(server: FakeLLMServer, **kwargs: object) -> openai.types.chat.ChatCompletion:
    params: dict[str, object] = {"model": "fake-model", "messages": USER, **kwargs}
    return client(server, timeout=float(params.pop("timeout", 10.0))).chat.completions.create(
        **params  # type: ignore[call-overload]
    )


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_chat_completion_returns_handler_content_and_usage(fake_llm_server):
    fake_llm_server.chat = lambda body: "yes: " + body["messages"][-1]["content"]
    answer = ask(fake_llm_server)
    assert answer.choices[0].message.content == "yes: Is the sky blue?"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "fake-model"
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == math.ceil(len("Is the sky blue?") / 4)
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
    assert fake_llm_server.requests[0].body["messages"] == USER
    assert fake_llm_server.count("/v1/chat/completions") == 1


def test_n_choices_call_a_single_answer_handler_n_times(fake_llm_server):
    calls = iter(range(100))
    fake_llm_server.chat = lambda body: Reply(f"answer {next(calls)}", completion_tokens=5)
    answer = ask(fake_llm_server, n=3)
    assert [c.message.content for c in answer.choices] == ["answer 0", "answer 1", "answer 2"]
    assert [c.index for c in answer.choices] == [0, 1, 2]
    assert answer.usage is not None and answer.usage.completion_tokens == 15


def test_list_answer_gives_one_choice_each(fake_llm_server):
    fake_llm_server.chat = lambda body: ["a", Reply("b", finish_reason="length")]
    answer = ask(fake_llm_server, n=2)
    assert [(c.message.content, c.finish_reason) for c in answer.choices] == [
        ("a", "stop"),
        ("b", "length"),
    ]


def test_no_chat_handler_is_a_clear_500(fake_llm_server):
    with pytest.raises(openai.InternalServerError, match="no chat handler set"):
        ask(fake_llm_server)


def test_handler_exception_is_a_readable_500(fake_llm_server):
    fake_llm_server.chat = lambda body: body["missing"]
    with pytest.raises(openai.InternalServerError, match="KeyError"):
        ask(fake_llm_server)


def test_embeddings_default_base64_and_float(fake_llm_server):
    texts = ["the sky is blue today", "the blue sky today", "quarterly tax revenue report"]
    sdk = client(fake_llm_server)
    vectors = [d.embedding for d in sdk.embeddings.create(model="fake-model", input=texts).data]
    assert fake_llm_server.requests[0].body["encoding_format"] == "base64"  # the SDK default
    assert [len(v) for v in vectors] == [256, 256, 256]
    assert cosine(vectors[0], vectors[0]) == pytest.approx(1.0)
    assert cosine(vectors[0], vectors[1]) > 0.7 > cosine(vectors[0], vectors[2])
    floats = sdk.embeddings.create(model="m", input="the sky", encoding_format="float")
    assert floats.data[0].embedding == pytest.approx(hashed_embedding("the sky"))
    assert floats.model == "m"
    assert floats.usage.prompt_tokens == 2


def test_hashed_embedding_tokenises_cjk_and_words():
    assert hashed_embedding("Blue SKY") == hashed_embedding("sky, blue!")
    assert cosine(hashed_embedding("東京タワー"), hashed_embedding("東京駅")) > 0.3
    assert cosine(hashed_embedding("東京タワー"), hashed_embedding("大阪城")) == 0.0
    assert sum(x * x for x in hashed_embedding("")) == pytest.approx(1.0)
    assert len(hashed_embedding("x", dims=8)) == 8


def test_embeddings_reject_token_ids(fake_llm_server):
    with pytest.raises(openai.BadRequestError):
        client(fake_llm_server).embeddings.create(model="fake-model", input=[[1, 2, 3]])


def test_models_endpoint(fake_llm_server):
    assert [m.id for m in client(fake_llm_server).models.list()] == ["fake-model"]


def test_litellm_completion_and_embedding(fake_llm_server):
    import litellm

    fake_llm_server.chat = lambda body: "from litellm"
    reply = litellm.completion(
        model="openai/fake-model",
        api_base=fake_llm_server.base_url,
        api_key="sk-test",
        messages=USER,
    )
    assert reply.choices[0].message.content == "from litellm"
    embedded = litellm.embedding(
        model="openai/fake-model",
        api_base=fake_llm_server.base_url,
        api_key="sk-test",
        input=["blue sky", "red sun"],
    )
    assert [len(d["embedding"]) for d in embedded.data] == [256, 256]
    # litellm bypasses the SDK's base64 default and asks for plain floats.
    assert "encoding_format" not in fake_llm_server.requests[-1].body
    assert fake_llm_server.count() == 2


def test_litellm_rate_limit_maps_to_its_exception(fake_llm_server):
    import litellm

    fake_llm_server.fail_next(Fault.status(429, "slow down", retry_after=1))
    with pytest.raises(litellm.RateLimitError):
        litellm.completion(
            model="openai/fake-model",
            api_base=fake_llm_server.base_url,
            api_key="sk-test",
            messages=USER,
            max_retries=0,
        )
    assert fake_llm_server.count() == 1


def test_status_faults_map_to_openai_exceptions(fake_llm_server):
    fake_llm_server.chat = lambda body: "fine"
    fake_llm_server.fail_next(
        Fault.status(429, "rate limited", retry_after=1),
        Fault.status(500),
        Fault.status(401, "invalid api key"),
        Fault.status(404, "no such model"),
    )
    with pytest.raises(openai.RateLimitError) as rate:
        ask(fake_llm_server)
    assert rate.value.response.headers["retry-after"] == "1"
    assert rate.value.body["type"] == "rate_limit_error"  # type: ignore[index]
    with pytest.raises(openai.InternalServerError):
        ask(fake_llm_server)
    with pytest.raises(openai.AuthenticationError, match="invalid api key"):
        ask(fake_llm_server)
    with pytest.raises(openai.NotFoundError):
        ask(fake_llm_server)
    assert ask(fake_llm_server).choices[0].message.content == "fine"
    assert fake_llm_server.count("/v1/chat/completions") == 5


def test_faults_are_consumed_in_order_then_answers_resume(fake_llm_server):
    fake_llm_server.chat = lambda body: '{"claims": ["the sky is blue"]}'
    fake_llm_server.fail_next(Fault.malformed(), Fault.truncated())
    malformed = ask(fake_llm_server).choices[0]
    with pytest.raises(json.JSONDecodeError):
        json.loads(malformed.message.content or "")
    assert malformed.finish_reason == "stop"
    truncated = ask(fake_llm_server).choices[0]
    assert truncated.finish_reason == "length"
    assert truncated.message.content == '{"claims": ["the sky is blue"]}'[:15]
    assert json.loads(ask(fake_llm_server).choices[0].message.content or "") == {
        "claims": ["the sky is blue"]
    }
    assert fake_llm_server.count() == 3


def test_delay_beyond_client_timeout_raises_timeout(fake_llm_server):
    fake_llm_server.chat = lambda body: "late"
    fake_llm_server.fail_next(Fault.delay(2))
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        ask(fake_llm_server, timeout=0.5)
    assert time.monotonic() - started < 1.5
    assert ask(fake_llm_server).choices[0].message.content == "late"


def test_disconnect_and_broken_body(fake_llm_server):
    fake_llm_server.chat = lambda body: "ok"
    fake_llm_server.fail_next(Fault.disconnect(), Fault.broken_body())
    with pytest.raises(openai.APIConnectionError):
        ask(fake_llm_server)
    # The SDK lets the JSON decoding error of a non-JSON 200 body escape unwrapped.
    with pytest.raises(ValueError):
        ask(fake_llm_server)
    assert ask(fake_llm_server).choices[0].message.content == "ok"


def test_faults_target_one_path(fake_llm_server):
    fake_llm_server.chat = lambda body: "ok"
    fake_llm_server.fail_next(Fault.status(429), path="/v1/embeddings")
    assert ask(fake_llm_server).choices[0].message.content == "ok"
    with pytest.raises(openai.RateLimitError):
        client(fake_llm_server).embeddings.create(model="fake-model", input="x")
    fake_llm_server.fail_next(Fault.status(500), Fault.status(500))
    fake_llm_server.reset()
    assert fake_llm_server.count() == 0
    assert ask(fake_llm_server).choices[0].message.content == "ok"


def test_llama_cpp_rejects_json_schema_response_format(fake_llm_server):
    fake_llm_server.chat = lambda body: "{}"
    fake_llm_server.reject_response_format = {"json_schema"}
    schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    with pytest.raises(openai.InternalServerError) as rejected:
        ask(fake_llm_server, response_format=schema)
    assert rejected.value.response.json() == {
        "error": {
            "code": 500,
            "message": "Input should be 'text' or 'json_object'",
            "type": "server_error",
        }
    }
    answer = ask(fake_llm_server, response_format={"type": "json_object"})
    assert answer.choices[0].message.content == "{}"


def test_api_keys_are_never_recorded(fake_llm_server):
    fake_llm_server.chat = lambda body: "ok"
    ask(fake_llm_server)
    client(fake_llm_server).embeddings.create(model="fake-model", input="x")
    headers = fake_llm_server.requests[0].headers
    assert headers["authorization"] == "<redacted>"
    assert "sk-test-secret" not in repr(fake_llm_server.requests)


class Verdict(str, Enum):
    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"


class Claim(BaseModel):
    text: str
    verdict: Verdict
    confidence: float = Field(ge=0.5, le=1)
    sources: list[int]
    note: str | None = None


class Judgement(BaseModel):
    claims: list[Claim] = Field(min_length=2)
    score: int = Field(gt=0)
    kind: Literal["faithfulness", "relevance"]
    ok: bool


def test_schema_echo_answers_valid_json_for_response_format(fake_llm_server):
    fake_llm_server.chat = FakeLLMServer.schema_echo
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "judgement", "schema": Judgement.model_json_schema()},
    }
    content = ask(fake_llm_server, response_format=fmt).choices[0].message.content
    judgement = Judgement.model_validate_json(content or "")
    assert judgement.claims[0].verdict is Verdict.SUPPORTED
    assert (judgement.score, judgement.kind, judgement.ok) == (1, "faithfulness", False)


def test_schema_echo_reads_schema_from_the_prompt(fake_llm_server):
    fake_llm_server.chat = FakeLLMServer.schema_echo
    schema = json.dumps(Judgement.model_json_schema(), indent=2)
    messages = [
        {"role": "system", "content": f"Answer with JSON.\nJSON schema:\n{schema}\nNo prose."},
        {"role": "user", "content": "Judge {this} answer."},
    ]
    answer = ask(fake_llm_server, messages=messages, response_format={"type": "json_object"})
    Judgement.model_validate_json(answer.choices[0].message.content or "")
    assert FakeLLMServer.schema_echo({"messages": USER}) == "{}"


def test_slow_request_blocks_neither_others_nor_stop():
    server = FakeLLMServer(chat=lambda body: "ok").start()
    server.fail_next(Fault.delay(30))
    errors: list[BaseException] = []

    def slow() -> None:
        try:
            ask(server, timeout=60)
        except openai.APIConnectionError as exc:
            errors.append(exc)

    pending = threading.Thread(target=slow)
    pending.start()
    while server.count() == 0:
        time.sleep(0.01)
    assert ask(server, timeout=2).choices[0].message.content == "ok"
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1.0
    pending.join(timeout=5)
    assert not pending.is_alive() and len(errors) == 1
    with pytest.raises(RuntimeError, match="not started"):
        server.base_url  # noqa: B018


def test_latency_is_added_to_every_response():
    with FakeLLMServer(chat=lambda body: "ok") as server:
        server.latency = 0.2
        started = time.monotonic()
        ask(server)
        assert time.monotonic() - started >= 0.2


def test_importing_judge_testing_loads_no_client_or_pytest():
    code = (
        "import sys, judge.testing\n"
        "print(sorted(m for m in ('litellm', 'openai', 'pytest') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr


def test_fixture_works_from_a_users_conftest(pytester, monkeypatch):
    pytester.makeconftest("from judge.testing import fake_llm_server  # noqa: F401\n")
    pytester.makepyfile(
        """
        import urllib.request

        def test_user(fake_llm_server):
            with urllib.request.urlopen(fake_llm_server.base_url + "/models") as reply:
                assert b"fake-model" in reply.read()
        """
    )
    # Third-party plugins are not needed and cost seconds of import in the inner session.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
