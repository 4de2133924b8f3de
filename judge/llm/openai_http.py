"""The `openai/` route's chat requests: one JSON POST over aiohttp, failing as the SDK fails.

Why not the openai SDK: at zero latency its request machinery and HTTP stack (httpx) cost
about 1.7 ms of CPU per request, against about 0.25 ms for a plain aiohttp POST of the same
JSON (`bench/speed/client_throughput.py`), and that was most of what one process could judge per
second. What judge relied on from the SDK is kept: the base URL (`api_base`, else
`OPENAI_BASE_URL`, else OpenAI's), the key (`api_key`, else `OPENAI_API_KEY`; a local
server without one gets "EMPTY"), the `OPENAI_ORG_ID` and `OPENAI_PROJECT_ID` headers, one
timeout for connecting and for each read, redirects, proxies and CA files from the
environment, and the SDK's own exception classes (`openai.RateLimitError` carrying the
response and its Retry-After, `APITimeoutError`, `APIConnectionError` chained to the socket
error), so `judge.llm.retry` classifies every failure as before. aiohttp is litellm's HTTP
client, so it is installed already.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator
from typing import Any

import aiohttp
import openai

from judge.errors import LLMConfigError

OPENAI_BASE = "https://api.openai.com/v1"

# The SDK's exception class of each status; other statuses >= 500 are InternalServerError.
_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}
# Headers that describe the bytes on the wire, which aiohttp has already decoded.
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def resolve_key(api_base: str | None, api_key: str | None) -> str:
    """The key sent, as the SDK resolves it; LLMConfigError when OpenAI itself has none."""
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    if key is None:
        if api_base is None:
            raise LLMConfigError(
                "no API key for OpenAI: set OPENAI_API_KEY or pass api_key= (--api-key)"
            )
        key = "EMPTY"  # local servers ignore the key
    return key


def endpoint_url(api_base: str | None, path: str) -> str:
    """The URL of path under the base URL (its query string, if any, kept at the end)."""
    base = api_base or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE
    base, _, query = base.partition("?")
    url = f"{base.rstrip('/')}/{path.lstrip('/')}"
    return f"{url}?{query}" if query else url


def proxy_for(url: str) -> str | None:
    """The proxy from HTTP(S)_PROXY for url unless NO_PROXY exempts its host, as httpx
    finds it; read once per server, not per request as aiohttp's trust_env does (two
    thread hops and a read of ~/.netrc for every request)."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy is None or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def _ssl_context() -> ssl.SSLContext:
    """Certificates as httpx (the SDK's client) finds them: SSL_CERT_FILE or SSL_CERT_DIR
    when set, else certifi's bundle, so a machine without system CAs works as before."""
    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


async def _closing(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """Holds the session open until closed; asyncio.run() closes every open async generator
    as it ends (shutdown_asyncgens), so a session nobody closed is closed there, rather than
    aiohttp logging "Unclosed client session" when it is collected."""
    try:
        yield
    finally:
        await session.close()


class OpenAIHTTP:
    """JSON POSTs to one OpenAI-compatible server with one key, on the running event loop.

    Args:
        api_base: the server's base URL; None reads OPENAI_BASE_URL, else OpenAI's.
        api_key: the key; None reads OPENAI_API_KEY (see `resolve_key`).
        timeout: seconds to connect, and seconds of silence while reading the answer.
    """

    def __init__(self, api_base: str | None, api_key: str | None, timeout: float):
        self._api_base = api_base
        self._headers = {
            "Authorization": f"Bearer {resolve_key(api_base, api_key)}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        for variable, header in (
            ("OPENAI_ORG_ID", "OpenAI-Organization"),
            ("OPENAI_PROJECT_ID", "OpenAI-Project"),
        ):
            if os.environ.get(variable):
                self._headers[header] = os.environ[variable]
        self._proxy = proxy_for(endpoint_url(api_base, ""))
        self._timeout = aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    async def _open(self) -> aiohttp.ClientSession:
        """The HTTP session, made on first use (it belongs to the loop that made it)."""
        if self._session is None:
            https = endpoint_url(self._api_base, "").startswith("https:")
            self._session = aiohttp.ClientSession(
                timeout=self._timeout,
                # The SDK's limits: up to 1,000 connections; judge's semaphore is the bound.
                connector=aiohttp.TCPConnector(limit=1000, ssl=_ssl_context() if https else True),
            )
            self._closer = _closing(self._session)
            await self._closer.__anext__()
        return self._session

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST body as JSON to path; the decoded JSON reply, or the SDK's exception.

        A reply that is not JSON is returned as text when its content type says so (as the
        SDK does), and raises json.JSONDecodeError (transient) when it claims to be JSON.
        """
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        return await self._send("POST", path, data)

    async def get(self, path: str) -> Any:
        """GET path; the decoded JSON reply, or the SDK's exception (as `post`)."""
        return await self._send("GET", path, None)

    async def _send(self, method: str, path: str, data: bytes | None) -> Any:
        url = endpoint_url(self._api_base, path)
        session = await self._open()
        try:
            async with session.request(
                method, url, data=data, headers=self._headers, proxy=self._proxy
            ) as response:
                raw = await response.read()
        except (asyncio.TimeoutError, TimeoutError) as exc:
            raise openai.APITimeoutError(request=_request(url)) from exc
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-answer, DNS, TLS
            raise openai.APIConnectionError(request=_request(url)) from exc
        if not 200 <= response.status < 300:
            raise status_error(response.status, list(response.headers.items()), raw, url)
        if not response.content_type.endswith("json"):
            return raw.decode(response.charset or "utf-8", "replace")
        return json.loads(raw)

    async def close(self) -> None:
        """Close the connections (the session is made again if used later)."""
        if self._closer is not None:
            await self._closer.aclose()
        self._session = self._closer = None


def _httpx() -> Any:
    """The HTTP library whose objects the SDK's exceptions carry (only used on failures)."""
    try:
        import httpx2  # the openai SDK's HTTP library since openai 2

        return httpx2
    except ImportError:
        import httpx

        return httpx


def _request(url: str) -> Any:
    """The request object an SDK exception carries."""
    return _httpx().Request("POST", url)


def status_error(
    status: int, headers: list[tuple[str, str]], raw: bytes, url: str
) -> openai.APIStatusError:
    """The SDK's exception for an error status, with its message, body and response
    (whose headers, Retry-After among them, `judge.llm.retry` reads)."""
    kept = [(name, value) for name, value in headers if name.lower() not in _WIRE_HEADERS]
    response = _httpx().Response(status, headers=kept, content=raw, request=_request(url))
    text = raw.decode("utf-8", "replace").strip()
    body: Any = text
    message = f"Error code: {status}"
    try:
        body = json.loads(text)
    except ValueError:
        pass
    else:
        error = body.get("error", body) if isinstance(body, dict) else None
        said = error.get("message") if isinstance(error, dict) else None
        if isinstance(said, str) and said:
            message += f" - {said}"
    data = body.get("error", body) if isinstance(body, dict) else body
    kind = _STATUS_ERRORS.get(status)
    if kind is None:
        kind = openai.InternalServerError if status >= 500 else openai.APIStatusError
    return kind(message, response=response, body=data)
