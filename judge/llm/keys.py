"""Cache keys built from parts whose canonical JSON is known already, so a request's
largest parts are not encoded again for every key.

A key is the sha256 of the canonical JSON of a request's material (`judge.llm.cache.
cache_key`). Canonical JSON sorts the keys and has no whitespace, so the text can be put
together from the texts of the values: an output schema's is made once per model, and a
prompt's system message, the same for every row, is escaped once per run.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from judge.json_values import canonical_json, sha256_hex
from judge.llm.structured import schema_of


def key_with(material: Mapping[str, Any], encoded: Mapping[str, str]) -> str:
    """`cache_key(material)`, where `encoded[name]` is canonical_json(material[name])
    already (a name missing from material is added with that value).

    Args:
        material: the request's material; its values under `encoded`'s names are not read.
        encoded: the canonical JSON text of some values, by name.
    """
    names = sorted(encoded)
    pieces = []
    low: str | None = None
    for high in [*names, None]:
        group = {
            k: v
            for k, v in material.items()
            if k not in encoded and (low is None or k > low) and (high is None or k < high)
        }
        if group:
            pieces.append(canonical_json(group)[1:-1])
        if high is not None:
            pieces.append(f"{canonical_json(high)}:{encoded[high]}")
            low = high
    return sha256_hex("{" + ",".join(pieces) + "}")


def messages_json(messages: Sequence[Any]) -> str:
    """canonical_json(list(messages)), each message's text escaped once while it recurs."""
    parts = []
    for message in messages:
        if not (
            type(message) is dict
            and len(message) == 2
            and type(message.get("role")) is str
            and type(message.get("content")) is str
        ):
            return canonical_json(list(messages))  # another shape: encoded as it is
        parts.append(
            f'{{"content":{_text_json(message["content"])},"role":{_text_json(message["role"])}}}'
        )
    return "[" + ",".join(parts) + "]"


@functools.lru_cache(maxsize=64)
def _text_json(text: str) -> str:
    """The canonical JSON of a string; the last few are kept (system messages recur)."""
    return canonical_json(text)


@functools.cache
def schema_text(output: type[BaseModel]) -> str:
    """The canonical JSON of an output model's schema, made once (most of a key's text)."""
    return canonical_json(schema_of(output))
