"""What the framework adapters share: their error, and how a framework object is recognised
without importing the framework."""

from __future__ import annotations

from typing import Any

from judge.errors import JudgeError


class AdapterError(JudgeError):
    """A framework object judge cannot ask, or an output judge cannot read as a reply."""


def defined_in(obj: Any, *prefixes: str) -> bool:
    """Whether `obj`'s class, or a class it derives from, is defined in a module under one of
    `prefixes` ("langchain_core."): a look at names only, the framework is not imported."""
    return any(cls.__module__.startswith(prefixes) for cls in type(obj).__mro__)


def first_occurrences(
    ids: list[str], scores: list[float] | None
) -> tuple[list[str], list[float] | None]:
    """The ids with repeats dropped, each kept at its first (best) rank, with its score."""
    seen: set[str] = set()
    kept: list[int] = []
    for i, item in enumerate(ids):
        if item not in seen:
            seen.add(item)
            kept.append(i)
    return [ids[i] for i in kept], None if scores is None else [scores[i] for i in kept]
