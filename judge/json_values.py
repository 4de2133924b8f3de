"""JSON values of judge's data: canonical text for hashes and keys, and NaN written as null."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same value always gives the same text."""
    return _CANONICAL.encode(value)


# What json.dumps(value, sort_keys=True, ...) builds on every call, made once.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def dumps_nan_as_null(value: Any) -> str:
    """json.dumps(value, ensure_ascii=False, sort_keys=True) with every float NaN written as
    null (`nan_to_null`), as results.jsonl and checkpoint lines are.

    Most values hold no NaN: encoded at once, they skip the copy of every leaf that
    nan_to_null makes, which cost more than the encoding; only a value that holds one
    (the strict encoder raises) is copied.
    """
    try:
        return _NO_NAN.encode(value)
    except ValueError:  # a NaN or an infinity somewhere: infinities stay as json.dumps writes them
        return _SORTED.encode(nan_to_null(value))


# json.dumps(value, ensure_ascii=False, sort_keys=True), refusing NaN and infinities or not.
_SORTED = json.JSONEncoder(sort_keys=True, ensure_ascii=False)
_NO_NAN = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False)


def sha256_hex(text: str) -> str:
    """Hex sha256 of the UTF-8 encoding of text; a lone surrogate (no Unicode text, which
    UTF-8 cannot encode) is hashed as its three bytes, so that text can be keyed and then
    refused where it would be written, not crash the hash."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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


_SCALARS = frozenset({int, float, bool, type(None)})


def lone_surrogate_in(value: Any) -> str | None:
    """Where a lone surrogate is in value (a string, or one inside lists, tuples, arrays
    and mappings, keys too), as "'\\ud800' at character 4"; None when there is none.

    A lone surrogate (half of a UTF-16 pair, what json.loads makes of "\\ud800") is no
    Unicode text: it cannot be written as UTF-8, so no hash, cache key or output line can
    hold it. Other objects are only ever written through repr(), which escapes them.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item.isascii():
                continue
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"{item[exc.start]!r} at character {exc.start}"
        elif type(item) in _SCALARS:
            # Before the Mapping check: isinstance against an ABC costs more than the rest
            # of the walk, and most of a trace's row is numbers and None.
            continue
        elif type(item) is dict or isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif hasattr(item, "tolist") and not isinstance(item, (bytes, int, float)):
            listed = item.tolist()  # numpy arrays of strings, from pandas
            if isinstance(listed, (list, str)):
                stack.append(listed)
    return None


def escape_surrogates(value: Any) -> Any:
    """A copy of a JSON value with every lone surrogate written as its escape (the six
    characters \\ud800), so it can be written as UTF-8 and shown; other text as it is."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, Mapping):
        return {escape_surrogates(k): escape_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escape_surrogates(v) for v in value]
    return value
