"""The openai/ route's own HTTP POST: what it sends, and failures raised as the SDK's."""

from __future__ import annotations

import asyncio
import gc
import json
import logging

import openai
import pytest
from pydantic import BaseModel

from judge.aio import run_sync
from judge.errors import LLMConfigError
from judge.llm.config import LLM
from judge.llm.openai_http import OpenAIHTTP, endpoint_url, proxy_for, resolve_key, status_error
from judge.llm.retry import is_transient, retry_after
from judge.llm.session import LLMSession
from judge.testing import FakeLLMServer, Fault


class Verdict(BaseModel):
    verdict: str


def says_yes(body: dict) -> str:
    return json.dumps({"verdict": "yes"})


def post(server: FakeLLMServer, body: dict, timeout: float = 5.0, key: str = "k-123456") -> object:
    """One POST to the server's chat endpoint, on a fresh loop, connections closed after."""

    async def go() -> object:
        poster = OpenAIHTTP(server.base_url, key, timeout)
        try:
            return await poster.post("/chat/completions", body)
        finally:
            await poster.close()

    return asyncio.run(go())


BODY = {"model": "m", "messages": [{"role": "user", "content": "Ça va? 你好"}]}


def test_the_body_arrives_as_sent_with_auth_and_organisation_headers(monkeypatch):
    monkeypatch.setenv("OPENAI_ORG_ID", "org-7")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-9")
    with FakeLLMServer(chat=says_yes) as server:
        reply = post(server, BODY)
        (request,) = server.requests
    assert reply["choices"][0]["message"]["content"] == '{"verdict": "yes"}'
    assert request.path == "/v1/chat/completions" and request.body == BODY
    assert request.headers["authorization"] == "<redacted>"  # sent, and kept out of records
    assert request.headers["openai-organization"] == "org-7"
    assert request.headers["openai-project"] == "proj-9"
    assert request.headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    ("status", "kind", "transient"),
    [
        (400, openai.BadRequestError, False),
        (401, openai.AuthenticationError, False),
        (403, openai.PermissionDeniedError, False),
        (404, openai.NotFoundError, False),
        (422, openai.UnprocessableEntityError, False),
        (429, openai.RateLimitError, True),
        (500, openai.InternalServerError, True),
        (503, openai.InternalServerError, True),
    ],
)
def test_error_statuses_raise_the_sdks_classes(status, kind, transient):
    with FakeLLMServer(chat=says_yes) as server:
        server.fail_next(Fault.status(status, message="slow down", retry_after=2))
        with pytest.raises(kind) as info:
            post(server, BODY)
    error = info.value
    assert type(error) is kind and error.status_code == status
    assert str(error) == f"Error code: {status} - slow down"
    assert isinstance(error.body, dict) and error.body["message"] == "slow down"
    assert retry_after(error) == 2.0  # read from the response's headers, as before
    assert is_transient(error) is transient


def test_an_error_body_that_is_not_json_is_kept_as_text():
    error = status_error(502, [("Content-Encoding", "gzip")], b"<html>bad gateway</html>", "u")
    assert type(error) is openai.InternalServerError
    assert error.body == "<html>bad gateway</html>" and str(error) == "Error code: 502"
    assert error.response.text == "<html>bad gateway</html>"  # not decoded as gzip twice


def test_timeouts_disconnects_and_broken_bodies_are_transient():
    with FakeLLMServer(chat=says_yes) as server:
        server.fail_next(Fault.delay(3))
        with pytest.raises(openai.APITimeoutError) as timeout:
            post(server, BODY, timeout=0.3)
        server.fail_next(Fault.disconnect())
        with pytest.raises(openai.APIConnectionError) as dropped:
            post(server, BODY)
        server.fail_next(Fault.broken_body())
        with pytest.raises(json.JSONDecodeError) as broken:
            post(server, BODY)
    for error in (timeout.value, dropped.value, broken.value):
        assert is_transient(error)


def test_key_and_addresses_resolve_as_the_sdk_resolves_them(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert resolve_key("http://localhost:8000/v1", None) == "EMPTY"  # local servers
    with pytest.raises(LLMConfigError, match="set OPENAI_API_KEY"):
        resolve_key(None, None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert resolve_key(None, None) == "sk-env" and resolve_key(None, "sk-arg") == "sk-arg"
    assert endpoint_url(None, "/chat/completions") == "https://api.openai.com/v1/chat/completions"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gw.example/v1/")
    assert endpoint_url(None, "/chat/completions") == "http://gw.example/v1/chat/completions"
    assert endpoint_url("http://h/v1?api-version=2", "/chat/completions") == (
        "http://h/v1/chat/completions?api-version=2"
    )


def test_proxies_come_from_the_environment_once(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    for name in ("https_proxy", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_for("https://api.openai.com/v1/") == "http://proxy.example:3128"
    assert proxy_for("http://127.0.0.1:8000/v1/") is None  # no HTTP_PROXY set
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert proxy_for("http://127.0.0.1:8000/v1/") is None  # exempted by NO_PROXY
    assert proxy_for("http://10.0.0.5:8000/v1/") == "http://proxy.example:3128"


def test_a_session_nobody_closed_is_closed_with_its_loop(caplog, recwarn):
    gc.collect()  # earlier tests' garbage warns on its own account, not this session's
    recwarn.clear()
    with FakeLLMServer(chat=says_yes) as server:
        session = LLMSession(LLM("openai/m", api_base=server.base_url, api_key="k-123456"))
        for text in ("one", "two"):  # two loops, no aclose()
            run_sync(session.chat([{"role": "user", "content": text}], Verdict))
        assert server.count() == 2
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        del session
        gc.collect()
    assert not [r for r in caplog.records if "Unclosed" in r.getMessage()]
    leaks = [str(w.message) for w in recwarn if issubclass(w.category, ResourceWarning)]
    assert not leaks, leaks
