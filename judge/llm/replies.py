"""JSON in LLM replies: tolerant extraction of the JSON a reply means, and schema prompts."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _balanced(text: str, start: int) -> str | None:
    """The JSON object or array starting at text[start], found by bracket matching."""
    opening = text[start]
    closing = "}" if opening == "{" else "]"
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return text[start : i + 1] if c == closing else None
    return None


def json_candidates(text: str) -> list[Any]:
    """Every JSON value an LLM reply may mean: the whole text if it parses, else each
    fenced block and each top-level {...} object found in the prose, in order.

    Raises:
        ValueError: nothing in the text parses as JSON.
    """
    try:
        return [json.loads(text)]
    except json.JSONDecodeError as exc:
        first_error = exc
    found: list[Any] = []
    for fenced in (m.group(1).strip() for m in _FENCE.finditer(text)):
        try:
            found.append(json.loads(fenced))
        except json.JSONDecodeError:
            continue
    i = 0
    while i < len(text):
        if text[i] == "{":
            piece = _balanced(text, i)
            if piece is not None:
                try:
                    found.append(json.loads(piece))
                except json.JSONDecodeError:
                    pass  # a brace from quoted data: the real object may be inside it
                else:
                    i += len(piece)  # a whole object: its inner braces are its own
                    continue
        i += 1
    if not found:
        raise ValueError(f"the reply holds no parseable JSON object: {first_error}")
    return found


def schema_instructions(schema: dict[str, Any]) -> str:
    """Text that asks for JSON matching the schema, for servers without schema support."""
    return (
        "Reply with one JSON object only, no prose and no code fences, that matches this "
        "JSON schema:\n" + json.dumps(schema, ensure_ascii=False, sort_keys=True)
    )
