"""Framework objects (a LangChain runnable, a LlamaIndex query engine) as judge apps.

Each adapter lives in its own module and imports its framework only when used, so the
base install never imports LangChain or LlamaIndex.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def adapt(obj: Any) -> Callable[[str], Any] | None:
    """The app (question -> reply mapping) of a framework object, or None when `obj` is
    not one judge has an adapter for."""
    return None  # TODO(issue 27): the LangChain and LlamaIndex adapters
