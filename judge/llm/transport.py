"""The one boundary to language models: the only module that imports litellm.

`LLM` and `Embeddings` are plain configuration. The transport functions make one raw
provider call: OpenAI-compatible servers (`openai/<model>`: OpenAI, vLLM, llama.cpp,
Ollama's /v1) through the openai SDK, whose per-call overhead is a few times lower than
litellm's; every other provider through litellm. Retries, caching, structured output and
usage live in `judge.llm.session`.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from judge.errors import JudgeError, LLMRequestError
from judge.llm.pricing import openai_cost
from judge.llm.structured import MODES

T = TypeVar("T")


@dataclass(frozen=True)
class LLM:
    """Which chat model to call and how; the API key is never printed, cached or logged.

    Args:
        model: any litellm model string: `openai/gpt-4o-mini`, `ollama/qwen2.5`, or
            `openai/<name>` with `api_base` for vLLM, llama.cpp or another
            OpenAI-compatible server.
        api_base: the server's base URL, e.g. `http://localhost:8000/v1`.
        api_key: the key; None lets litellm read the provider's usual environment variable.
        temperature, seed, max_tokens: sampling settings; they are part of the cache key.
        timeout: seconds per request.
        max_retries: retries of a transient failure (429, 5xx, timeout, connection).
        max_reasks: times an invalid output is sent back to the model to be fixed.
        max_concurrency: requests in flight at once.
        structured_output: "auto" starts at `json_schema`; a mode name starts lower.
        context_window: the model's input limit in tokens; None looks it up in litellm's
            price map (local models: set it). Longer requests fail before they are sent.
    """

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int | None = None
    timeout: float = 120.0
    max_retries: int = 6
    max_reasks: int = 1
    max_concurrency: int = 16
    structured_output: str = "auto"
    context_window: int | None = None

    def __post_init__(self) -> None:
        if self.structured_output != "auto" and self.structured_output not in MODES:
            raise JudgeError(
                f"structured_output {self.structured_output!r} is not 'auto' or one of "
                f"{', '.join(MODES)}"
            )


@dataclass(frozen=True)
class Embeddings:
    """Which embedding model to call (same conventions as `LLM`)."""

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    max_retries: int = 6
    batch_size: int = 64
    max_concurrency: int = 8


@dataclass(frozen=True)
class PromptRef:
    """The prompt a request was rendered from: its name and version (hash of its file)."""

    name: str
    version: str


@functools.cache
def _litellm() -> Any:
    """Import litellm on first use: it costs seconds and ~200 MB, and must not phone home."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run a coroutine to completion from sync code, also inside a running event loop.

    In Jupyter a loop is already running; rather than patching it, the coroutine runs on
    a fresh loop in a worker thread.
    """

    async def wrapper() -> T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrapper())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wrapper()).result()


_OPENAI = "openai/"


def openai_compatible(model: str) -> bool:
    """Whether a model string names an OpenAI-compatible endpoint (served by the openai SDK)."""
    return model.startswith(_OPENAI)


def _openai_client(api_base: str | None, api_key: str | None, timeout: float) -> Any:
    """An AsyncOpenAI client with the SDK's own retries off (judge retries, once)."""
    import openai

    if api_key is None and api_base is not None:
        api_key = os.environ.get("OPENAI_API_KEY", "EMPTY")  # local servers ignore the key
    try:
        return openai.AsyncOpenAI(
            base_url=api_base, api_key=api_key, timeout=timeout, max_retries=0
        )
    except openai.OpenAIError as exc:
        raise LLMRequestError(
            f"no API key for OpenAI: pass api_key=... (--api-key) or set OPENAI_API_KEY ({exc})"
        ) from None


class Transport:
    """Raw provider calls for one event loop (an SDK client belongs to the loop it ran on)."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str | None, str | None, float], Any] = {}

    def _client(self, api_base: str | None, api_key: str | None, timeout: float) -> Any:
        key = (api_base, api_key, timeout)
        if key not in self._clients:
            self._clients[key] = _openai_client(api_base, api_key, timeout)
        return self._clients[key]

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
            client = self._client(llm.api_base, llm.api_key, llm.timeout)
            response = await client.chat.completions.create(model=name, **params)
            return response, _openai_price(llm.api_base, name, response)
        litellm = _litellm()
        response = await litellm.acompletion(
            model=llm.model,
            api_base=llm.api_base,
            api_key=llm.api_key,
            timeout=llm.timeout,
            max_retries=0,
            num_retries=0,
            **params,
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
        response = await litellm.aembedding(
            model=config.model,
            input=texts,
            api_base=config.api_base,
            api_key=config.api_key,
            timeout=config.timeout,
            max_retries=0,
            num_retries=0,
        )
        return response, _litellm_cost(litellm, response)

    async def close(self) -> None:
        """Close the SDK clients' connections."""
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


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


__all__ = ["LLM", "Embeddings", "PromptRef", "Transport", "run_sync"]
