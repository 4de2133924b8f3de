"""Deterministic scorers of the generation metrics: pure functions on judged data, no LLM."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def context_precision(relevance: Sequence[int | bool]) -> float:
    """Rank-weighted precision of the contexts judged relevant (seed 000's formula).

    Args:
        relevance: 1/True for each retrieved context judged relevant, 0/False otherwise,
            in retrieval order.

    Returns:
        sum over relevant ranks k of precision@k, divided by the number of relevant
        contexts; 1.0 exactly when every relevant context comes first, 0.0 when none is
        relevant.
    """
    total, seen = 0.0, 0
    for rank, relevant in enumerate(relevance, start=1):
        if relevant:
            seen += 1
            total += seen / rank
    return total / seen if seen else 0.0


def answer_relevancy(similarities: Sequence[float], *, noncommittal: bool = False) -> float:
    """Mean cosine similarity of the reverse-generated questions to the original question.

    Args:
        similarities: cos(e_question, e_reverse_i) for each reverse question.
        noncommittal: the answer evades the question ("I don't know"); scores 0.

    Returns:
        The mean similarity, or 0.0 for a noncommittal answer; NaN when there is no
        reverse question to compare.
    """
    if noncommittal:
        return 0.0
    if len(similarities) == 0:
        return float("nan")
    return float(np.mean(np.asarray(similarities, dtype=np.float64)))
