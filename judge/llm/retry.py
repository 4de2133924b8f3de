"""Retrying provider calls: what is transient, how long to wait, what to tell the user.

Transient failures (429, 5xx, timeouts, lost connections) are retried with exponential
backoff and jitter, honouring Retry-After; a refused request (400, 401, 403, 404) is not.
The SDKs' own retries are off, so a failure is never retried twice over.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from judge.errors import LLMCallError, LLMRequestError
from judge.llm.usage import UsageRecorder

T = TypeVar("T")

_MAX_WAIT = 60.0
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "input should be 'text'")


def redact(text: str, secret: str | None) -> str:
    """text with the secret (an API key) replaced, so it can be shown or logged.

    Keys shorter than 6 characters are placeholders of local servers ("EMPTY", "x"):
    replacing them would garble the message and protect nothing.
    """
    return text.replace(secret, "<redacted>") if secret and len(secret) >= 6 else text


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _is_connection_or_timeout(exc: BaseException) -> bool:
    import openai  # the clients' exception classes; litellm's subclass them

    return isinstance(exc, (openai.APIConnectionError, asyncio.TimeoutError, TimeoutError))


def is_format_rejection(exc: BaseException) -> bool:
    """The server refused the response_format it was sent (not a transient failure)."""
    if _status(exc) not in (400, 422, 500, 501) and type(exc).__name__ != "UnsupportedParamsError":
        return False
    message = str(exc).lower()
    return any(word in message for word in _FORMAT_WORDS)


_NO_KEY_WORDS = ("missing credentials", "api_key client option must be set", "no api key")


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts, connection failures."""
    if is_format_rejection(exc):
        return False
    if any(word in str(exc).lower() for word in _NO_KEY_WORDS):
        return False  # litellm reports a missing key as a 500; no retry can fix it
    status = _status(exc)
    if status is not None:
        return status in (408, 409, 429) or status >= 500
    if isinstance(exc, json.JSONDecodeError):
        return True  # a 200 whose body is not JSON (a proxy's error page): the SDK raises this
    return _is_connection_or_timeout(exc)


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After header), if it said."""
    for headers in (
        getattr(exc, "headers", None),
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        if not headers:
            continue
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except AttributeError:
            continue
        if value is None:
            continue
        try:
            return max(0.0, min(float(value), _MAX_WAIT))
        except (TypeError, ValueError):
            return None  # an HTTP date: fall back to backoff
    return None


def _wait(state: RetryCallState) -> float:
    """Retry-After when given, else exponential backoff with full jitter (0.5 s base)."""
    exc = state.outcome.exception() if state.outcome else None
    asked = retry_after(exc) if exc is not None else None
    if asked is not None:
        return asked
    return random.uniform(0, min(_MAX_WAIT, 0.5 * 2 ** (state.attempt_number - 1)))


def _explain(exc: BaseException, what: str, secret: str | None, attempts: int) -> Exception:
    status = _status(exc)
    detail = redact(str(exc), secret)
    if is_transient(exc):
        return LLMCallError(
            f"{what}: gave up after {attempts} attempts; last error: {detail.rstrip('.')}. "
            "The provider is overloaded or unreachable: lower the concurrency, raise "
            "max_retries or timeout, or try again later."
        )
    if any(word in detail.lower() for word in _NO_KEY_WORDS):
        status = 401
    hint = {
        401: "check the API key (--api-key or the provider's environment variable)",
        403: "the key is not allowed to use this model",
        404: "check the model name and api_base",
    }.get(status or 0, "the request was refused; it is not retried")
    return LLMRequestError(f"{what}: {hint} (HTTP {status}): {detail}")


async def call_with_retries(
    make_call: Callable[[], Awaitable[T]],
    max_retries: int,
    usage: UsageRecorder,
    *,
    what: str,
    secret: str | None,
) -> T:
    """Await make_call(), retrying transient failures up to max_retries times.

    A format rejection is raised unchanged (the caller falls back to another mode).
    """
    attempts = 0
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(max_retries + 1),
            wait=_wait,
            retry=retry_if_exception(is_transient),
            reraise=True,
        ):
            with attempt:
                attempts += 1
                usage.count("requests")  # every attempt is a request sent, failed or not
                if attempts > 1:
                    usage.count("retries")
                return await make_call()
    except Exception as exc:
        if is_format_rejection(exc):
            raise
        raise _explain(exc, what, secret, attempts) from None
    raise AssertionError("unreachable: AsyncRetrying either returns or raises")
