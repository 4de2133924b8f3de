"""Which failed calls reject only their own question, and under which reason: one mapping
for a build's rounds and for mine. Any other error (a configuration error, a cache that
cannot store) stops the whole run."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from judge.errors import ContextWindowError, InvalidOutputError, LLMCallError, LLMError

T = TypeVar("T")

# In this order: the first that matches names the reason.
REASONS: tuple[tuple[type[LLMError], str], ...] = (
    (InvalidOutputError, "invalid_output"),  # still invalid after re-asking
    (LLMCallError, "llm_error"),  # the provider kept failing after retries
    (ContextWindowError, "too_long"),  # the request does not fit the model
)
_REJECTING = tuple(kind for kind, _ in REASONS)


@dataclass(frozen=True)
class CallFailed:
    """A call that failed in a way that rejects its question: the reason and the message."""

    reason: str
    detail: str


async def settle(call: Awaitable[T]) -> T | CallFailed:
    """The call's result, or `CallFailed` when it fails in a way that rejects only its
    question; any other exception is raised."""
    try:
        return await call
    except _REJECTING as exc:
        reason = next(reason for kind, reason in REASONS if isinstance(exc, kind))
        return CallFailed(reason, str(exc))
