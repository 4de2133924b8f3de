"""Rows labelled by people whose faithfulness under the heuristic judge is known: binary
labels (with their scores) and pairwise preferences, for judge.agreement and `judge agreement`."""

from __future__ import annotations

from typing import Any

CONTEXTS = [
    "Python was created by Guido van Rossum.",
    "Paris is the capital of France.",
    "Water boils at 100 degrees.",
]
SUPPORTED = [c.rstrip(".") for c in CONTEXTS]
UNSUPPORTED = [
    "Python was created by Larry Wall",
    "Paris is the capital of Spain",
    "Water boils at 50 degrees",
]


def answer(supported: int, unsupported: int) -> str:
    """An answer whose faithfulness under the heuristic judge is s / (s + u)."""
    return " ".join(s + "." for s in SUPPORTED[:supported] + UNSUPPORTED[:unsupported])


def row(i: int, supported: int, unsupported: int, **columns: Any) -> dict[str, Any]:
    return {
        "id": f"r{i}",
        "question": f"What do you know? ({i})",
        "answer": answer(supported, unsupported),
        "contexts": CONTEXTS,
        **columns,
    }


# (supported, unsupported) claims -> faithfulness 1, 1, 2/3, 1/2, 0, 0, 1/3, 1
BINARY = [
    row(0, 2, 0, faithful=1, lang="en"),
    row(1, 3, 0, faithful=1, lang="zh"),
    row(2, 2, 1, faithful=1, lang="en"),
    row(3, 1, 1, faithful=0, lang="zh"),
    row(4, 0, 2, faithful=0, lang="en"),
    row(5, 0, 1, faithful=0, lang="zh"),
    row(6, 1, 2, faithful=1, lang="en"),  # the judge's worst miss: 1/3 for a faithful answer
    row(7, 1, 0, faithful=0, lang="zh"),  # and a false alarm the other way: 1 for label 0
    row(8, 0, 0, faithful=1, lang="en"),  # empty answer: NaN, empty_answer
]
SCORES = [1, 1, 2 / 3, 1 / 2, 0, 0, 1 / 3, 1]  # rows 0-7


PAIRS = [
    # pair a: preferred faithful (1 vs 0), b: tie (1/2 vs 1/2), c: the wrong way (0 vs 1),
    # d: preferred 1 vs 2/3
    row(0, 2, 0, pair="a", better=1),
    row(1, 0, 2, pair="a", better=0),
    row(2, 1, 1, pair="b", better=1),
    row(3, 2, 2, pair="b", better=0),
    row(4, 0, 1, pair="c", better=1),
    row(5, 3, 0, pair="c", better=0),
    row(6, 1, 0, pair="d", better=1),
    row(7, 2, 1, pair="d", better=0),
]
