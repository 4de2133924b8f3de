"""One cache entry: its key, its stored columns, and the checksums checked on every read."""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from judge.json_values import canonical_json, sha256_hex

COLUMNS = (
    "key, kind, request, response, model, resolved_model, prompt, prompt_version, mode, "
    "usage, created"
)


# What a full read takes: the response as bytes (its checksum is of its UTF-8 bytes, and a
# text damaged into invalid UTF-8 must be a damaged entry, not an SQLite decoding error).
READ = (
    "key, kind, request, CAST(response AS BLOB), model, resolved_model, prompt,"
    " prompt_version, mode, usage, created, response_crc, vector_crc, vector"
)


@dataclass(frozen=True)
class CacheEntry:
    """One stored judgment (kind "chat") or embedding (kind "embedding")."""

    key: str
    kind: str
    request: dict[str, Any]
    response: Any
    model: str
    resolved_model: str | None = None
    prompt: str | None = None
    prompt_version: str | None = None
    mode: str | None = None
    usage: dict[str, Any] | None = None
    created: float = 0.0


def vector_blob(response: Any) -> bytes | None:
    """An embedding response's floats as little-endian float64 bytes (stored beside its
    JSON and read instead), or None when it is not a list of floats only."""
    if not isinstance(response, list) or not all(type(x) is float for x in response):
        return None
    return struct.pack(f"<{len(response)}d", *response)


def checksum(key: str | bytes, data: bytes) -> int:
    """The crc32 of data seeded with the crc32 of its key: an entry's bytes found under
    another key (a damaged index) do not match either."""
    seed = zlib.crc32(key if isinstance(key, bytes) else key.encode())
    return zlib.crc32(data, seed)


def cache_key(request: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the request's key material."""
    return sha256_hex(canonical_json(request))


# The kinds of damage `Cache.verify` reports, one line each.
BAD_RESPONSE = "with a response that does not match its checksum"
BAD_VECTOR = "with vector bytes that do not match their checksum"
_WHY = {
    BAD_RESPONSE: "its response does not match its checksum",
    BAD_VECTOR: "its vector bytes do not match their checksum",
}


def damage_of(
    key: bytes, response_crc: Any, vector_crc: Any, vector: Any, response: Any
) -> str | None:
    """The kind of damage of an entry's stored values, or None when they check out."""
    if vector is not None and not (
        isinstance(vector, bytes)
        and len(vector) % 8 == 0
        and isinstance(vector_crc, int)
        and checksum(key, vector) == vector_crc
    ):
        return BAD_VECTOR
    if response is not None and not (
        isinstance(response, bytes)
        and isinstance(response_crc, int)
        and checksum(key, response) == response_crc
    ):
        return BAD_RESPONSE
    return None


def checked_response(key: str, row: tuple[Any, ...]) -> tuple[Any, str | None]:
    """get_response's row checked: (the value, None), or (None, what is damaged). Inlined
    checks: this is every cache hit's path."""
    response_crc, vector_crc, vector, response = row
    seed = zlib.crc32(key.encode())
    if vector is not None:
        if type(vector) is not bytes or len(vector) % 8 or zlib.crc32(vector, seed) != vector_crc:
            return None, _WHY[BAD_VECTOR]
        return np.frombuffer(vector, dtype="<f8"), None  # no copy, no list of float objects
    if type(response) is not bytes or zlib.crc32(response, seed) != response_crc:
        return None, _WHY[BAD_RESPONSE]
    try:  # decoded first: json.loads of bytes guesses their encoding, in Python code
        return json.loads(response.decode()), None
    except ValueError:  # written so (a checksum matches what was stored, even not JSON)
        return None, "its response is not JSON"


def checked_entry(key: str, row: tuple[Any, ...]) -> tuple[CacheEntry | None, str | None]:
    """A full row checked: (the entry, None), or (None, what is damaged)."""
    *columns, response_crc, vector_crc, vector = row
    damage = damage_of(key.encode(), response_crc, vector_crc, vector, columns[3])
    if damage is not None:
        return None, _WHY[damage]
    try:
        return _entry(tuple(columns)), None
    except (ValueError, TypeError) as exc:
        return None, f"it is not JSON ({exc})"


def _entry(row: tuple[Any, ...]) -> CacheEntry:
    key, kind, request, response, model, resolved, prompt, version, mode, usage, created = row
    return CacheEntry(
        key=key,
        kind=kind,
        request=json.loads(request),
        response=json.loads(response),
        model=model,
        resolved_model=resolved,
        prompt=prompt,
        prompt_version=version,
        mode=mode,
        usage=None if usage is None else json.loads(usage),
        created=created,
    )
