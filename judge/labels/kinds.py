"""The agreement measures of each kind of label, with 95% bootstrap intervals.

A measure undefined for the data (AUROC when every label is 1) is NaN with a note saying why,
never an exception. Resamples where a measure is undefined are left out of its interval, and
the note says how many.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from judge.labels import measures
from judge.stats import BOOTSTRAP_RESAMPLES, bootstrap_ci, bootstrap_ci_of

BINARY = (
    "auroc",
    "balanced_accuracy@0.5",
    "f1_negative@0.5",
    "kappa@0.5",
    "best_threshold",
    "balanced_accuracy@best",
    "f1_negative@best",
    "kappa@best",
)
GRADED = ("spearman", "kendall_tau_b", "pearson")
PAIRWISE = ("accuracy", "tie_rate", "sign_test_p")


@dataclass(frozen=True)
class Measure:
    """A measure's value and 95% bootstrap interval (NaN when undefined) and why, if needed."""

    value: float
    ci_low: float
    ci_high: float
    note: str | None = None


def _with_intervals(
    names: tuple[str, ...],
    statistic: Callable[[np.ndarray], np.ndarray],
    n: int,
    undefined: str,
) -> dict[str, Measure]:
    """Each named column of `statistic` on the rows, with its bootstrap interval."""
    if n == 0:
        return {name: Measure(math.nan, math.nan, math.nan, "no scored rows") for name in names}
    point = statistic(np.ones((1, n)))[0]
    low, high, left_out = bootstrap_ci_of(statistic, n)
    out = {}
    for j, name in enumerate(names):
        if math.isnan(point[j]):
            out[name] = Measure(math.nan, math.nan, math.nan, undefined)
            continue
        note = (
            f"{left_out[j]} of {BOOTSTRAP_RESAMPLES} resamples undefined (left out)"
            if left_out[j]
            else None
        )
        out[name] = Measure(float(point[j]), float(low[j]), float(high[j]), note)
    return out


def binary(scores: np.ndarray, labels: np.ndarray) -> tuple[dict[str, Measure], dict[str, int]]:
    """AUROC; balanced accuracy, F1 of class 0 and kappa at 0.5 and at the best threshold.

    Args:
        scores: the judge's scores, higher meaning more faithful/relevant.
        labels: 1 (faithful/relevant) or 0 per row.
    """
    predicted = (scores >= 0.5).astype(np.float64)

    def statistic(weights: np.ndarray) -> np.ndarray:
        at_half = measures.classification(measures.confusion(predicted, labels, weights))
        return np.column_stack(
            [
                measures.auroc(scores, labels, weights),
                at_half,
                measures.best_threshold(scores, labels, weights),
            ]
        )

    positive = int(labels.sum())
    counts = {"positive": positive, "negative": int(labels.size - positive)}
    one_class = labels.size > 0 and positive in (0, labels.size)
    undefined = (
        f"every scored row is labelled {1 if positive else 0}: needs both 0 and 1"
        if one_class
        else "undefined for these rows"
    )
    return _with_intervals(BINARY, statistic, labels.size, undefined), counts


def graded(scores: np.ndarray, labels: np.ndarray) -> tuple[dict[str, Measure], dict[str, int]]:
    """Spearman's rho, Kendall's tau-b and Pearson's r of scores against graded labels."""

    def statistic(weights: np.ndarray) -> np.ndarray:
        return np.column_stack(
            [
                measures.spearman(scores, labels, weights),
                measures.kendall_tau_b(scores, labels, weights),
                measures.pearson(scores, labels, weights),
            ]
        )

    counts = {"distinct_labels": len(set(labels.tolist()))}
    counts["distinct_scores"] = len(set(scores.tolist()))
    undefined = (
        "needs two scored rows"
        if labels.size < 2
        else "every label is the same"
        if counts["distinct_labels"] < 2
        else "the judge gave every row the same score"
        if counts["distinct_scores"] < 2
        else "undefined for these rows"
    )
    return _with_intervals(GRADED, statistic, labels.size, undefined), counts


def pairwise(preferred: np.ndarray, other: np.ndarray) -> tuple[dict[str, Measure], dict[str, int]]:
    """Accuracy (ties count 0.5), tie rate and an exact sign test, per pair of scores.

    Args:
        preferred: the judge's score of each pair's preferred row (higher = better).
        other: its score of the other row.
    """
    wins, ties = preferred > other, preferred == other
    counts = {"wins": int(wins.sum()), "ties": int(ties.sum())}
    counts["losses"] = int(preferred.size - counts["wins"] - counts["ties"])
    out = {}
    for name, values in (("accuracy", wins + 0.5 * ties), ("tie_rate", ties * 1.0)):
        if values.size == 0:
            out[name] = Measure(math.nan, math.nan, math.nan, "no scored pairs")
            continue
        low, high = bootstrap_ci(values.astype(np.float64), bounds=(0.0, 1.0))
        out[name] = Measure(float(values.mean()), low, high)
    p = measures.sign_test(counts["wins"], counts["losses"])
    out["sign_test_p"] = Measure(
        p,
        math.nan,
        math.nan,
        "exact two-sided sign test, ties left out; a p-value has no interval"
        if not math.isnan(p)
        else "undefined: no untied pair",
    )
    return out, counts
