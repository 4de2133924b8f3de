"""JSON in and out of LLMs: canonical JSON for cache keys, tolerant extraction of replies."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same value always gives the same text."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(text: str) -> str:
    """Hex sha256 of the UTF-8 encoding of text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


def extract_json(text: str) -> Any:
    """Parse the JSON value in an LLM reply, tolerating code fences and prose around it.

    Raises:
        ValueError: no JSON object or array could be parsed from the text.
    """
    stripped = text.strip()
    candidates = [stripped]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    for i, c in enumerate(text):
        if c in "{[":
            found = _balanced(text, i)
            if found is not None:
                candidates.append(found)
                if c == "{":
                    break
    errors = []
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            errors.append(exc)
    detail = f": {errors[0]}" if errors else ""
    raise ValueError(f"the reply holds no parseable JSON object{detail}")


def schema_instructions(schema: dict[str, Any]) -> str:
    """Text that asks for JSON matching the schema, for servers without schema support."""
    return (
        "Reply with one JSON object only, no prose and no code fences, that matches this "
        "JSON schema:\n" + json.dumps(schema, ensure_ascii=False, sort_keys=True)
    )
