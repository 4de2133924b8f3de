"""Memory measured inside a test."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any


def peak_bytes(call: Callable[[], Any]) -> int:
    """The bytes `call()` allocated at its peak, beyond what was held before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
