"""Agreement measures between a judge's scores and people's labels, numpy only.

Every measure is written on weighted rows: a (resamples, n) array counting how often each row
was drawn. Weights of one give the measure itself; bootstrap weights give its resamples,
computed exactly as if the drawn rows were copied (see `judge.stats.bootstrap_ci_of`). Ties
are handled exactly: average ranks (Spearman, and AUROC by the Mann-Whitney rank formula,
where a tie counts half) and tau-b (Kendall). Undefined values are NaN.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

NAN = math.nan


class Ties:
    """The distinct values of one variable, ascending, and which of them each row holds."""

    def __init__(self, values: np.ndarray):
        self.order = np.argsort(values, kind="stable")
        ordered = values[self.order]
        new = np.r_[True, ordered[1:] != ordered[:-1]]
        self.starts = np.flatnonzero(new)
        self.values = ordered[self.starts]
        self.group = np.empty(values.size, dtype=np.int64)
        self.group[self.order] = np.cumsum(new) - 1

    def counts(self, weights: np.ndarray) -> np.ndarray:
        """Weight of each distinct value per resample: (resamples, distinct)."""
        drawn = np.take(weights, self.order, axis=1)  # faster than weights[:, order]
        if self.starts.size == self.order.size:  # no ties: nothing to add up
            return drawn
        return np.add.reduceat(drawn, self.starts, axis=1)

    def ranks(self, weights: np.ndarray) -> np.ndarray:
        """Each row's average rank (from 1) among the weighted rows: (resamples, n)."""
        counts = self.counts(weights)
        # A value held by c rows after p lower ones has ranks p+1 .. p+c, averaging p + (c+1)/2.
        average = np.cumsum(counts, axis=1) - (counts - 1) / 2
        return average[:, self.group]

    def constant(self, weights: np.ndarray) -> np.ndarray:
        """Whether fewer than two distinct values were drawn, per resample."""
        return np.asarray(np.count_nonzero(self.counts(weights), axis=1) < 2)


def _divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0."""
    out = np.full(np.broadcast(num, den).shape, NAN)
    np.divide(num, den, out=out, where=den != 0)
    return out


def auroc(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Area under the ROC curve of scores for labels 1 vs 0 (Mann-Whitney, ties half)."""
    positive = weights * labels
    pos = positive.sum(axis=1)
    neg = weights.sum(axis=1) - pos
    rank_sum = (positive * Ties(scores).ranks(weights)).sum(axis=1)
    return _divide(rank_sum - pos * (pos + 1) / 2, pos * neg)


def confusion(predicted: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted (tp, fn, fp, tn) of 0/1 predictions, class 1 positive: (resamples, 4)."""
    cells = [labels * predicted, labels * (1 - predicted), (1 - labels) * predicted]
    cells.append((1 - labels) * (1 - predicted))
    return np.stack([weights @ c for c in cells], axis=-1)


def classification(counts: np.ndarray) -> np.ndarray:
    """(balanced accuracy, F1 of class 0, Cohen's kappa) from (..., 4) confusion counts."""
    tp, fn, fp, tn = (counts[..., i] for i in range(4))
    pos, neg, total = tp + fn, fp + tn, tp + fn + fp + tn
    # Balanced accuracy needs both classes; with one, it is undefined rather than a recall.
    balanced = (_divide(tp, pos) + _divide(tn, neg)) / 2
    # F1 of the negative class (label 0, "unfaithful"): the cases a judge exists to catch.
    f1_negative = _divide(2 * tn, 2 * tn + fn + fp)
    observed = _divide(tp + tn, total)
    expected = _divide(pos * (tp + fp) + neg * (fn + tn), total * total)
    kappa = _divide(observed - expected, 1 - expected)
    return np.stack([balanced, f1_negative, kappa], axis=-1)


def best_threshold(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(threshold, balanced accuracy, F1 of class 0, kappa) at the best cut: (resamples, 4).

    A row is predicted 1 when its score >= the threshold. Candidates are the scores drawn;
    the best maximises balanced accuracy, and among equally good cuts the one nearest 0.5
    (then the lower) is chosen, so the conventional cut wins when it is as good.
    """
    ties = Ties(scores)
    pos_at, neg_at = ties.counts(weights * labels), ties.counts(weights * (1 - labels))
    # Rows at or above each distinct score: reversed cumulative sums.
    tp = np.cumsum(pos_at[:, ::-1], axis=1)[:, ::-1]
    fp = np.cumsum(neg_at[:, ::-1], axis=1)[:, ::-1]
    pos, neg = tp[:, :1], fp[:, :1]
    with np.errstate(divide="ignore", invalid="ignore"):  # one class drawn: NaN, handled below
        balanced = (tp / pos + (neg - fp) / neg) / 2
    drawn = (pos_at + neg_at) > 0
    candidate = np.where(drawn & (pos > 0) & (neg > 0), balanced, -np.inf)
    best = candidate.max(axis=1, keepdims=True)
    distance = np.round(np.abs(ties.values - 0.5), 12)  # |0.3 - 0.5| == |0.7 - 0.5|
    near = np.where(candidate >= best - 1e-12, distance, np.inf)
    chosen = np.argmin(near, axis=1)
    rows = np.arange(weights.shape[0])
    tp_at, fp_at = tp[rows, chosen], fp[rows, chosen]
    counts = np.stack([tp_at, pos[:, 0] - tp_at, fp_at, neg[:, 0] - fp_at], axis=-1)
    out = np.column_stack([ties.values[chosen], classification(counts)])
    out[np.isinf(best[:, 0])] = NAN  # one class drawn: no cut separates anything
    return out


def _pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted Pearson correlation of x and y ((resamples, n) or (n,)) per resample."""
    total = weights.sum(axis=1, keepdims=True)
    dx = x - (weights * x).sum(axis=1, keepdims=True) / total
    dy = y - (weights * y).sum(axis=1, keepdims=True) / total
    cov = (weights * dx * dy).sum(axis=1)
    var = (weights * dx * dx).sum(axis=1) * (weights * dy * dy).sum(axis=1)
    return np.asarray(np.clip(_divide(cov, np.sqrt(var)), -1.0, 1.0))


def pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson's r; NaN when either variable is constant."""
    r = _pearson(x, y, weights)
    # Tested on the distinct values, not on a float variance that rounding may leave at 1e-34.
    r[Ties(x).constant(weights) | Ties(y).constant(weights)] = NAN
    return r


def spearman(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's rho: Pearson's r of average ranks; NaN when either variable is constant."""
    tx, ty = Ties(x), Ties(y)
    rho = _pearson(tx.ranks(weights), ty.ranks(weights), weights)
    rho[tx.constant(weights) | ty.constant(weights)] = NAN
    return rho


def kendall_tau_b(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Kendall's tau-b; NaN when either variable is constant. Uses an n-by-n matrix."""
    tx, ty = Ties(x), Ties(y)
    # +1 for a concordant pair, -1 for a discordant one, 0 for a tie in x or y.
    pairs = (np.sign(x[:, None] - x[None, :]) * np.sign(y[:, None] - y[None, :])).astype(np.float32)
    # float32 halves the time and memory and stays exact: weights are whole counts, so every
    # sum in weights @ pairs is a whole number no larger than the rows drawn (< 2^24).
    per_row = (weights.astype(np.float32) @ pairs).astype(np.float64)
    difference = (per_row * weights).sum(axis=1) / 2
    total = weights.sum(axis=1)
    all_pairs = total * (total - 1) / 2
    cx, cy = tx.counts(weights), ty.counts(weights)
    untied_x = all_pairs - (cx * (cx - 1) / 2).sum(axis=1)
    untied_y = all_pairs - (cy * (cy - 1) / 2).sum(axis=1)
    return np.asarray(np.clip(_divide(difference, np.sqrt(untied_x * untied_y)), -1.0, 1.0))


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test of wins vs losses (ties left out); NaN with no untied pair.

    The p-value sums the probabilities, under a fair coin, of every outcome no more likely
    than the observed one (as scipy.stats.binomtest does), in exact integer arithmetic: with
    a fair coin those are the outcomes at least as far from n/2, in both tails.
    """
    n = wins + losses
    if n == 0:
        return NAN
    fewer = min(wins, losses)
    if 2 * fewer == n:
        return 1.0
    tail, term = 0, 1  # term = C(n, k)
    for k in range(fewer + 1):
        tail += term
        term = term * (n - k) // (k + 1)
    return float(Fraction(2 * tail, 2**n))


def fleiss_kappa(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Fleiss' kappa of rows rated by several people (Fleiss 1971), per resample.

    Args:
        counts: (n, categories): how many people put each row in each category; a row
            needs two ratings or more (rows may have different numbers of raters: each
            row's agreement is over its own pairs of raters, as in Fleiss's formula).
        weights: (resamples, n) draws of the rows.

    Returns:
        (resamples,) kappa; NaN when every rating of the drawn rows is one category.
    """
    raters = counts.sum(axis=1)
    # Each row's share of agreeing pairs of raters: sum_j n_ij (n_ij - 1) / (n_i (n_i - 1)).
    agreeing = (counts * (counts - 1)).sum(axis=1) / (raters * (raters - 1))
    observed = _divide(weights @ agreeing, weights.sum(axis=1))
    shares = _divide(weights @ counts, (weights @ raters)[:, None])
    expected = (shares * shares).sum(axis=1)
    return _divide(observed - expected, 1 - expected)
