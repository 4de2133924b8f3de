"""Cache keys built from parts whose canonical JSON is known already, so a request's
largest parts are not encoded again for every key.

A key is the sha256 of the canonical JSON of a request's material (`judge.cache.store.
cache_key`). Canonical JSON sorts the keys and has no whitespace, so the text can be put
together from the texts of the values: an output schema's is made once per model, and a
prompt's system message, the same for every row, is escaped once per run. A `KeyTemplate`
goes further for requests that differ in one value only (one judge's messages, one
model's texts to embed): the text around that value is laid out once, and the hash of
the text before it is computed once and copied for every key.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from judge.json_values import canonical_json
from judge.llm.structured import schema_of


class KeyTemplate:
    """`cache_key` of requests whose material differs only in the value under one name.

    Args:
        fixed: the material's other values.
        name: the name of the value that differs between requests.
        encoded: the canonical JSON text of some of `fixed`'s values, by name (they are
            not encoded again; a name missing from `fixed` is added with that value).
    """

    def __init__(self, fixed: Mapping[str, Any], name: str, encoded: Mapping[str, str] = {}):
        names = tuple(sorted({*encoded, name}))
        rest = {k: v for k, v in fixed.items() if k not in encoded and k != name}
        pieces = _pieces(rest, names)
        head, text = "", pieces[0]
        for gap, after in zip(names, pieces[1:], strict=True):
            if gap == name:
                head, text = text, ""
            else:
                text += encoded[gap]
            text += after
        self._head = hashlib.sha256(head.encode("utf-8"))
        self._tail = text.encode("utf-8")

    def key(self, value_json: str) -> str:
        """The key of the request whose value under the template's name has this
        canonical JSON."""
        digest = self._head.copy()
        digest.update(value_json.encode("utf-8"))
        digest.update(self._tail)
        return digest.hexdigest()


def _pieces(fixed: Mapping[str, Any], names: tuple[str, ...]) -> list[str]:
    """The canonical JSON of the fixed values with a gap for each encoded name's value:
    the text before the first gap, then the text after each gap."""
    pieces = []
    text = "{"
    low: str | None = None
    for high in [*names, None]:
        group = {
            k: v
            for k, v in fixed.items()
            if (low is None or k > low) and (high is None or k < high)
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
