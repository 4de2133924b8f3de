"""A run's memory of the cached responses it has decoded, so a repeated request skips the
SQLite lookup and the JSON decoding (an embedding vector's floats cost the most).

Bounded by an estimate of the memory the decoded values hold; the least recently used go
first. It only remembers what the cache returned, keyed by the cache key (which holds the
model, server, prompt version and schema), so it never answers what the cache would not.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

# A few MiB: what a run meets again is mostly near (a row's own requests, a question's
# embedding in the rows about it), and a sample met again whole is a replay's `SampleMemo`'s.
# 64 MiB (a cached vector once cost the most to decode, it is now read from bytes) kept
# most of a replay of rows all different, each met once: 90 MB more at the peak of 10,000
# such rows, and the garbage collector's passes over them 1.0-1.2 s of their 10-15 s of
# CPU (0.2 s with 4 MiB).
DEFAULT_BYTES = 4 * 2**20
# Estimates of what a decoded value holds: a list of n floats is about 32 bytes a float
# (8 for the pointer, 24 for the float); a chat reply (a few short strings and numbers)
# is counted as 2 KiB, more than the built-in judges' replies hold.
_FLOAT_BYTES = 32
_REPLY_BYTES = 2048


def estimated_bytes(value: Any) -> int:
    """About how much memory a decoded response holds."""
    if isinstance(value, list) and value and isinstance(value[0], float):
        return 64 + _FLOAT_BYTES * len(value)
    if isinstance(value, np.ndarray):  # an embedding read from its bytes
        return 112 + value.nbytes
    return _REPLY_BYTES


class ResponseMemo:
    """Decoded cache responses by key, least recently used dropped past `limit` bytes.

    Args:
        limit: the memory budget in (estimated) bytes; 0 remembers nothing.
    """

    def __init__(self, limit: int = DEFAULT_BYTES):
        self.limit = limit
        self.used = 0
        self._values: OrderedDict[str, tuple[Any, int]] = OrderedDict()

    def get(self, key: str) -> Any | None:
        """The value remembered under key (now the most recently used), or None."""
        found = self._values.get(key)
        if found is None:
            return None
        self._values.move_to_end(key)
        return found[0]

    def put(self, key: str, value: Any) -> None:
        """Remember a value; older ones are forgotten while over the budget."""
        size = estimated_bytes(value)
        if size > self.limit:
            return
        self.forget(key)
        self._values[key] = (value, size)
        self.used += size
        while self.used > self.limit:
            _, (_, dropped) = self._values.popitem(last=False)
            self.used -= dropped

    def forget(self, key: str) -> None:
        """Drop the value under key, if any (a new response was stored under it)."""
        found = self._values.pop(key, None)
        if found is not None:
            self.used -= found[1]

    def __len__(self) -> int:
        return len(self._values)
