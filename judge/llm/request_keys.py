"""Cache keys built from parts whose canonical JSON is known already, so a request's
largest parts are not encoded again for every key.

A key is the sha256 of the canonical JSON of a request's material (`judge.cache.store.
cache_key`). Canonical JSON sorts the keys and has no whitespace, so the text can be put
together from the texts of the values: an output schema's is made once per model, and a
prompt's system message, the same for every row, is escaped once per run. A `KeyTemplate`
goes further for requests that differ in one value only (one judge's messages, one
model's texts to embed): the text around that value is laid out once, and the hash of
the text before it is computed once and copied for every key. For messages, the hash
goes on through the first message (a prompt's system message, kilobytes long and the same
for every row), so a key hashes only the row's own text.
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
        # The hash of the head and a first message's text, by that message's (content, role).
        self._after_first: dict[tuple[str, str], Any] = {}

    def key(self, value_json: str) -> str:
        """The key of the request whose value under the template's name has this
        canonical JSON."""
        digest = self._head.copy()
        digest.update(value_json.encode("utf-8"))
        digest.update(self._tail)
        return digest.hexdigest()

    def messages_key(self, messages: Sequence[Any]) -> str:
        """`key(messages_json(messages))`: the same text hashed, but the head with the first
        message is hashed once per first message (a few are kept), not for every key."""
        for message in messages:
            if not _plain(message):
                return self.key(messages_json(messages))  # another shape: encoded as it is
        if not messages:
            return self.key("[]")
        first = messages[0]
        found = (first["content"], first["role"])
        digest = self._after_first.get(found)
        if digest is None:
            if len(self._after_first) >= _FIRST_MESSAGES:  # a bound, not a working size
                self._after_first.clear()
            digest = self._head.copy()
            digest.update(f"[{_message_json(first)}".encode())
            self._after_first[found] = digest
        digest = digest.copy()
        rest = "".join(["," + _message_json(m) for m in messages[1:]])
        digest.update(f"{rest}]".encode())
        digest.update(self._tail)
        return digest.hexdigest()


# First messages remembered per template: a prompt has one system message (or a few, when
# a variable is in it); more means messages that differ from the first, as a caller's own.
_FIRST_MESSAGES = 16


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
    if not all(_plain(m) for m in messages):
        return canonical_json(list(messages))  # another shape: encoded as it is
    return "[" + ",".join([_message_json(m) for m in messages]) + "]"


def _plain(message: Any) -> bool:
    """Whether a message is a dict of a text role and a text content, and nothing else."""
    return (
        type(message) is dict
        and len(message) == 2
        and type(message.get("role")) is str
        and type(message.get("content")) is str
    )


def _message_json(message: dict[str, str]) -> str:
    """The canonical JSON of a plain message (see `_plain`)."""
    return f'{{"content":{_text_json(message["content"])},"role":{_text_json(message["role"])}}}'


@functools.lru_cache(maxsize=64)
def _text_json(text: str) -> str:
    """The canonical JSON of a string; the last few are kept (system messages recur)."""
    return canonical_json(text)


@functools.cache
def schema_text(output: type[BaseModel]) -> str:
    """The canonical JSON of an output model's schema, made once (most of a key's text)."""
    return canonical_json(schema_of(output))
