"""Statistics of judge's summaries and A/B comparisons: the bootstrap interval of a mean (or of
any statistic of resampled rows), a paired randomisation test, and Holm-Bonferroni adjustment.
Seeded, so reruns print the same.

Rows that are turns of conversations are not independent: the `clusters` variants resample
whole conversations (a cluster bootstrap, and a randomisation test that flips the sign of a
whole conversation's differences); see `cluster_bootstrap_cis`."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from judge.threads import map_ahead

SEED = 0
BOOTSTRAP_RESAMPLES = 10_000
EXACT_LIMIT = 20  # up to 2^20 sign patterns are enumerated: the exact p-value
RANDOM_PERMUTATIONS = 200_000  # beyond: Monte Carlo, standard error <= 0.0011 at any p
# From this many values, a column with at most one distinct value in TIED_SHARE is resampled
# by counts of its distinct values (a multinomial draw of one value costs about twenty
# index draws: 64 leaves a margin).
TIED_FROM = 10_000
TIED_SHARE = 64


def _resamples(n: int) -> Iterator[np.ndarray]:
    """The seeded bootstrap draws of n rows: BOOTSTRAP_RESAMPLES rows of n indices, in chunks
    that bound the index matrix to ~16 MB. Every bootstrap in judge draws these."""
    rng = np.random.default_rng(SEED)
    step = max(1, 2_000_000 // n)
    for lo in range(0, BOOTSTRAP_RESAMPLES, step):
        yield rng.integers(0, n, size=(min(lo + step, BOOTSTRAP_RESAMPLES) - lo, n))


def bootstrap_ci(
    values: np.ndarray, level: float = 0.95, *, clusters: np.ndarray | None = None
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(values): of one metric, or of paired differences.

    Seeded, so the same values give the same interval byte for byte; NaN for no values.

    Args:
        values: the values (no NaN).
        level: the interval's coverage.
        clusters: the cluster (conversation) of each value, numbered 0..C-1: whole
            clusters are resampled (`cluster_bootstrap_cis`); None resamples values.
    """
    if clusters is not None:
        return cluster_bootstrap_cis([values], [clusters], level)[0]
    return bootstrap_cis([values], level)[0]


def bootstrap_cis(columns: Sequence[np.ndarray], level: float = 0.95) -> list[tuple[float, float]]:
    """`bootstrap_ci` of each column, each interval exactly as `bootstrap_ci` gives it alone.

    Below `TIED_FROM` values, and for columns with more distinct values than one in
    `TIED_SHARE`, the resamples draw row indices (`_resamples`); columns of one length
    share those draws, so k metrics cost one generation of the 10,000 x n indices, not k.
    A large column of few distinct values (most judged scores are ratios of small counts)
    draws instead how often each distinct value is drawn: the same bootstrap (rows drawn
    with replacement), from another seeded stream, in time proportional to the distinct
    values rather than to the rows.
    """
    out: list[tuple[float, float]] = [(math.nan, math.nan)] * len(columns)
    by_size: dict[int, list[int]] = {}
    tail = (1 - level) / 2
    for i, values in enumerate(columns):
        means = _tied_means(values)
        if means is not None:
            out[i] = _percentiles(means, tail)
        elif values.size:
            by_size.setdefault(values.size, []).append(i)
    # A chunk's means are taken in a thread while the next chunk's indices are drawn: numpy
    # does both without the GIL, so they overlap on a second core (100,000 rows: 11.3 ->
    # 6.9 s). The same draws and sums in the same order: the same intervals.
    for n, members in by_size.items():
        of_chunk = functools.partial(_chunk_means, [columns[i] for i in members])
        chunks = list(map_ahead(of_chunk, _resamples(n)))
        for k, i in enumerate(members):
            out[i] = _percentiles(np.concatenate([chunk[k] for chunk in chunks]), tail)
    return out


def cluster_bootstrap_cis(
    columns: Sequence[np.ndarray], clusters: Sequence[np.ndarray], level: float = 0.95
) -> list[tuple[float, float]]:
    """Percentile cluster-bootstrap interval of the mean of each column, its values grouped.

    The cluster (or "case") bootstrap of hierarchical data: each resample draws as many
    clusters as there are, uniformly with replacement, and keeps all the values of every
    cluster drawn; its statistic is the mean of the values drawn, sum(drawn clusters' sums)
    / sum(drawn clusters' sizes), the turn-weighted mean (a ratio estimator, the same point
    estimate as the plain mean of the column). Resampling the top stage only is the
    scheme Davison & Hinkley (1997, *Bootstrap Methods and their Application*, section 3.8)
    recommend, and the one Field & Welsh (2007, "Bootstrapping clustered data", JRSS B 69,
    369-390) show consistent for the variance when values within a cluster are correlated;
    resampling values alone treats correlated turns as independent evidence and gives too
    narrow an interval (by about the square root of the design effect).

    The draws are `_resamples(C)` for C clusters: the same seeded stream as `bootstrap_cis`,
    of cluster indices; columns with the same number of clusters share them.

    Args:
        columns: the values of each column (no NaN).
        clusters: per column, the cluster of each value: integers 0..C-1, every one used
            (a value alone in its cluster is resampled as a row is).
        level: the interval's coverage.

    Returns:
        (low, high) per column; NaN for a column of no values.
    """
    out: list[tuple[float, float]] = [(math.nan, math.nan)] * len(columns)
    tail = (1 - level) / 2
    by_size: dict[int, list[int]] = {}
    totals: list[tuple[np.ndarray, np.ndarray]] = []
    for i, (values, cluster) in enumerate(zip(columns, clusters, strict=True)):
        if values.shape != cluster.shape:
            raise ValueError(f"column {i}: {values.size} values, {cluster.size} cluster numbers")
        sums = np.bincount(cluster, weights=values) if values.size else np.zeros(0)
        sizes = np.bincount(cluster).astype(np.float64) if values.size else np.zeros(0)
        if np.any(sizes == 0):
            raise ValueError(f"column {i}: cluster numbers must run 0..C-1 with none unused")
        totals.append((sums, sizes))
        if values.size:
            by_size.setdefault(sums.size, []).append(i)
    for c, members in by_size.items():
        chunks: list[list[np.ndarray]] = [[] for _ in members]
        for draws in _resamples(c):
            for k, i in enumerate(members):
                sums, sizes = totals[i]
                chunks[k].append(sums[draws].sum(axis=1) / sizes[draws].sum(axis=1))
        for k, i in enumerate(members):
            out[i] = _percentiles(np.concatenate(chunks[k]), tail)
    return out


def cluster_totals(values: np.ndarray, clusters: np.ndarray | None) -> np.ndarray:
    """The sum of the values of each cluster (0..C-1), in cluster order; the values
    themselves when `clusters` is None."""
    if clusters is None:
        return values
    return np.bincount(clusters, weights=values, minlength=int(clusters.max(initial=-1)) + 1)


def _chunk_means(columns: list[np.ndarray], draws: np.ndarray) -> list[np.ndarray]:
    """Each column's resample means over one chunk of draws."""
    return [values[draws].mean(axis=1) for values in columns]


def _tied_means(values: np.ndarray) -> np.ndarray | None:
    """The resample means of a large column of few distinct values, drawn as multinomial
    counts of those values; None for another column (it draws row indices)."""
    n = values.size
    if n < TIED_FROM:
        return None
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size * TIED_SHARE > n:
        return None
    rng = np.random.default_rng(SEED)
    step = max(1, 2_000_000 // distinct.size)
    means = []
    for lo in range(0, BOOTSTRAP_RESAMPLES, step):
        drawn = rng.multinomial(n, counts / n, size=min(step, BOOTSTRAP_RESAMPLES - lo))
        means.append((drawn * distinct).sum(axis=1) / n)  # not BLAS: the same sum anywhere
    return np.concatenate(means)


def _percentiles(means: np.ndarray, tail: float) -> tuple[float, float]:
    low, high = np.quantile(means, [tail, 1 - tail])
    return (float(low), float(high))


def bootstrap_ci_of(
    statistic: Callable[[np.ndarray], np.ndarray], n: int, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile bootstrap intervals of statistics of n rows, resampled as in `bootstrap_ci`.

    The same seed and the same draws as `bootstrap_ci` (below `TIED_FROM` rows, or for
    values with many distinct ones), given to `statistic` as weights: a
    (resamples, n) array counting how often each row was drawn. `statistic` returns a
    (resamples, m) array, m statistics per resample, NaN where one is undefined (AUROC of a
    resample holding one class). Undefined resamples are left out of that interval.

    Returns:
        (low, high, undefined): three arrays of m values; NaN bounds when no resample was
        defined; `undefined` counts the resamples left out.
    """
    if n == 0:
        return (np.full(0, math.nan), np.full(0, math.nan), np.zeros(0, dtype=np.int64))
    chunks = []
    for draws in _resamples(n):
        size = draws.shape[0]
        # Row i of the chunk counts its draws: offset each row's indices into its own block.
        flat = (draws + n * np.arange(size)[:, None]).ravel()
        weights = np.bincount(flat, minlength=size * n).reshape(size, n).astype(np.float64)
        chunks.append(np.asarray(statistic(weights), dtype=np.float64).reshape(size, -1))
    values = np.concatenate(chunks)
    defined = ~np.isnan(values)
    tail = (1 - level) / 2
    low = np.full(values.shape[1], math.nan)
    high = np.full(values.shape[1], math.nan)
    for j in range(values.shape[1]):
        kept = values[defined[:, j], j]
        if kept.size:
            low[j], high[j] = np.quantile(kept, [tail, 1 - tail])
    return (low, high, (~defined).sum(axis=0))


def _count_extreme(diff: np.ndarray, signs: np.ndarray, observed: float) -> int:
    """How many sign patterns give |mean| at least the observed |mean| (with float slack)."""
    means = np.abs(signs @ diff) / diff.size
    return int(np.count_nonzero(means >= observed - 1e-12 * max(1.0, observed)))


def permutation_p_value(diff: np.ndarray, *, clusters: np.ndarray | None = None) -> float:
    """Two-sided paired randomisation test of mean(diff) = 0, flipping the sign of each pair.

    Exact (all 2^n patterns) for n <= 20; otherwise 200,000 random patterns, with the
    observed one counted, p = (extreme + 1) / (patterns + 1).

    With `clusters` (the conversation of each pair, numbered 0..C-1) the sign of a whole
    conversation is flipped at once: the test of its turns' differences summed, valid when
    a conversation's vector of differences is as likely as its negation under the null
    (the conversation, not the turn, is the exchangeable unit, as in a cluster-randomised
    trial's randomisation test; Gail et al. 1996, Statistics in Medicine 15, 1069-1092).
    mean(diff) is sum(totals) / n, so the test of the totals' mean is the same test.
    """
    if clusters is not None:
        return permutation_p_value(cluster_totals(diff, clusters))
    n = diff.size
    if n == 0:
        return math.nan
    observed = abs(float(diff.mean()))
    if observed == 0.0:
        return 1.0
    if n <= EXACT_LIMIT:
        total, extreme = 1 << n, 0
        bits = np.arange(n, dtype=np.int64)
        for lo in range(0, total, 1 << 16):
            patterns = np.arange(lo, min(lo + (1 << 16), total), dtype=np.int64)
            signs = 1.0 - 2.0 * ((patterns[:, None] >> bits) & 1)
            extreme += _count_extreme(diff, signs, observed)
        return extreme / total
    rng = np.random.default_rng(SEED)
    extreme, step = 0, max(1, 4_000_000 // n)
    for lo in range(0, RANDOM_PERMUTATIONS, step):
        size = min(step, RANDOM_PERMUTATIONS - lo)
        signs = rng.integers(0, 2, size=(size, n)) * 2.0 - 1.0
        extreme += _count_extreme(diff, signs, observed)
    return (extreme + 1) / (RANDOM_PERMUTATIONS + 1)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (NaN stays NaN and is not counted)."""
    indexed = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    m = len(indexed)
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted
