"""The one boundary to language models: the only module that imports litellm.

The transport makes one raw provider call for a model configured in `judge.llm.config`:
OpenAI-compatible servers (`openai/<model>`: OpenAI, vLLM, llama.cpp, Ollama's /v1) by a
plain JSON POST for chat (`judge.llm.openai_http`, failing with the SDK's exceptions) and
the openai SDK for embeddings, both far cheaper per call than litellm; every other
provider through litellm. Retries, caching, structured output and usage live in
`judge.llm.session`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from typing import Any

from judge.cache.identity import without_credentials
from judge.errors import JudgeError, LLMConfigError, LLMRequestError
from judge.llm.config import LLM, Embeddings
from judge.llm.pricing import openai_cost
from judge.llm.retry import UNREACHED_ATTEMPTS, Endpoint, call_with_retries, missing_key
from judge.llm.usage import UsageRecorder


@functools.cache
def _litellm() -> Any:
    """Import litellm on first use: it costs seconds and ~200 MB, and must not phone home."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


_OPENAI = "openai/"
# The key sent to a server at an api_base when none is given, as the openai/ route sends
# it (judge.llm.openai_http.resolve_key): local servers ignore it.
_NO_KEY = "EMPTY"


def openai_compatible(model: str) -> bool:
    """Whether a model string names an OpenAI-compatible endpoint (served by the openai SDK)."""
    return model.startswith(_OPENAI)


def _openai_client(api_base: str | None, api_key: str | None, timeout: float) -> Any:
    """An AsyncOpenAI client with the SDK's own retries off (judge retries, once)."""
    import openai

    from judge.llm.openai_http import resolve_key

    return openai.AsyncOpenAI(
        base_url=api_base, api_key=resolve_key(api_base, api_key), timeout=timeout, max_retries=0
    )


def endpoint_for(model: str, api_base: str | None) -> Endpoint:
    """The server a model's requests go to, as error messages name it (without any user
    name or password a URL holds)."""
    if openai_compatible(model):
        default = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return Endpoint(without_credentials(api_base or default), "OPENAI_API_KEY")
    provider = model.split("/", 1)[0]
    return Endpoint(without_credentials(api_base) if api_base else f"{provider}'s default endpoint")


@functools.lru_cache(maxsize=64)
def check_route(model: str, api_base: str | None, spelt: str) -> None:
    """Refuse, before any request, a model string litellm can route nowhere (`qwen2.5`
    with no provider prefix): every request would be refused the same way. `spelt`
    shows it as the caller gave it (`model={!r}`)."""
    try:
        _litellm().get_llm_provider(model=model, api_base=api_base)
    except Exception:  # litellm's BadRequestError: "LLM Provider NOT provided"
        example = spelt.format(f"openai/{model.rsplit('/', 1)[-1]}")
        raise LLMConfigError(
            f"{spelt.format(model)} names no provider litellm knows: give a provider "
            f"prefix, e.g. {example} for an OpenAI-compatible server (vLLM, llama.cpp, "
            "Ollama's /v1, LM Studio); see https://docs.litellm.ai/docs/providers"
        ) from None


def check_config(config: LLM | Embeddings, spelt: str) -> None:
    """The checks every request of a model makes before it is sent (a route litellm
    knows; for an OpenAI-compatible server, a key), made at once: `judge experiment`
    makes them before the app runs, not after it answered every question. `spelt`
    shows the model as the caller gave it (`model={!r}`)."""
    if openai_compatible(config.model):
        from judge.llm.openai_http import resolve_key

        resolve_key(config.api_base, config.api_key)
    else:
        check_route(config.model, config.api_base, spelt)


async def check_server(llm: LLM) -> None:
    """Refuse, with one request that judges nothing, an OpenAI-compatible judge server
    that cannot be reached or refuses the key: the `LLMConfigError` its first judging
    request would raise (see `judge.llm.retry`), found before `judge experiment` asks the
    app. The request is a GET of the server's model list; any other answer passes (a
    server without that list, an overloaded one: the judging tells)."""
    if not openai_compatible(llm.model):
        return
    from judge.llm.openai_http import OpenAIHTTP

    poster = OpenAIHTTP(llm.api_base, llm.api_key, llm.timeout)

    async def listed() -> Any:
        try:
            return await poster.get("/models")
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and status not in (401, 403):
                return None  # it answered: not about the server or the key
            raise

    try:
        await call_with_retries(
            listed,
            UNREACHED_ATTEMPTS - 1,
            UsageRecorder(),
            what=f"the judge ({llm.model})",
            secret=llm.api_key,
            endpoint=endpoint_for(llm.model, llm.api_base),
        )
    except LLMConfigError:
        raise
    except JudgeError:  # transient: the judging retries it in full
        pass
    finally:
        await poster.close()


class Transport:
    """Raw provider calls for one event loop (an SDK client belongs to the loop it ran on)."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str | None, str | None, float], Any] = {}
        self._posters: dict[tuple[str | None, str | None, float], Any] = {}
        self._keyless: set[tuple[str, str]] = set()  # (model, api_base) sent _NO_KEY

    async def _litellm_call(
        self,
        model: str,
        api_base: str | None,
        api_key: str | None,
        call: Callable[..., Awaitable[Any]],
    ) -> Any:
        """call(api_key=...) through litellm. A server at an api_base given with no key
        gets the placeholder key the openai/ route sends, once litellm finds none of its
        own (before sending anything): routes built on the openai client (litellm_proxy/,
        custom_openai/, xinference/ ...) refuse to start without one, though a local
        server ignores it. A key litellm finds in the environment is still used."""
        if api_key is None and api_base is not None and (model, api_base) in self._keyless:
            api_key = _NO_KEY
        try:
            return await call(api_key=api_key)
        except Exception as exc:
            if api_key is not None or api_base is None or not missing_key(exc):
                raise
        self._keyless.add((model, api_base))
        return await call(api_key=_NO_KEY)

    def _client(self, api_base: str | None, api_key: str | None, timeout: float) -> Any:
        key = (api_base, api_key, timeout)
        if key not in self._clients:
            self._clients[key] = _openai_client(api_base, api_key, timeout)
        return self._clients[key]

    def _poster(self, llm: LLM) -> Any:
        key = (llm.api_base, llm.api_key, llm.timeout)
        if key not in self._posters:
            # Imported on first use: a replay from the cache loads no HTTP client.
            from judge.llm.openai_http import OpenAIHTTP

            self._posters[key] = OpenAIHTTP(llm.api_base, llm.api_key, llm.timeout)
        return self._posters[key]

    async def chat(self, llm: LLM, request: dict[str, Any], n: int) -> tuple[Any, float | None]:
        """One chat completion: (response, cost in USD or None when unknown)."""
        params: dict[str, Any] = {"temperature": llm.temperature, **request}
        for name, value in (("seed", llm.seed), ("max_tokens", llm.max_tokens)):
            if value is not None:
                params[name] = value
        if n > 1:
            params["n"] = n
        if openai_compatible(llm.model):
            name = llm.model[len(_OPENAI) :]
            # A plain POST, not the SDK: its request machinery and httpx were most of the
            # client's CPU per request at zero latency (see judge.llm.openai_http).
            data = await self._poster(llm).post("/chat/completions", {"model": name, **params})
            if not isinstance(data, dict):  # a 200 whose body is not a JSON object
                raise LLMRequestError(f"the server's reply is not a JSON object: {data!r:.200}")
            response = Fields(data)
            return response, _openai_price(llm.api_base, name, response)
        litellm = _litellm()
        check_route(llm.model, llm.api_base, "model={!r}")
        response = await self._litellm_call(
            llm.model,
            llm.api_base,
            llm.api_key,
            functools.partial(
                litellm.acompletion,
                model=llm.model,
                api_base=llm.api_base,
                timeout=llm.timeout,
                max_retries=0,
                num_retries=0,
                **params,
            ),
        )
        return response, _litellm_cost(litellm, response)

    async def embed(self, config: Embeddings, texts: list[str]) -> tuple[Any, float | None]:
        """One embedding request for a batch of texts: (response, cost or None)."""
        if openai_compatible(config.model):
            name = config.model[len(_OPENAI) :]
            client = self._client(config.api_base, config.api_key, config.timeout)
            response = await client.embeddings.create(model=name, input=texts)
            return response, _openai_price(config.api_base, name, response)
        litellm = _litellm()
        check_route(config.model, config.api_base, "Embeddings(model={!r})")
        response = await self._litellm_call(
            config.model,
            config.api_base,
            config.api_key,
            functools.partial(
                litellm.aembedding,
                model=config.model,
                input=texts,
                api_base=config.api_base,
                timeout=config.timeout,
                max_retries=0,
                num_retries=0,
            ),
        )
        return response, _litellm_cost(litellm, response)

    async def close(self) -> None:
        """Close the HTTP clients' connections."""
        for client in self._clients.values():
            await client.close()
        for poster in self._posters.values():
            await poster.close()
        self._clients.clear()
        self._posters.clear()


class Fields:
    """A JSON object of a reply read as attributes (`response.choices[0].message.content`),
    as the SDK's typed models are read; a missing field raises AttributeError."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]):
        self._data = data

    def __getattr__(self, name: str) -> Any:
        try:
            value = self._data[name]
        except KeyError:
            raise AttributeError(name) from None
        if isinstance(value, dict):
            return Fields(value)
        if isinstance(value, list):
            return [Fields(v) if isinstance(v, dict) else v for v in value]
        return value


def _openai_price(api_base: str | None, model: str, response: Any) -> float | None:
    """OpenAI's list price, only for OpenAI itself: a local server's price is unknown."""
    if api_base is not None and "api.openai.com" not in api_base:
        return None
    usage = getattr(response, "usage", None)
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    return openai_cost(model, prompt, completion)


def _litellm_cost(litellm: Any, response: Any) -> float | None:
    """The call's cost from litellm's price map; None (unknown, not 0) for unpriced models."""
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:
        return None


__all__ = ["Transport", "openai_compatible"]
