"""Canonical JSON and sha256: the identity of cache keys, prompt versions and run fingerprints."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same value always gives the same text."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(text: str) -> str:
    """Hex sha256 of the UTF-8 encoding of text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
