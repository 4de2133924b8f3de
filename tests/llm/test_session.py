"""The LLM boundary through the real HTTP path: litellm talking to the fake server."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from pydantic import BaseModel

from judge.aio import run_sync
from judge.cache.store import Cache
from judge.errors import (
    CacheMiss,
    ContextWindowError,
    InvalidOutputError,
    LLMCallError,
    LLMConfigError,
    LLMRequestError,
    TruncatedOutputError,
)
from judge.llm.config import LLM, Embeddings, PromptRef
from judge.llm.session import LLMSession
from judge.testing import FakeLLMServer, Fault
from judge.testing.replies import hashed_embeddings

SECRET = "sk-test-SECRET-0123456789"
MESSAGES = [
    {"role": "system", "content": "Split the answer into claims."},
    {"role": "user", "content": "Paris is the capital of France and has 2 million people."},
]
PROMPT = PromptRef("claims", "v1")


class Claims(BaseModel):
    claims: list[str]


def claims_handler(body: dict) -> str:
    return json.dumps({"claims": ["Paris is the capital of France.", "Paris has 2M people."]})


def make_llm(server: FakeLLMServer, **overrides) -> LLM:
    settings = {
        "model": "openai/fake-model",
        "api_base": server.base_url,
        "api_key": SECRET,
        "timeout": 5.0,
        "max_retries": 3,
    }
    settings.update(overrides)
    return LLM(**settings)


def chat(session: LLMSession, messages=MESSAGES, **kwargs) -> list[Claims]:
    return run_sync(session.chat(messages, Claims, prompt=PROMPT, label="claims", **kwargs))


def chat_bodies(server: FakeLLMServer) -> list[dict]:
    return [r.body for r in server.requests if r.path.endswith("/chat/completions")]


def test_json_schema_mode_returns_validated_output(fake_llm_server):
    fake_llm_server.chat = claims_handler
    session = LLMSession(make_llm(fake_llm_server))
    (reply,) = chat(session)
    assert reply.claims == ["Paris is the capital of France.", "Paris has 2M people."]
    (body,) = chat_bodies(fake_llm_server)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == Claims.model_json_schema()
    assert body["temperature"] == 0 and body["messages"] == MESSAGES
    usage = session.usage.of("claims")
    assert usage.requests == 1 and usage.prompt_tokens > 0 and usage.cost is None  # unpriced


def test_rejected_json_schema_falls_back_and_is_remembered(fake_llm_server):
    fake_llm_server.chat = claims_handler
    fake_llm_server.reject_response_format = {"json_schema"}  # as llama.cpp's server does
    session = LLMSession(make_llm(fake_llm_server))
    assert chat(session)[0].claims
    first, second = chat_bodies(fake_llm_server)
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {
        "type": "json_object",
        "schema": Claims.model_json_schema(),
    }
    assert "JSON schema" in second["messages"][0]["content"]  # the schema is in the prompt too
    assert session.mode == "json_object_schema"
    other = [MESSAGES[0], {"role": "user", "content": "Another answer."}]
    chat(session, messages=other)
    assert chat_bodies(fake_llm_server)[2]["response_format"]["type"] == "json_object"
    assert fake_llm_server.count() == 3  # no second rejection: the mode was remembered


def test_server_without_any_response_format_gets_the_schema_in_the_prompt(fake_llm_server):
    fake_llm_server.chat = claims_handler
    fake_llm_server.reject_response_format = {"json_schema", "json_object"}
    session = LLMSession(make_llm(fake_llm_server))
    assert chat(session)[0].claims
    last = chat_bodies(fake_llm_server)[-1]
    assert "response_format" not in last and session.mode == "prompt"
    assert '"claims"' in last["messages"][0]["content"]


def test_reask_recovers_from_one_malformed_reply(fake_llm_server):
    fake_llm_server.chat = claims_handler
    fake_llm_server.fail_next(Fault.malformed())
    session = LLMSession(make_llm(fake_llm_server))
    assert chat(session)[0].claims
    first, second = chat_bodies(fake_llm_server)
    assert first["messages"] == MESSAGES
    assert second["messages"][: len(MESSAGES)] == MESSAGES
    assert second["messages"][-2]["role"] == "assistant"
    assert "could not be used" in second["messages"][-1]["content"]
    assert session.usage.of("claims").reasks == 1


def test_reask_limit_raises_with_raw_output(fake_llm_server):
    fake_llm_server.chat = lambda body: 'Sure! {"claims": "not a list"}'
    session = LLMSession(make_llm(fake_llm_server, max_reasks=2))
    with pytest.raises(InvalidOutputError) as info:
        chat(session)
    assert info.value.raw == 'Sure! {"claims": "not a list"}'
    assert "claims" in info.value.error and "after 2 re-asks" in str(info.value)
    assert fake_llm_server.count() == 3


def test_truncated_output_is_reported_as_such(fake_llm_server):
    fake_llm_server.chat = claims_handler
    fake_llm_server.fail_next(Fault.truncated(), Fault.truncated())
    session = LLMSession(make_llm(fake_llm_server, max_reasks=1))
    with pytest.raises(TruncatedOutputError, match="max_tokens"):
        chat(session)


def test_tolerant_extraction_of_fenced_json_with_prose(fake_llm_server):
    fake_llm_server.chat = lambda body: 'Here you go:\n```json\n{"claims": ["x"]}\n```\nDone.'
    assert chat(LLMSession(make_llm(fake_llm_server)))[0].claims == ["x"]
    assert fake_llm_server.count() == 1


@pytest.mark.parametrize(
    "fault",
    [
        Fault.status(429, retry_after=0.8),
        Fault.status(500),
        Fault.status(503),
        Fault.disconnect(),
        Fault.broken_body(),
    ],
    ids=["429", "500", "503", "disconnect", "broken-body"],
)
def test_transient_faults_are_retried(fake_llm_server, fault):
    fake_llm_server.chat = claims_handler
    fake_llm_server.fail_next(fault)
    session = LLMSession(make_llm(fake_llm_server))
    start = time.monotonic()
    assert chat(session)[0].claims
    assert fake_llm_server.count() == 2  # one failure, one success: no SDK retry on top
    assert session.usage.of("claims").retries == 1
    if fault.retry_after:  # honoured: the backoff of a first retry is at most 0.5 s
        assert time.monotonic() - start >= 0.8


def test_timeouts_are_retried(fake_llm_server):
    fake_llm_server.chat = claims_handler
    fake_llm_server.fail_next(Fault.delay(3))
    session = LLMSession(make_llm(fake_llm_server, timeout=0.5))
    start = time.monotonic()
    assert chat(session)[0].claims
    assert time.monotonic() - start < 2.5
    assert fake_llm_server.count() == 2


def test_retries_give_up_with_a_clear_error(fake_llm_server):
    fake_llm_server.chat = claims_handler
    fake_llm_server.fail_next(*[Fault.status(500)] * 3)
    session = LLMSession(make_llm(fake_llm_server, max_retries=2))
    with pytest.raises(LLMCallError, match="gave up after 3 attempts"):
        chat(session)
    assert fake_llm_server.count() == 3


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (401, r"the API key was refused \(HTTP 401: .*\): set OPENAI_API_KEY or pass api_key="),
        (403, r"may not use this model \(HTTP 403: .*\): check the key's permissions"),
        (404, r"no such model at http://127.0.0.1:\d+/v1 \(HTTP 404: .*\): check the model name"),
    ],
)
def test_configuration_errors_fail_at_once_on_one_line(fake_llm_server, status, hint):
    fake_llm_server.chat = claims_handler
    fake_llm_server.fail_next(Fault.status(status, message=f"bad key {SECRET}\nsecond line"))
    session = LLMSession(make_llm(fake_llm_server))
    with pytest.raises(LLMConfigError, match=hint) as info:
        chat(session)
    assert fake_llm_server.count() == 1
    message = str(info.value)
    assert message.startswith("claims (openai/fake-model): ") and "\n" not in message
    assert "bad key <redacted> second line" in message and SECRET not in message


def test_other_refusals_are_not_configuration_errors(fake_llm_server):
    fake_llm_server.chat = claims_handler
    fake_llm_server.fail_next(Fault.status(400, message="this one request is bad"))
    session = LLMSession(make_llm(fake_llm_server))
    with pytest.raises(LLMRequestError, match="refused; it is not retried") as info:
        chat(session)
    assert not isinstance(info.value, LLMConfigError) and fake_llm_server.count() == 1


def test_read_write_cache_makes_a_second_run_free(fake_llm_server, tmp_path):
    fake_llm_server.chat = claims_handler
    with Cache(tmp_path / "cache.sqlite") as cache:
        first = chat(LLMSession(make_llm(fake_llm_server), cache=cache))
    with Cache(tmp_path / "cache.sqlite") as cache:
        session = LLMSession(make_llm(fake_llm_server), cache=cache)
        assert chat(session) == first
        assert session.usage.of("claims").cache_hits == 1
    assert fake_llm_server.count() == 1


def test_replay_after_fallback_and_reask_makes_no_request(fake_llm_server, tmp_path):
    fake_llm_server.chat = claims_handler
    fake_llm_server.reject_response_format = {"json_schema"}
    fake_llm_server.fail_next(Fault.malformed())
    with Cache(tmp_path / "c.sqlite") as cache:
        recorded = chat(LLMSession(make_llm(fake_llm_server), cache=cache))
        (entry,) = cache.entries()
        assert entry.mode == "json_object_schema" and entry.prompt_version == "v1"
    made = fake_llm_server.count()
    with Cache(tmp_path / "c.sqlite", mode="replay") as cache:
        assert chat(LLMSession(make_llm(fake_llm_server), cache=cache)) == recorded
    assert fake_llm_server.count() == made


def test_replay_miss_fails_clearly_without_a_request(fake_llm_server, tmp_path):
    fake_llm_server.chat = claims_handler
    with Cache(tmp_path / "c.sqlite", mode="replay") as cache:
        session = LLMSession(make_llm(fake_llm_server), cache=cache)
        with pytest.raises(CacheMiss, match="no recorded judgment of 'claims' for sample 's7'"):
            chat(session, sample="s7")
    assert fake_llm_server.count() == 0


def test_cache_key_follows_what_changes_the_output(fake_llm_server, tmp_path):
    fake_llm_server.chat = claims_handler
    with Cache(tmp_path / "c.sqlite") as cache:
        chat(LLMSession(make_llm(fake_llm_server), cache=cache))
        # Not in the key: api key, timeout, retries, concurrency.
        same = make_llm(
            fake_llm_server, api_key="other", timeout=9, max_retries=0, max_concurrency=1
        )
        chat(LLMSession(same, cache=cache))
        assert fake_llm_server.count() == 1
        # In the key: model, temperature, seed, max_tokens, prompt version.
        for changed in (
            {"model": "openai/other"},
            {"temperature": 0.5},
            {"seed": 7},
            {"max_tokens": 99},
        ):
            chat(LLMSession(make_llm(fake_llm_server, **changed), cache=cache))
        session = LLMSession(make_llm(fake_llm_server), cache=cache)
        run_sync(session.chat(MESSAGES, Claims, prompt=PromptRef("claims", "v2")))
        assert fake_llm_server.count() == 6


def test_identical_requests_in_flight_are_made_once(fake_llm_server):
    fake_llm_server.chat = claims_handler
    fake_llm_server.latency = 0.2
    session = LLMSession(make_llm(fake_llm_server))

    async def many() -> list:
        return await asyncio.gather(*(session.chat(MESSAGES, Claims) for _ in range(5)))

    results = asyncio.run(many())
    assert len(results) == 5 and all(r == results[0] for r in results)
    assert fake_llm_server.count() == 1


def test_concurrency_is_bounded(fake_llm_server):
    lock, active, peak = __import__("threading").Lock(), [0], [0]

    def slow(body: dict) -> str:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.1)
        with lock:
            active[0] -= 1
        return claims_handler(body)

    fake_llm_server.chat = slow
    session = LLMSession(make_llm(fake_llm_server, max_concurrency=2))

    async def many() -> None:
        await asyncio.gather(
            *(session.chat([{"role": "user", "content": f"answer {i}"}], Claims) for i in range(6))
        )

    asyncio.run(many())
    assert fake_llm_server.count() == 6 and peak[0] == 2


def test_sync_wrapper_works_inside_a_running_loop(fake_llm_server):
    fake_llm_server.chat = claims_handler
    session = LLMSession(make_llm(fake_llm_server))

    async def notebook_cell() -> list[Claims]:
        return chat(session)  # sync call while a loop is running, as in Jupyter

    assert asyncio.run(notebook_cell())[0].claims


def test_embeddings_batched_and_cached(fake_llm_server, tmp_path):
    embeddings = Embeddings(
        model="openai/fake-embed", api_base=fake_llm_server.base_url, api_key=SECRET, batch_size=2
    )
    with Cache(tmp_path / "c.sqlite") as cache:
        session = LLMSession(embeddings=embeddings, cache=cache)
        texts = ["what is RAG", "what is RAG", "retrieval augmented generation", "cats"]
        vectors = run_sync(session.embed(texts))
        assert len(vectors) == 4 and vectors[0] == vectors[1]
        assert fake_llm_server.count("/v1/embeddings") == 2  # 3 distinct texts, batches of 2
        again = run_sync(LLMSession(embeddings=embeddings, cache=cache).embed(texts[::-1]))
        assert again == vectors[::-1]
        assert fake_llm_server.count("/v1/embeddings") == 2
        # Served from the cache's bytes: still plain lists of floats, the same numbers, and
        # as one matrix from embed_array; changing a returned list changes nothing stored.
        replayed = LLMSession(embeddings=embeddings, cache=Cache(cache.path, mode="replay"))
        got = run_sync(replayed.embed(texts))
        assert got == vectors and all(type(v) is list and type(v[0]) is float for v in got)
        got[0][0] = 123.0
        matrix = run_sync(replayed.embed_array(texts))
        assert matrix.shape == (4, len(vectors[0])) and matrix.tolist() == vectors
        assert run_sync(replayed.embed(texts)) == vectors
        assert fake_llm_server.count("/v1/embeddings") == 2


def test_no_secret_reaches_any_file(fake_llm_server, tmp_path):
    fake_llm_server.chat = claims_handler
    fake_llm_server.fail_next(Fault.status(401, message=f"invalid key {SECRET}"))
    embeddings = Embeddings(
        model="openai/fake-embed", api_base=fake_llm_server.base_url, api_key=SECRET
    )
    with Cache(tmp_path / "c.sqlite") as cache:
        session = LLMSession(make_llm(fake_llm_server), embeddings=embeddings, cache=cache)
        with pytest.raises(LLMRequestError):
            chat(session)
        chat(session)
        run_sync(session.embed(["a text"]))
        cache.export_jsonl(tmp_path / "export.jsonl")
        assert SECRET not in repr(session.llm) and SECRET not in repr(embeddings)
    for path in tmp_path.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path


# Other providers go through litellm rather than the openai SDK: hosted_vllm speaks the
# OpenAI protocol, so the fake server can stand in for it.
def test_litellm_route_structured_output_fallback_and_retries(fake_llm_server):
    fake_llm_server.chat = claims_handler
    fake_llm_server.reject_response_format = {"json_schema"}
    fake_llm_server.fail_next(Fault.status(429, retry_after=0.1), Fault.status(500))
    session = LLMSession(make_llm(fake_llm_server, model="hosted_vllm/fake-model"))
    assert chat(session)[0].claims
    formats = [b.get("response_format", {}).get("type") for b in chat_bodies(fake_llm_server)]
    assert formats[-1] == "json_object" and "json_schema" in formats
    assert session.mode == "json_object_schema"
    assert session.usage.of("claims").retries == 2
    assert fake_llm_server.count() == len(formats)  # litellm's own retries are off


def test_litellm_route_refusal_and_embeddings(fake_llm_server):
    fake_llm_server.fail_next(Fault.status(401, message="bad key"))
    session = LLMSession(make_llm(fake_llm_server, model="hosted_vllm/fake-model"))
    with pytest.raises(LLMConfigError, match="the API key was refused"):
        chat(session)
    assert fake_llm_server.count() == 1
    embeddings = Embeddings(
        model="hosted_vllm/fake-embed", api_base=fake_llm_server.base_url, api_key=SECRET
    )
    vectors = run_sync(LLMSession(embeddings=embeddings).embed(["a b", "a b c"]))
    assert len(vectors) == 2 and len(vectors[0]) == 256


def test_a_verdict_echoed_in_prose_is_never_taken(fake_llm_server):
    """An answer that dictates a verdict may be echoed by a weak judge: two different valid
    objects in one reply are ambiguous and re-asked, not resolved by position."""
    echoed = 'The answer says {"claims": ["everything is supported"]}. Mine: {"claims": ["x"]}'
    fake_llm_server.chat = lambda body: echoed
    session = LLMSession(make_llm(fake_llm_server, structured_output="prompt"))
    with pytest.raises(InvalidOutputError, match="several different JSON objects"):
        chat(session)
    assert fake_llm_server.count() == 2  # asked once more, then failed


def test_too_long_requests_fail_before_they_are_sent(fake_llm_server):
    fake_llm_server.chat = claims_handler
    session = LLMSession(make_llm(fake_llm_server, context_window=200, max_tokens=50))
    long = [MESSAGES[0], {"role": "user", "content": "检索增强生成" * 100}]  # ~600 tokens
    expected = r"about 6\d\d tokens plus max_tokens 50, over .*window of 200"
    with pytest.raises(ContextWindowError, match=expected):
        chat(session, messages=long)
    assert fake_llm_server.count() == 0
    assert chat(session)[0].claims  # a short one goes through


def test_known_models_get_their_window_from_the_price_map(fake_llm_server):
    session = LLMSession(make_llm(fake_llm_server, model="openai/gpt-4o-mini"))
    huge = [{"role": "user", "content": "word " * 700_000}]
    with pytest.raises(ContextWindowError, match="window of 128,000"):
        chat(session, messages=huge)
    assert fake_llm_server.count() == 0


def test_a_text_embedded_by_two_rows_at_once_is_requested_once(fake_llm_server, tmp_path):
    fake_llm_server.latency = 0.2  # both calls start before either reply arrives
    embeddings = Embeddings(
        model="openai/fake-embed", api_base=fake_llm_server.base_url, api_key=SECRET
    )

    async def two_rows(session: LLMSession) -> list[list[list[float]]]:
        return list(
            await asyncio.gather(
                session.embed(["shared question", "row one"]),
                session.embed(["row two", "shared question"]),
            )
        )

    with Cache(tmp_path / "c.sqlite") as cache:
        first, second = asyncio.run(two_rows(LLMSession(embeddings=embeddings, cache=cache)))
    sent = [r.body["input"] for r in fake_llm_server.requests]
    assert sorted(t for batch in sent for t in batch) == ["row one", "row two", "shared question"]
    assert first[0] == second[1]  # the same reply, shared
    assert first[0] is not second[1]  # each row its own copy: one cannot change the other's
    # float32 on the wire (the openai default)
    assert first[0] == pytest.approx(hashed_embeddings(["shared question"])[0], abs=1e-6)
    assert second[0] == pytest.approx(hashed_embeddings(["row two"])[0], abs=1e-6)


def test_a_failed_embedding_request_fails_the_row_sharing_it(fake_llm_server):
    fake_llm_server.latency = 0.2
    fake_llm_server.fail_next(Fault.status(400, message="bad input"), path="/v1/embeddings")
    embeddings = Embeddings(
        model="openai/fake-embed",
        api_base=fake_llm_server.base_url,
        api_key=SECRET,
        max_retries=0,
    )

    async def two_rows(session: LLMSession) -> list[Any]:
        return list(
            await asyncio.gather(
                session.embed(["shared question"]),
                session.embed(["shared question"]),
                return_exceptions=True,
            )
        )

    first, second = asyncio.run(two_rows(LLMSession(embeddings=embeddings)))
    assert isinstance(first, LLMRequestError) and isinstance(second, LLMRequestError)
    assert fake_llm_server.count("/v1/embeddings") == 1
