"""Metrics of one ranked list, in the textbook form (Manning, Raghavan and Schütze,
"Introduction to Information Retrieval", 2008, chapter 8).

Each function takes the grades (or 0/1 relevance) of one query's results in rank order.
They are the textbook formulas, for explaining a number or checking a hand calculation;
`judge.ir.evaluate` computes the same values for many queries at once from qrels and runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

Gain = Literal["linear", "exponential"]


def _cut(grades: Sequence[float], k: int | None) -> Sequence[float]:
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return grades if k is None else grades[:k]


def _relevant(grade: float, level: int) -> bool:
    return grade >= level


def precision_at_k(relevance: Sequence[float], k: int, *, level: int = 1) -> float:
    """Relevant results in the top k / k (k counts even when fewer results were returned)."""
    return sum(_relevant(g, level) for g in _cut(relevance, k)) / k


def recall_at_k(relevance: Sequence[float], k: int, num_relevant: int, *, level: int = 1) -> float:
    """Relevant results in the top k / all relevant documents (0 if there are none)."""
    hits = sum(_relevant(g, level) for g in _cut(relevance, k))
    return hits / num_relevant if num_relevant > 0 else 0.0


def hit_rate_at_k(relevance: Sequence[float], k: int, *, level: int = 1) -> float:
    """1.0 if any of the top k results is relevant, else 0.0."""
    return float(any(_relevant(g, level) for g in _cut(relevance, k)))


def reciprocal_rank(relevance: Sequence[float], k: int | None = None, *, level: int = 1) -> float:
    """1 / rank of the first relevant result within the top k (all if k is None), else 0."""
    for rank, grade in enumerate(_cut(relevance, k), start=1):
        if _relevant(grade, level):
            return 1.0 / rank
    return 0.0


def average_precision(
    relevance: Sequence[float],
    num_relevant: int | None = None,
    k: int | None = None,
    *,
    level: int = 1,
) -> float:
    """Sum of precision at each relevant rank / number of relevant documents.

    Args:
        relevance: grades or 0/1 relevance of the results, in rank order.
        num_relevant: all relevant documents of the query (trec_eval's R); None takes the
            relevant results in the list (ragas's context precision), the same value as
            trec_eval's when every relevant doc was found.
        k: only ranks up to k contribute (trec_eval's map_cut).
        level: smallest grade that counts as relevant.
    """
    if num_relevant is None:
        num_relevant = sum(_relevant(g, level) for g in relevance)
    total, seen = 0.0, 0
    for rank, grade in enumerate(_cut(relevance, k), start=1):
        if _relevant(grade, level):
            seen += 1
            total += seen / rank
    return total / num_relevant if num_relevant > 0 else 0.0


def r_precision(relevance: Sequence[float], num_relevant: int, *, level: int = 1) -> float:
    """Relevant results in the top R / R, where R is the number of relevant documents."""
    if num_relevant <= 0:
        return 0.0
    return sum(_relevant(g, level) for g in relevance[:num_relevant]) / num_relevant


def dcg_at_k(grades: Sequence[float], k: int | None = None, *, gain: Gain = "linear") -> float:
    """Discounted cumulative gain: sum of gain(grade) / log2(rank + 1) over the top k.

    Args:
        grades: graded relevance of the results, in rank order; grades <= 0 gain nothing.
        k: cutoff; None sums the whole list.
        gain: "linear" uses the grade itself (Järvelin and Kekäläinen, "Cumulated
            gain-based evaluation of IR techniques", ACM TOIS 20(4), 2002; trec_eval);
            "exponential" uses 2^grade - 1 (Burges et al., "Learning to rank using
            gradient descent", ICML 2005).
    """
    if gain not in ("linear", "exponential"):
        raise ValueError(f"gain must be 'linear' or 'exponential', got {gain!r}")
    total = 0.0
    for rank, grade in enumerate(_cut(grades, k), start=1):
        if grade > 0:
            value = 2.0**grade - 1.0 if gain == "exponential" else float(grade)
            total += value / math.log2(rank + 1)
    return total


def ndcg_at_k(
    grades: Sequence[float],
    k: int | None = None,
    *,
    ideal: Sequence[float] | None = None,
    gain: Gain = "linear",
) -> float:
    """DCG of the ranking / DCG of the ideal ranking (0 when the ideal DCG is 0).

    Args:
        grades: graded relevance of the results, in rank order.
        k: cutoff; None uses the whole list.
        ideal: grades of all judged documents of the query (any order), from which the
            ideal ranking is built; None uses `grades` themselves (only the listed results
            were judged).
        gain: "linear" (trec_eval) or "exponential" (2^grade - 1).
    """
    best = sorted(grades if ideal is None else ideal, reverse=True)
    idcg = dcg_at_k(best, k, gain=gain)
    return dcg_at_k(grades, k, gain=gain) / idcg if idcg > 0 else 0.0
