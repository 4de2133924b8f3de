"""Which model to call and how: `LLM` (chat) and `Embeddings`, plain frozen configuration."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from judge.cache.identity import has_credentials, server_identity, without_credentials
from judge.errors import JudgeError

if TYPE_CHECKING:  # the command line reads these defaults without loading pydantic
    from judge.llm.structured import StructuredMode

# What docs and examples write in place of a model's name: "...", "<model>", "{model}".
_PLACEHOLDER = re.compile(r"\.{2,}|…|<[^<>]*>|\{[^{}]*\}")


def check_model(model: str, spelt: str, example: str) -> None:
    """Refuse a model string that cannot name a model (empty, or a placeholder copied from
    the docs) before any request; `spelt` shows it as the caller gave it (`model={!r}`)."""
    given = spelt.format(model)
    if not isinstance(model, str) or not model.strip():
        raise JudgeError(f"{given} is empty: give the model's name, e.g. {example}")
    name = model.strip().rsplit("/", 1)[-1]
    if not name:
        raise JudgeError(f"{given} names no model after its provider: e.g. {example}")
    if _PLACEHOLDER.fullmatch(name) or _PLACEHOLDER.fullmatch(model.strip()):
        raise JudgeError(
            f"{given} is a placeholder, not a model's name: give the model, e.g. {example}"
        )


def check_api_base(api_base: str | None, spelt: str) -> None:
    """Refuse a base URL holding a user name or password: the key goes in api_key, and a
    URL is shown in messages and named in cache keys, where no secret may go."""
    if api_base is not None and has_credentials(api_base):
        shown = spelt.format(without_credentials(api_base))
        raise JudgeError(
            f"{shown} holds a user name or password: pass the key with api_key= and drop "
            "the credentials from the URL"
        )


@dataclass(frozen=True)
class LLM:
    """Which chat model to call and how; the API key is never printed, cached or logged.

    Args:
        model: any litellm model string: `openai/gpt-4o-mini`, `ollama/qwen2.5`, or
            `openai/<name>` with `api_base` for vLLM, llama.cpp or another
            OpenAI-compatible server.
        api_base: the server's base URL, e.g. `http://localhost:8000/v1`.
        api_key: the key; None lets litellm read the provider's usual environment variable.
        temperature: the sampling temperature; part of the cache key, as are seed and
            max_tokens.
        seed: the sampling seed, for servers that take one.
        max_tokens: the longest reply asked for.
        timeout: seconds per request.
        max_retries: retries of a transient failure (429, 5xx, timeout, connection).
        max_reasks: times an invalid output is sent back to the model to be fixed.
        max_concurrency: requests in flight at once.
        structured_output: how replies are made to follow the output schema. "auto" starts
            at `json_schema` and falls back, as a server rejects each, to
            `json_object_schema` (JSON mode with the schema, as llama.cpp takes it),
            `json_object` (plain JSON mode) and `prompt` (the schema in the prompt); a
            mode name starts the chain there.
        context_window: the model's input limit in tokens; None looks it up in litellm's
            price map (local models: set it). Longer requests fail before they are sent.
        cache_as: the server's identity in cache keys, instead of `api_base`: give the
            name a cache was recorded under to replay it against a server at another
            address (a recorded fixture through a test server, a cache moved to another
            machine); "unknown" serves entries migrated from before servers were recorded.
            A URL here is normalised like `api_base`. See `judge.cache.identity`.
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
    structured_output: Literal["auto"] | StructuredMode = "auto"
    context_window: int | None = None
    cache_as: str | None = None

    def __post_init__(self) -> None:
        from judge.llm.structured import MODES

        if self.structured_output != "auto" and self.structured_output not in MODES:
            raise JudgeError(
                f"structured_output {self.structured_output!r} is not 'auto' or one of "
                f"{', '.join(MODES)}"
            )
        check_model(self.model, "model={!r}", "model='openai/gpt-4o-mini'")
        check_api_base(self.api_base, "api_base={!r}")
        server_identity(self.model, self.api_base, self.cache_as)  # a bad one fails here


@dataclass(frozen=True)
class Embeddings:
    """Which embedding model to call, for answer_relevancy; the key is never stored.

    Args:
        model: a litellm embedding model string: `openai/text-embedding-3-small`, or
            `openai/<name>` with `api_base` for an OpenAI-compatible server.
        api_base: the server's base URL; None uses the provider's default endpoint.
        api_key: the key; None reads the provider's usual environment variable.
        timeout: seconds per request.
        max_retries: retries of a transient failure (429, 5xx, timeout, connection).
        batch_size: texts sent in one embedding request.
        max_concurrency: embedding requests in flight at once; they also count against
            the judge `LLM.max_concurrency`, the one limit of all requests of a run.
        cache_as: the server's identity in cache keys, instead of `api_base` (as for `LLM`).
    """

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    max_retries: int = 6
    batch_size: int = 64
    max_concurrency: int = 8
    cache_as: str | None = None

    def __post_init__(self) -> None:
        check_model(
            self.model,
            "Embeddings(model={!r})",
            "Embeddings(model='openai/text-embedding-3-small')",
        )
        check_api_base(self.api_base, "Embeddings(api_base={!r})")
        server_identity(self.model, self.api_base, self.cache_as)  # a bad one fails here


@dataclass(frozen=True)
class PromptRef:
    """The prompt a request was rendered from: its name and version (hash of its file)."""

    name: str
    version: str
