"""Which server a judgment came from, as it enters the cache key.

Two servers can serve different weights under one model name (two local vLLMs, each
serving `openai/qwen`), so the server is part of every cache key. The identity is, in
order:

1. `cache_as` when set: a name the user gives the server on purpose, so a cache recorded
   against one address replays against another (a fixture replayed through a test server
   at a random port, a cache moved to another machine). A URL given here is normalised
   like an `api_base`, so `cache_as="http://gpu1:8000/v1"` replays what was recorded there.
2. `api_base`, normalised: scheme and host lowercased, the default port (80, 443) dropped,
   user name, password, query and fragment dropped (they may hold secrets and do not name
   a different server), trailing slashes removed; the path (e.g. `/v1`) is kept as given,
   since `http://h:8000` and `http://h:8000/v1` are different endpoints to the openai SDK.
   Hosts are not resolved: `localhost` and `127.0.0.1` are different identities, and two
   local servers on different ports are always separate.
3. `"default"`: the provider's own endpoint, with no `api_base` (for `openai/` models,
   `OPENAI_BASE_URL` is read first, as the openai SDK does). A provider's well-known
   endpoint given explicitly (`https://api.openai.com/v1` for `openai/`) is also "default".

Keys, timeouts and retry settings are never part of it.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from judge.errors import JudgeError

DEFAULT = "default"
# Entries written before the server was part of the key (cache format 1) get this identity
# when migrated: their server is unknown, so they are served only to a run that claims it
# on purpose with cache_as="unknown".
UNKNOWN = "unknown"
# How a run's note on replay misses begins: the cache holds the model's judgments under
# other identities (judge.llm.session makes them, judge.run.config.run_notes orders them).
REPLAY_MISSES = "replay misses: "

# Each provider's own endpoint (as litellm and the openai SDK use it when no api_base is
# given), so that naming it explicitly is the same identity as not naming it.
_PROVIDER_ENDPOINTS = {
    "openai": ("https://api.openai.com/v1",),
    "anthropic": ("https://api.anthropic.com", "https://api.anthropic.com/v1"),
    "mistral": ("https://api.mistral.ai", "https://api.mistral.ai/v1"),
    "groq": ("https://api.groq.com/openai/v1",),
    "ollama": ("http://localhost:11434",),
}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_url(url: str) -> str:
    """A base URL reduced to what names the server: `HTTPS://Host:443/v1/` -> `https://host/v1`."""
    text = url.strip()
    if "://" not in text:
        return text.rstrip("/").lower()  # not a URL the SDKs accept; compare it as text
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""  # lowercased, without user name and password
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    try:
        port = parts.port
    except ValueError:
        shown = without_credentials(url)
        raise JudgeError(f"api_base {shown!r}: the port is not a number") from None
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    path = re.sub("/{2,}", "/", parts.path).rstrip("/")
    return f"{scheme}://{netloc}{path}"


def has_credentials(url: str) -> bool:
    """Whether a URL holds a user name or password (`http://user:pass@host/v1`).

    Any "@" after the scheme counts: a password may hold "/", "?" or "#" unescaped, which
    would end the URL's authority early for a parser and hide the rest in its path; and a
    server's base URL has no use for an "@" of its own."""
    return "@" in url.strip().partition("://")[2 if "://" in url else 0]


def without_credentials(url: str) -> str:
    """The URL as it may be shown: a user name and password replaced by `***`."""
    if not has_credentials(url):
        return url
    text = url.strip()
    scheme, sep, rest = text.partition("://") if "://" in text else ("", "", text)
    return f"{scheme}{sep}***@{rest.rpartition('@')[2]}"


def recorded_servers(
    paths: Iterable[str | os.PathLike[str]], kind: str, model: str
) -> dict[str, int]:
    """Server identity -> number of entries of this kind and model in the cache files,
    most first: what a replay that misses may have been recorded under instead. Read
    through read-only connections of its own; a file that cannot be read counts nothing
    (this only words an error message)."""
    found: dict[str, int] = {}
    for path in paths:
        try:
            db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        except (sqlite3.Error, ValueError):
            continue
        try:
            rows = db.execute(
                "SELECT json_extract(request, '$.server'), count(*) FROM judgments "
                "WHERE kind = ? AND model = ? GROUP BY 1",
                (kind, model),
            ).fetchall()
        except sqlite3.Error:
            rows = []
        finally:
            db.close()
        for server, count in rows:
            name = UNKNOWN if server is None else str(server)
            found[name] = found.get(name, 0) + int(count)
    return dict(sorted(found.items(), key=lambda item: -item[1]))


def server_identity(model: str, api_base: str | None, cache_as: str | None = None) -> str:
    """The server's identity in cache keys (see the module docstring for the rules).

    Args:
        model: the model string; its provider prefix decides which endpoint is "default".
        api_base: the server's base URL, or None for the provider's own endpoint.
        cache_as: a server identity chosen on purpose; overrides api_base.
    """
    if api_base is None and model.startswith("openai/"):
        api_base = os.environ.get("OPENAI_BASE_URL") or None  # what the openai SDK calls
    return _identity(model.partition("/")[0] if "/" in model else "", api_base, cache_as)


@functools.lru_cache(maxsize=256)
def _identity(provider: str, api_base: str | None, cache_as: str | None) -> str:
    """server_identity after the environment is read (cached: it runs on every call)."""
    if cache_as is not None:
        if not cache_as.strip():
            raise JudgeError(
                "cache_as (--cache-as) is empty: give the server a name (e.g. 'gpu1'), "
                "or leave it unset to use api_base"
            )
        if "://" not in cache_as:
            return cache_as.strip()
        api_base = cache_as
    if api_base is None:
        return DEFAULT
    url = normalise_url(api_base)
    return DEFAULT if url in _PROVIDER_ENDPOINTS.get(provider, ()) else url
