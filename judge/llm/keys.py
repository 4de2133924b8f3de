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
    names = tuple(sorted(encoded))
    # The other values (model, server, prompt version, settings) are the same for every
    # call of one judge: their text around the encoded ones is made once.
    fixed = tuple((k, type(v), v) for k, v in material.items() if k not in encoded)
    if all(t in _SCALARS for _, t, _ in fixed):
        pieces = _cached_pieces(fixed, names)
    else:  # a list or a mapping among them: not hashable, laid out for this call
        pieces = _pieces(fixed, names)
    text = [pieces[0]]
    for name, after in zip(names, pieces[1:], strict=True):
        text += (encoded[name], after)
    return sha256_hex("".join(text))


# Exact types, not equality: 0, 0.0 and False are equal keys of a cache but encode apart.
_SCALARS = frozenset({str, int, float, bool, type(None)})


@functools.lru_cache(maxsize=256)
def _cached_pieces(fixed: tuple[tuple[str, type, Any], ...], names: tuple[str, ...]) -> list[str]:
    """_pieces, kept for the few combinations of fixed values a run has."""
    return _pieces(fixed, names)


def _pieces(fixed: tuple[tuple[str, type, Any], ...], names: tuple[str, ...]) -> list[str]:
    """The canonical JSON of the fixed values with a gap for each encoded name's value:
    the text before the first gap, then the text after each gap."""
    pieces = []
    text = "{"
    low: str | None = None
    for high in [*names, None]:
        group = {
            k: v for k, _, v in fixed if (low is None or k > low) and (high is None or k < high)
        }
        if group:
            text += ("," if text != "{" else "") + canonical_json(group)[1:-1]
        if high is not None:
            text += ("," if text != "{" else "") + f"{canonical_json(high)}:"
            pieces.append(text)
            text = ""
            low = high
    pieces.append(text + "}")
    return pieces


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
