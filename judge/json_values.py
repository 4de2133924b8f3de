"""JSON values of judge's data: canonical text for hashes and keys, and NaN written as null."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same value always gives the same text."""
    return _CANONICAL.encode(value)


# What json.dumps(value, sort_keys=True, ...) builds on every call, made once.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def sha256_hex(text: str) -> str:
    """Hex sha256 of the UTF-8 encoding of text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def nan_to_null(value: Any) -> Any:
    """A copy of value with every float NaN replaced by None (JSON's null), at any depth.

    Undefined scores are NaN in Python objects and pandas, and null in JSON files.
    """
    # Exact types first (a row's evidence holds hundreds of leaves); subclasses (numpy
    # floats, OrderedDict, named tuples) take the isinstance route below.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return None if value != value else value
    if kind is dict:
        return {k: nan_to_null(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [nan_to_null(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: nan_to_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [nan_to_null(v) for v in value]
    return value
