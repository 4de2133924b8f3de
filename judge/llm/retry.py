"""Retrying provider calls: what is transient, how long to wait, what to tell the user.

Transient failures (429, 5xx, timeouts, lost connections) are retried with exponential
backoff and jitter, honouring Retry-After; a refused request (400, 401, 403, 404) is not.
The SDKs' own retries are off, so a failure is never retried twice over.

Configuration errors (`LLMConfigError`) are the failures no row can escape: a missing or
refused key (401, 403), an unknown model (404), and a server that cannot be reached
(connection refused, unknown host, TLS failure) and has not answered once in this run.
Such a server gets a few quick attempts (at most `UNREACHED_ATTEMPTS`, a few seconds)
rather than the full `max_retries`: a wrong address should fail in seconds. Once a server
has answered, a refused or lost connection is an outage, transient, and retried in full.
"""

from __future__ import annotations

import asyncio
import errno
import json
import random
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from judge.errors import LLMCallError, LLMConfigError, LLMRequestError
from judge.llm.usage import UsageRecorder

T = TypeVar("T")

_MAX_WAIT = 60.0
UNREACHED_ATTEMPTS = 3  # attempts at a server that never answered (waits of at most 1.5 s)
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


_NO_KEY_WORDS = (
    "missing credentials",  # the openai SDK
    "api_key client option must be set",
    "no api key",
    "no key is set",  # litellm: "Missing Anthropic API Key - ... no key is set ..."
)


def missing_key(exc: BaseException) -> bool:
    """The client found no API key to send (raised before any request)."""
    return any(word in str(exc).lower() for word in _NO_KEY_WORDS)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts, connection failures."""
    if is_format_rejection(exc):
        return False
    if missing_key(exc):  # litellm reports a missing key as a 500; no retry can fix it
        return False
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


@dataclass
class Endpoint:
    """A server of one run: where it is, its key's variable, and whether it ever answered.

    Args:
        url: the base URL requests go to, as shown in messages.
        key_variable: the environment variable of its API key, when known.
        answered: set once any HTTP response came back (an error status counts).
    """

    url: str
    key_variable: str | None = None
    answered: bool = False

    def key_hint(self) -> str:
        """What to do about a missing or refused key."""
        variable = self.key_variable or "the provider's API key variable"
        return f"set {variable} or pass api_key= (--api-key)"


def cannot_connect(exc: BaseException) -> str | None:
    """Why no connection could be made (refused, unknown host, TLS), else None.

    The clients wrap the socket error a few layers deep (openai: APIConnectionError from
    httpx's ConnectError; litellm: a 500 from aiohttp's), so the chain is searched.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "unknown host"
        if isinstance(cause, ssl.SSLError):
            return "TLS handshake failed: http or https?"
        if isinstance(cause, OSError) and cause.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return "host unreachable"
        cause = cause.__cause__ or cause.__context__
    return None


def _got_response(exc: BaseException) -> bool:
    """The server sent an HTTP response (an error status), so it is there; call it where
    the exception was caught, while its chain is intact."""
    return (
        _status(exc) is not None
        and cannot_connect(exc) is None  # litellm reports a failed connection as a 500
        and not _is_connection_or_timeout(exc)
    )


def _server_message(exc: BaseException, secret: str | None) -> str:
    """The server's own error message on one line, shortened (for configuration errors)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    message = body.get("message") if isinstance(body, dict) else None
    text = " ".join(redact(str(message or exc), secret).split())
    return text if len(text) <= 200 else text[:199] + "…"


def _explain(
    exc: BaseException,
    what: str,
    secret: str | None,
    attempts: int,
    endpoint: Endpoint,
    unreachable: str | None,
) -> Exception:
    status = _status(exc)
    detail = redact(str(exc), secret)
    if unreachable and not endpoint.answered:
        return LLMConfigError(
            f"{what}: no server answered at {endpoint.url} ({unreachable}; {attempts} "
            "attempts): is a server listening there? Check the address (api_base=)"
        )
    if is_transient(exc):
        return LLMCallError(
            f"{what}: gave up after {attempts} attempts; last error: {detail.rstrip('.')}. "
            "The provider is overloaded or unreachable: lower the concurrency, raise "
            "max_retries or timeout, or try again later."
        )
    said = _server_message(exc, secret)
    if missing_key(exc):
        return LLMConfigError(f"{what}: no API key ({said}): {endpoint.key_hint()}")
    if status == 401:
        return LLMConfigError(
            f"{what}: the API key was refused (HTTP 401: {said}): {endpoint.key_hint()}"
        )
    if status == 403:
        return LLMConfigError(
            f"{what}: the API key may not use this model (HTTP 403: {said}): check the "
            "key's permissions and the model name"
        )
    if status == 404:
        return LLMConfigError(
            f"{what}: no such model at {endpoint.url} (HTTP 404: {said}): check the model "
            "name (and that the address ends in the API's path, e.g. /v1)"
        )
    return LLMRequestError(
        f"{what}: the request was refused; it is not retried (HTTP {status}): {detail}"
    )


async def call_with_retries(
    make_call: Callable[[], Awaitable[T]],
    max_retries: int,
    usage: UsageRecorder,
    *,
    what: str,
    secret: str | None,
    endpoint: Endpoint,
) -> T:
    """Await make_call(), retrying transient failures up to max_retries times.

    A format rejection is raised unchanged (the caller falls back to another mode); a
    configuration error is raised as `LLMConfigError` (see the module's docstring).

    Args:
        make_call: makes one request.
        max_retries: retries of a transient failure.
        usage: where requests and retries are counted.
        what: the judge and model, to begin error messages with.
        secret: the API key, kept out of error messages.
        endpoint: the server called; marked as answered on its first response.
    """

    # Why the last attempt could not connect, found as it failed: re-raising an exception
    # inside another handler (as tenacity does) replaces its __context__, and litellm
    # chains its connection errors through __context__ alone.
    unreachable: str | None = None

    def stop(state: RetryCallState) -> bool:
        if state.attempt_number > max_retries:
            return True
        return (
            unreachable is not None
            and not endpoint.answered
            and state.attempt_number >= UNREACHED_ATTEMPTS
        )

    attempts = 0
    try:
        async for attempt in AsyncRetrying(
            stop=stop, wait=_wait, retry=retry_if_exception(is_transient), reraise=True
        ):
            with attempt:
                attempts += 1
                usage.count("requests")  # every attempt is a request sent, failed or not
                if attempts > 1:
                    usage.count("retries")
                try:
                    result = await make_call()
                except Exception as exc:
                    unreachable = cannot_connect(exc)
                    endpoint.answered = endpoint.answered or _got_response(exc)
                    raise
                endpoint.answered = True
                return result
    except LLMConfigError as exc:  # found before sending (no key): say which judge
        raise LLMConfigError(f"{what}: {exc}") from None
    except Exception as exc:
        if is_format_rejection(exc):
            raise
        raise _explain(exc, what, secret, attempts, endpoint, unreachable) from None
    raise AssertionError("unreachable: AsyncRetrying either returns or raises")
