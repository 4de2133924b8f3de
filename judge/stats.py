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
from dataclasses import asdict, dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np

from judge.errors import InputFormatError
from judge.formatting import counted
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
    values: np.ndarray,
    level: float = 0.95,
    *,
    clusters: np.ndarray | None = None,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """Expanded percentile bootstrap interval of mean(values): of one metric, or of paired
    differences.

    The percentiles are taken at the level `expanded_tail` gives for n resampled units (rows,
    or conversations with `clusters`): the plain percentile interval is too narrow with few
    units (about 83% coverage for a "95%" interval at n = 5). One unit, or units whose means
    are all equal, give no bootstrap interval: `few_units_interval` says what is given
    instead (NaN bounds, or the exact bound when `bounds` is known and every value is at one
    of its ends) and `interval_note` why.

    Seeded, so the same values give the same interval byte for byte; NaN for no values.

    Args:
        values: the values (no NaN).
        level: the interval's coverage.
        clusters: the cluster (conversation) of each value, numbered 0..C-1: whole
            clusters are resampled (`cluster_bootstrap_cis`); None resamples values.
        bounds: the range every value is known to lie in, e.g. (0, 1) for judge's LLM metrics
            and (-1, 1) for their paired differences; None when it is not known.
    """
    if clusters is not None:
        return cluster_bootstrap_cis([values], [clusters], level, bounds=[bounds])[0]
    return bootstrap_cis([values], level, bounds=[bounds])[0]


# The significant digits of the expanded tail kept (`expanded_tail`): the last bits of
# libm's lgamma, exp and erfc may differ between platforms; rounded, the tail (and so the
# interval) is the same on each.
_TAIL_DIGITS = 12
T_EXPANSION_FROM = 1000  # `t_quantile` by its asymptotic expansion from this many df


@functools.lru_cache(maxsize=256)
def t_quantile(upper: float, df: int) -> float:
    """The t distribution's upper quantile: t with P(T > t) = `upper` for T ~ t(df).

    Below `T_EXPANSION_FROM` degrees of freedom, found by bisection (to the last bit of a
    float) on the tail probability 0.5 * I_x(df/2, 1/2), x = df / (df + t^2), the
    regularised incomplete beta function evaluated by its continued fraction
    (`_incomplete_beta`); from there on (where the fraction's rounding grows to 1e-11), the
    Cornish-Fisher expansion of t in powers of 1/df to 1/df^4 (Abramowitz & Stegun 26.7.5),
    whose next term is below 1e-15 there at 95%. Deterministic; tested against known
    quantiles.

    Args:
        upper: the upper tail probability, strictly between 0 and 0.5.
        df: the degrees of freedom, a positive integer.
    """
    if not 0 < upper < 0.5 or df < 1:
        raise InputFormatError(
            f"t_quantile needs upper= strictly between 0 and 0.5 and df= a whole number of "
            f"at least 1, not upper={upper!r}, df={df!r}"
        )
    if df >= T_EXPANSION_FROM:
        x = NormalDist().inv_cdf(1 - upper)
        g1 = (x**3 + x) / 4
        g2 = (5 * x**5 + 16 * x**3 + 3 * x) / 96
        g3 = (3 * x**7 + 19 * x**5 + 17 * x**3 - 15 * x) / 384
        g4 = (79 * x**9 + 776 * x**7 + 1482 * x**5 - 1920 * x**3 - 945 * x) / 92160
        return x + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4
    lo, hi = 0.0, 1.0
    while _t_upper(hi, df) > upper:
        lo, hi = hi, hi * 2
    while True:
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            return hi
        if _t_upper(mid, df) > upper:
            lo = mid
        else:
            hi = mid


def _t_upper(t: float, df: int) -> float:
    """P(T > t) for T ~ t(df), t >= 0."""
    t2 = t * t
    if t2 == 0.0:
        return 0.5
    # log x and log(1 - x) of x = df / (df + t^2), each without cancellation
    return 0.5 * _incomplete_beta(
        df / 2, 0.5, df / (df + t2), t2 / (df + t2), -math.log1p(t2 / df), math.log(t2 / (df + t2))
    )


def _incomplete_beta(a: float, b: float, x: float, y: float, log_x: float, log_y: float) -> float:
    """The regularised incomplete beta function I_x(a, b) of b = 1/2, y = 1 - x and the
    logarithms of both given computed on their own (no cancellation): the continued
    fraction of Abramowitz & Stegun 26.5.8, by the modified Lentz method (Press et al.,
    Numerical Recipes, section 6.4), on the side where it converges fast."""
    log_front = _log_gamma_ratio(a) - math.lgamma(b) + a * log_x + b * log_y
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, y) / b


def _log_gamma_ratio(a: float) -> float:
    """log(Gamma(a + 1/2) / Gamma(a)); for a >= 50 from the difference of the two Stirling
    series (lgamma of large a loses the difference's digits: 1e-10 at a = 500,000)."""
    if a < 50:
        return math.lgamma(a + 0.5) - math.lgamma(a)
    h = a + 0.5
    # (h - 1/2) log h - h - ((a - 1/2) log a - a) = a log1p(1/(2a)) + log(a)/2 - 1/2
    head = a * math.log1p(0.5 / a) + 0.5 * math.log(a) - 0.5
    series = (
        (1 / h - 1 / a) / 12
        - (1 / h**3 - 1 / a**3) / 360
        + (1 / h**5 - 1 / a**5) / 1260
        - (1 / h**7 - 1 / a**7) / 1680
    )
    return head + series


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (Numerical Recipes' betacf)."""
    tiny, eps = 1e-300, 2.3e-16  # eps: just above a float's 2^-52
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):  # a <= 500 here: about sqrt(a) terms are enough
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


# Below this many units the expanded percentiles fall at the resamples' extremes: the
# interval is their range (`interval_note` says so).
RANGE_BOUND_UNITS = 5


@functools.lru_cache(maxsize=256)
def expanded_tail(n: int, level: float = 0.95) -> float:
    """The tail probability at which the expanded percentile interval of n resampled units
    takes its bootstrap percentiles.

    Hesterberg's expanded percentile interval (T. Hesterberg, "What Teachers Should Know
    About the Bootstrap: Resampling in the Undergraduate Statistics Curriculum", The
    American Statistician 69(4), 371-386, 2015, section on the expanded percentile
    interval): the percentile interval of a mean is too narrow in small samples, by the
    factor sqrt((n-1)/n) of the plug-in standard deviation and by z in place of t; taking
    the percentiles at alpha' with z_{alpha'/2} = sqrt(n/(n-1)) t_{alpha/2, n-1} undoes
    both. The tail is rounded to `_TAIL_DIGITS` significant digits (the same on every
    platform). n < 2: NaN (no interval).

    Args:
        n: the units resampled (rows, or conversations in a cluster bootstrap).
        level: the interval's coverage, strictly between 0 and 1.
    """
    if n < 2:
        return math.nan
    t = t_quantile((1 - level) / 2, n - 1)
    z = math.sqrt(n / (n - 1)) * t
    return float(f"{0.5 * math.erfc(z / math.sqrt(2)):.{_TAIL_DIGITS}g}")


def few_units_interval(
    unit_means: np.ndarray,
    values: np.ndarray,
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
    unit: str = "row",
    word: str = "value",
) -> tuple[float, float, str] | None:
    """The one rule for a mean the bootstrap cannot give an interval of: (low, high, note),
    or None when the bootstrap applies (two units or more, not all the same).

    One unit (one row, one conversation): no interval, NaN bounds. Units whose means are all
    equal: every resample has that mean, so the bootstrap interval would have zero width.
    When every value is at an end of `bounds` (all 1 of a [0, 1] metric), the exact bound
    holds for any variable in that range: P(n units all at the top) <= (share of the range
    the mean reaches)^n, so the interval is [lo + (hi - lo) (alpha/2)^(1/n), hi] (mirrored
    at the bottom), Clopper-Pearson's for n successes in n. Otherwise NaN bounds.

    Args:
        unit_means: the mean of each unit (each value, or each conversation's mean).
        values: the values themselves.
        level: the interval's coverage.
        bounds: the range the values are known to lie in, or None.
        unit: what a unit is called in the note ("row", "conversation", "pair").
        word: what a value is called in the note ("value", "difference").
    """
    n = unit_means.size
    if n == 0:
        return None
    if n == 1:
        return (
            math.nan,
            math.nan,
            f"one {unit}: no interval (a bootstrap interval needs two {unit}s or more)",
        )
    top, bottom = float(unit_means.max()), float(unit_means.min())
    if top - bottom > 1e-12 * max(1.0, abs(top), abs(bottom)):
        return None
    units = f"{n} {unit}s"
    if bounds is not None:
        lo, hi = float(bounds[0]), float(bounds[1])
        top_low, bottom_high = _end_bounds(n, level, lo, hi)
        for edge, low, high in ((hi, top_low, hi), (lo, lo, bottom_high)):
            if bool(np.all(values == edge)):
                return (
                    low,
                    high,
                    f"every {word} is {edge:g}: the interval is the exact bound for {units} "
                    f"all at the end of [{lo:g}, {hi:g}] (a bootstrap interval would have "
                    "zero width)",
                )
    if bool(np.all(values == values[0])):
        shown = f"every {word} is {bottom:g}"
    else:
        shown = f"the {units} have the same mean, {bottom:g}"
    return (
        math.nan,
        math.nan,
        f"{shown}: no interval (with no spread among the {units} a bootstrap interval "
        "would have zero width)",
    )


def interval_note(
    values: np.ndarray,
    *,
    clusters: np.ndarray | None = None,
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
    unit: str = "row",
) -> str | None:
    """What the reader of `bootstrap_ci` of these arguments should know, or None: why it
    gave no bootstrap interval (`few_units_interval`), or, from 2 to `RANGE_BOUND_UNITS` - 1
    units, that the interval cannot reach past their values. Its units are called `unit`
    ("row", or "pair" for paired differences), or conversations when `clusters` are given.

    No resample's mean lies outside the units' own range, so however far the percentiles
    are expanded, the interval of n units holds the mean no more often than their range
    does: for a symmetric spread, 1 - 2^(1-n) (50% for 2, 75% for 3, 88% for 4). From 5
    on the expanded percentiles lie inside the resamples (9 of 10,000 below at 5)."""
    means = values if clusters is None else _cluster_means(values, clusters)
    name = "conversation" if clusters is not None else unit
    got = few_units_interval(
        means, values, level, bounds, name, "difference" if unit == "pair" else "value"
    )
    if got is not None:
        return got[2]
    if 2 <= means.size < RANGE_BOUND_UNITS:
        n = means.size
        return (
            f"only {n} {name}s: the interval cannot reach past their values, so it holds the "
            f"true mean less often than {level:.0%} (about {1 - 2 ** (1 - n):.0%} for a "
            "symmetric spread of scores)"
        )
    return None


def _cluster_means(values: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """The mean of each cluster's values, clusters numbered 0..C-1."""
    if not values.size:
        return np.zeros(0)
    return np.bincount(clusters, weights=values) / np.bincount(clusters)


def bootstrap_cis(
    columns: Sequence[np.ndarray],
    level: float = 0.95,
    *,
    bounds: Sequence[tuple[float, float] | None] | None = None,
) -> list[tuple[float, float]]:
    """`bootstrap_ci` of each column, each interval exactly as `bootstrap_ci` gives it alone
    (`bounds`: each column's, or None for none known).

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
    ranges = list(bounds) if bounds is not None else [None] * len(columns)
    for i, values in enumerate(columns):
        rule = few_units_interval(values, values, level, ranges[i])
        if rule is not None:
            out[i] = rule[:2]
            continue
        means = _tied_means(values)
        if means is not None:
            found = _percentiles(means, expanded_tail(values.size, level))
            out[i] = _no_tighter_at_an_end(found, values.size, level, ranges[i])
        elif values.size:
            by_size.setdefault(values.size, []).append(i)
    # A chunk's means are taken in a thread while the next chunk's indices are drawn: numpy
    # does both without the GIL, so they overlap on a second core (100,000 rows: 11.3 ->
    # 6.9 s). The same draws and sums in the same order: the same intervals.
    for n, members in by_size.items():
        of_chunk = functools.partial(_chunk_means, [columns[i] for i in members])
        chunks = list(map_ahead(of_chunk, _resamples(n)))
        tail = expanded_tail(n, level)
        for k, i in enumerate(members):
            found = _percentiles(np.concatenate([chunk[k] for chunk in chunks]), tail)
            out[i] = _no_tighter_at_an_end(found, n, level, ranges[i])
    return out


def cluster_bootstrap_cis(
    columns: Sequence[np.ndarray],
    clusters: Sequence[np.ndarray],
    level: float = 0.95,
    *,
    bounds: Sequence[tuple[float, float] | None] | None = None,
) -> list[tuple[float, float]]:
    """Expanded percentile cluster-bootstrap interval of the mean of each column, its values
    grouped: the percentiles at `expanded_tail` of C clusters, and `few_units_interval` for
    one conversation or conversations whose means are all equal.

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
        bounds: each column's known range, as in `bootstrap_ci`, or None for none known.

    Returns:
        (low, high) per column; NaN for a column of no values.
    """
    out: list[tuple[float, float]] = [(math.nan, math.nan)] * len(columns)
    ranges = list(bounds) if bounds is not None else [None] * len(columns)
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
        rule = few_units_interval(sums / sizes, values, level, ranges[i], "conversation")
        if rule is not None:
            out[i] = rule[:2]
        elif values.size:
            by_size.setdefault(sums.size, []).append(i)
    for c, members in by_size.items():
        chunks: list[list[np.ndarray]] = [[] for _ in members]
        for draws in _resamples(c):
            for k, i in enumerate(members):
                sums, sizes = totals[i]
                chunks[k].append(sums[draws].sum(axis=1) / sizes[draws].sum(axis=1))
        tail = expanded_tail(c, level)
        for k, i in enumerate(members):
            found = _percentiles(np.concatenate(chunks[k]), tail)
            out[i] = _no_tighter_at_an_end(found, c, level, ranges[i])
    return out


def _no_tighter_at_an_end(
    interval: tuple[float, float], n: int, level: float, bounds: tuple[float, float] | None
) -> tuple[float, float]:
    """`interval` reaching at least as far from an end of the known range as the exact
    bound of n units all at that end (`few_units_interval`): near the end, the bootstrap
    of n units with one off it (49 of 50 rows at 1) was narrower than that bound ([0.940, 1]
    against [0.929, 1]), a run with a failure looking more certain than a perfect one. Away
    from the ends the bound lies beyond the interval and changes nothing."""
    if bounds is None:
        return interval
    top_low, bottom_high = _end_bounds(n, level, float(bounds[0]), float(bounds[1]))
    return min(interval[0], top_low), max(interval[1], bottom_high)


def _end_bounds(n: int, level: float, lo: float, hi: float) -> tuple[float, float]:
    """The exact bounds of n units all at an end of [lo, hi]: the low bound when all are at
    hi, lo + (hi - lo) (alpha/2)^(1/n), and the high bound when all are at lo (mirrored)."""
    end = ((1 - level) / 2) ** (1 / n)
    return lo + (hi - lo) * end, hi - (hi - lo) * end


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
    found = _distinct_counts(values, n // TIED_SHARE)
    if found is None:
        return None
    distinct, counts = found
    rng = np.random.default_rng(SEED)
    step = max(1, 2_000_000 // distinct.size)
    means = []
    for lo in range(0, BOOTSTRAP_RESAMPLES, step):
        drawn = rng.multinomial(n, counts / n, size=min(step, BOOTSTRAP_RESAMPLES - lo))
        means.append((drawn * distinct).sum(axis=1) / n)  # not BLAS: the same sum anywhere
    return np.concatenate(means)


# Values np.unique sorts at once in `_distinct_counts`: a sorted copy of a million scores
# was 8 MiB of the end of a run (and one of 1 << 16, with its counts, still about 2).
DISTINCT_CHUNK = 1 << 13


def _distinct_counts(values: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray] | None:
    """np.unique(values, return_counts=True), counted a chunk at a time (the same arrays),
    or None as soon as more than `most` distinct values are found."""
    distinct = np.zeros(0, dtype=values.dtype)
    counts = np.zeros(0, dtype=np.int64)
    for start in range(0, values.size, DISTINCT_CHUNK):
        found, found_counts = np.unique(values[start : start + DISTINCT_CHUNK], return_counts=True)
        distinct, where = np.unique(np.concatenate([distinct, found]), return_inverse=True)
        merged = np.zeros(distinct.size, dtype=np.int64)
        np.add.at(merged, where.reshape(-1), np.concatenate([counts, found_counts]))
        counts = merged
        if distinct.size > most:
            return None
    return distinct, counts


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


def _sign_patterns(n: int, chunk: int) -> Iterator[np.ndarray]:
    """Every pattern of n signs (+1 or -1), as the rows of matrices of at most `chunk` rows
    (pattern k flips the units whose bit is set in k), in order."""
    bits = np.arange(n, dtype=np.int64)
    for lo in range(0, 1 << n, chunk):
        patterns = np.arange(lo, min(lo + chunk, 1 << n), dtype=np.int64)
        yield 1.0 - 2.0 * ((patterns[:, None] >> bits) & 1)


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

    NaN for no differences. A NaN or infinite difference is refused (an InputFormatError):
    either makes every pattern's mean NaN or infinite and the p-value 0 (and a NaN p-value
    counts as no test,
    which a gate reads as no regression); leave out the pairs where either score is
    undefined first, as `judge.compare` does (`bootstrap_ci` takes no NaN either).
    """
    diff = np.asarray(diff, dtype=np.float64)
    undefined = int(np.isnan(diff).sum())
    if undefined:
        raise InputFormatError(
            f"diff= holds {counted(undefined, 'NaN difference')} of "
            f"{diff.size}: leave out the pairs where either score is undefined (NaN) "
            "before the test"
        )
    infinite = int(np.isinf(diff).sum())
    if infinite:  # every pattern's mean would be +-inf or NaN: p 0 below the test's floor
        raise InputFormatError(
            f"diff= holds {counted(infinite, 'infinite difference')} of "
            f"{diff.size}: scores must be finite numbers"
        )
    if clusters is not None:
        return permutation_p_value(cluster_totals(diff, clusters))
    n = diff.size
    if n == 0:
        return math.nan
    observed = abs(float(diff.mean()))
    if observed == 0.0:
        return 1.0
    if n <= EXACT_LIMIT:
        extreme = sum(_count_extreme(diff, signs, observed) for signs in _sign_patterns(n, 1 << 16))
        return extreme / (1 << n)
    rng = np.random.default_rng(SEED)
    extreme, step = 0, max(1, 4_000_000 // n)
    for lo in range(0, RANDOM_PERMUTATIONS, step):
        size = min(step, RANDOM_PERMUTATIONS - lo)
        signs = rng.integers(0, 2, size=(size, n)) * 2.0 - 1.0
        extreme += _count_extreme(diff, signs, observed)
    return (extreme + 1) / (RANDOM_PERMUTATIONS + 1)


def smallest_p_value(units: int) -> float:
    """The smallest p-value `permutation_p_value` can give on `units` differences (pairs,
    or conversations when their signs are flipped whole), whatever they are: exact (n <=
    20), 2 / 2^n, when every difference has the same sign (the observed pattern and its
    mirror image); Monte Carlo, 1 / (200,000 + 1), when no random pattern is as extreme;
    1 for no units. With ties (zero differences) it is larger: a tie's sign flips nothing.
    """
    if units <= 0:
        return 1.0
    if units <= EXACT_LIMIT:
        return 2.0 / (1 << units)
    return 1.0 / (RANDOM_PERMUTATIONS + 1)


def units_to_reach(alpha: float, tests: int = 1) -> int | None:
    """The fewest units whose smallest p-value, Holm-adjusted for `tests` tests as the
    first (smallest) of them is, min(1, tests * p), is below `alpha` (p < alpha, as the
    gates decide): below it no data can make a gate fail. None when no number of units
    can (tests / alpha past the Monte Carlo test's 200,001 patterns)."""
    for units in range(1, EXACT_LIMIT + 2):  # EXACT_LIMIT + 1: Monte Carlo, as for any more
        if reaches(units, alpha, tests):
            return units
    return None


def reaches(units: int, alpha: float, tests: int = 1) -> bool:
    """Whether `units` differences could give a Holm-adjusted p-value below `alpha`
    among `tests` tests (`units_to_reach`)."""
    return min(1.0, max(tests, 1) * smallest_p_value(units)) < alpha


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


def ks_two_sample(
    first: Sequence[float] | np.ndarray, second: Sequence[float] | np.ndarray
) -> tuple[float, float]:
    """The two-sample Kolmogorov-Smirnov statistic D (the largest gap between the two
    empirical distribution functions) and its asymptotic two-sided p-value, Kolmogorov's
    limit sf(D * sqrt(nm / (n + m))) (conservative for tied values). NaN for no values.

    Args:
        first: one sample (no NaN).
        second: the other.
    """
    a = np.sort(np.asarray(first, dtype=np.float64))
    b = np.sort(np.asarray(second, dtype=np.float64))
    if not a.size or not b.size:
        return math.nan, math.nan
    points = np.concatenate([a, b])
    gap = np.searchsorted(a, points, side="right") / a.size
    gap -= np.searchsorted(b, points, side="right") / b.size
    d = float(np.abs(gap).max())
    x = d * math.sqrt(a.size * b.size / (a.size + b.size))
    if x < 0.2:  # the series converges slowly there, and the p-value is 1 to 1e-9
        return d, 1.0
    terms = [(-1) ** (j - 1) * math.exp(-2 * j * j * x * x) for j in range(1, 101)]
    return d, min(1.0, max(0.0, 2 * math.fsum(terms)))


# Prediction-powered inference (PPI) of a mean: the judge's scores on many rows, corrected by
# people's labels on a random few.


@dataclass(frozen=True)
class MeanInterval:
    """A mean with its interval and the values behind it (NaN bounds when undefined).

    Args:
        mean: the mean.
        low: the interval's lower bound.
        high: the interval's upper bound.
        n: the values averaged.
    """

    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class PPIEstimate:
    """The prediction-powered mean of the labels (PPI++), beside the judge-only and
    labels-only estimates.

    Args:
        mean: the label-corrected mean (the PPI++ point estimate).
        low: its interval's lower bound (the CLT interval of PPI++).
        high: its interval's upper bound.
        confidence: the intervals' coverage, e.g. 0.95.
        lam: the power-tuning weight lambda in [0, 1]: 0 is the labels-only estimate (the
            judge did not help), 1 is plain PPI.
        n_labelled: labelled rows used (a judged score and a label).
        n_unlabelled: judged rows without a label used.
        judge_only: the judge's mean over every row it scored (labelled or not) and its
            percentile bootstrap interval, as a run's report gives it: an interval of the
            judge's mean, blind to its bias.
        labels_only: the labels' mean with its CLT interval (PPI++ with lambda = 0).
        left_out: rows left out because the judge's score was NaN (unlabelled, labelled).
        notes: what the reader should know (few labels, lambda at 0).
    """

    mean: float
    low: float
    high: float
    confidence: float
    lam: float
    n_labelled: int
    n_unlabelled: int
    judge_only: MeanInterval
    labels_only: MeanInterval
    left_out: tuple[int, int] = (0, 0)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (NaN as NaN: the caller nulls it)."""
        return {
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "lambda": self.lam,
            "n_labelled": self.n_labelled,
            "n_unlabelled": self.n_unlabelled,
            "judge_only": asdict(self.judge_only),
            "labels_only": asdict(self.labels_only),
            "left_out": {"unlabelled": self.left_out[0], "labelled": self.left_out[1]},
            "notes": list(self.notes),
        }


# Below this many labels the normal approximation behind the CLT interval may cover less
# than it says (a rule of thumb; the simulation test checks 50 and up).
PPI_FEW_LABELS = 30


def ppi_tuned(
    labels: np.ndarray, judged_labelled: np.ndarray, judged: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PPI++ point estimates, standard errors and lambdas along the last axis, vectorised:
    labels and judged_labelled (..., n), judged (..., N), N >= 0, n >= 2, no NaN.

    The estimator of Angelopoulos, Duchi & Zrnic (2023, "PPI++: Efficient
    Prediction-Powered Inference", arXiv:2311.01453), for a mean:
    theta = lambda * mean(judged) + mean(labels - lambda * judged_labelled), with lambda =
    cov(labels, judged_labelled) / ((1 + n/N) var(all judged)) clipped to [0, 1]
    (the variance-minimising weight), and the standard error
    sqrt(lambda^2 var(judged) / N + var(labels - lambda * judged_labelled) / n). The same
    arithmetic as the authors' ppi_py (ppi_mean_ci: covariance and standard deviations
    over n, the variance of all judged scores over n + N - 1), which a test checks.
    With N = 0 (every row labelled) lambda is 0: the labels' own mean.

    Spread is decided on the data, not on the float results (the mean of n labels all 0.9
    is off 0.9 in the last bit for some n, and their variance ~1e-33, not 0): labels all
    equal have covariance 0 with anything, so lambda 0, and their own value as the
    estimate; a judge whose scores are all equal gets lambda 0; and the standard error is
    exactly 0 when `no_spread` says so.
    """
    n, big_n = labels.shape[-1], judged.shape[-1]
    same_labels = _all_equal(labels)
    centred_y = labels - labels.mean(axis=-1, keepdims=True)
    centred_f = judged_labelled - judged_labelled.mean(axis=-1, keepdims=True)
    cov = np.where(same_labels, 0.0, (centred_y * centred_f).mean(axis=-1))
    if big_n:
        everything = np.concatenate([judged_labelled, judged], axis=-1)
        var_f = everything.var(axis=-1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.clip(cov / ((1 + n / big_n) * var_f), 0.0, 1.0)
        # a judge that gives one score tells nothing
        lam = np.where(_all_equal(everything), 0.0, lam)
        imputed = lam**2 * judged.var(axis=-1) / big_n
        judged_mean = judged.mean(axis=-1)
    else:  # every row labelled: nothing for the judge to add
        lam = np.zeros(cov.shape)
        imputed = np.zeros(cov.shape)
        judged_mean = np.zeros(cov.shape)
    rectifier = labels - lam[..., None] * judged_labelled
    theta = np.where(same_labels, labels[..., 0], lam * judged_mean + rectifier.mean(axis=-1))
    se = np.sqrt(imputed + rectifier.var(axis=-1) / n)
    se = np.where(no_spread(labels, judged_labelled, judged, lam), 0.0, se)
    return theta, se, lam


def variance(values: np.ndarray, ddof: int = 0) -> float:
    """The variance of the values, exactly 0.0 when they are all equal (the float one of n
    values all 0.9 is ~1e-33, and a weight divided by it is anything)."""
    return 0.0 if bool(_all_equal(values)) else float(values.var(ddof=ddof))


def _all_equal(values: np.ndarray) -> np.ndarray:
    """Whether the values along the last axis are all equal (True for none)."""
    return np.all(values == values[..., :1], axis=-1)  # type: ignore[no-any-return]


def no_spread(
    labels: np.ndarray, judged_labelled: np.ndarray, judged: np.ndarray, lam: np.ndarray
) -> np.ndarray:
    """Whether `ppi_tuned`'s standard error is 0, decided on the data: the rectifier
    labels - lambda * judged_labelled all equal (with lambda 0: the labels all equal),
    and no imputed part (lambda 0, no unlabelled row, or the unlabelled scores all equal).
    A float test of the computed standard error misses labels all equal whose mean is off
    in the last bit."""
    rectifier = labels - lam[..., None] * judged_labelled
    flat = (lam == 0) | _all_equal(judged) if judged.shape[-1] else np.ones(lam.shape, bool)
    return _all_equal(rectifier) & flat  # type: ignore[no-any-return]


def _numbers(values: Any, name: str) -> np.ndarray:
    """A 1-D float array of the values given as `name`=; an InputFormatError for anything else."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputFormatError(
            f"{name}= must be numbers (a list or 1-D array of floats, NaN for an undefined score)"
        ) from None
    if array.ndim != 1:
        raise InputFormatError(
            f"{name}= must be one list of numbers, not an array of shape {array.shape}"
        )
    if np.isinf(array).any():
        raise InputFormatError(
            f"{name}= holds an infinite value at position {int(np.flatnonzero(np.isinf(array))[0])}"
        )
    return array


def _no_nan_labels(labels: np.ndarray, name: str, scores: str) -> None:
    """Refuse a NaN label: a row without a label belongs among the unlabelled rows."""
    missing = np.flatnonzero(np.isnan(labels))
    if missing.size:
        shown = ", ".join(str(i) for i in missing[:5]) + (" ..." if missing.size > 5 else "")
        raise InputFormatError(
            f"{name}= has NaN at positions {shown} (counted from 0): a label must be a "
            f"number; leave a row nobody labelled out of {name}= and {scores}= (its judged "
            "score goes with the unlabelled rows)"
        )


def _same_length(first: np.ndarray, first_name: str, second: np.ndarray, second_name: str) -> None:
    if first.size != second.size:
        raise InputFormatError(
            f"{first_name}= has {first.size} values and {second_name}= {second.size}: they "
            "must be the same rows, in the same order"
        )


def normal_quantile(confidence: float) -> float:
    """The normal quantile of a two-sided interval of this coverage (`confidence=`, checked
    strictly between 0 and 1)."""
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not 0 < confidence < 1
    ):
        raise InputFormatError(
            f"confidence= must lie strictly between 0 and 1 (0.95 for a 95% interval), not "
            f"{confidence!r}"
        )
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _no_spread_interval(
    labels: np.ndarray, confidence: float, proportion: bool, binary_difference: bool = False
) -> tuple[float, float, str]:
    """The interval of a mean whose CLT interval has zero width, and a note saying why:
    labels all 1 (or all 0), when they are 0/1 labels (`proportion`), are n successes
    (failures) in n, whose exact Clopper-Pearson interval is [(alpha/2)^(1/n), 1] ([0,
    1 - that]); differences of 0/1 labels (`binary_difference`) all -1 (or all +1) bound
    the mean difference by that share (below); other labels all the same give no
    interval (NaN)."""
    n = labels.size
    value = float(labels[0])
    if binary_difference and np.all(labels == value) and value in (-1.0, 1.0):
        # Each difference is -1, 0 or +1 and the mean is P(+1) - P(-1). n differences all
        # -1: P(-1) >= e = (alpha/2)^(1/n) (Clopper-Pearson's lower end of n in n), and
        # P(+1) <= 1 - P(-1), so the mean is at most 1 - 2e (all +1: at least 2e - 1).
        # Without it the interval was NaN, and a regression every labelled row showed
        # passed judge compare --fail-on-regression.
        end = ((1 - confidence) / 2) ** (1 / n)
        low, high = (-1.0, 1.0 - 2 * end) if value == -1.0 else (2 * end - 1, 1.0)
        return (
            low,
            high,
            f"every labelled difference is {value:+g}: the normal interval would have zero "
            f"width, so the interval is the one of the exact binomial (Clopper-Pearson) "
            f"share of rows {'worse' if value < 0 else 'better'}, {n} in {n}",
        )
    if proportion and np.all(labels == value) and value in (0.0, 1.0):
        end = ((1 - confidence) / 2) ** (1 / n)
        low, high = (end, 1.0) if value == 1.0 else (0.0, 1.0 - end)
        return (
            low,
            high,
            f"every label is {value:g}: the normal interval would have zero width, so the "
            f"interval is the exact binomial (Clopper-Pearson) one of {n} labels all "
            f"{value:g}",
        )
    shown = f"every label is {value:g}" if np.all(labels == value) else "the labels"
    return (
        math.nan,
        math.nan,
        f"{shown}: the normal interval has zero width and says nothing of the "
        "uncertainty; no interval is given (label more rows of the random sample)",
    )


def _ppi(
    judged: np.ndarray,
    judged_labelled: np.ndarray,
    labels: np.ndarray,
    confidence: float,
    proportion: bool = True,
    binary_difference: bool = False,
) -> PPIEstimate:
    """`ppi_mean` of checked arrays: NaN scores left out, at least 2 labelled rows;
    `proportion`: labels all 0 or all 1 get the binomial interval (not for differences);
    `binary_difference`: differences of 0/1 labels all -1 or all +1 get theirs."""
    z = normal_quantile(confidence)
    unlabelled = judged[~np.isnan(judged)]
    kept = ~np.isnan(judged_labelled)
    scores, kept_labels = judged_labelled[kept], labels[kept]
    left_out = (int(judged.size - unlabelled.size), int(labels.size - kept_labels.size))
    n, big_n = int(kept_labels.size), int(unlabelled.size)
    if n < 2:
        dropped = f" ({left_out[1]} more have a NaN judged score)" if left_out[1] else ""
        raise InputFormatError(
            f"{n} labelled row{'s' if n != 1 else ''} with a judged score{dropped}: the "
            "interval needs at least 2 (30 or more to be trusted); label more rows of a "
            "random sample"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        theta, se, lam = ppi_tuned(kept_labels, scores, unlabelled)
    if not (math.isfinite(float(theta)) and math.isfinite(float(se))):
        raise InputFormatError(
            "the scores or labels are too large for the arithmetic (their squares overflow "
            "a float): give them on a smaller scale (0/1 labels, scores in [0, 1])"
        )
    every = np.concatenate([scores, unlabelled])
    judge_low, judge_high = bootstrap_ci(every, confidence)
    same_labels = bool(_all_equal(kept_labels))
    labels_mean = float(kept_labels[0]) if same_labels else float(kept_labels.mean())
    labels_half = z * float(kept_labels.std()) / math.sqrt(n)
    low, high = float(theta - z * se), float(theta + z * se)
    labels_low, labels_high = labels_mean - labels_half, labels_mean + labels_half
    notes = []
    # Decided on the data, not by se == 0.0: labels all 0.9 have a mean off in the last
    # bit for some n, a standard error ~1e-17, and so an interval of zero width.
    flat = bool(no_spread(kept_labels, scores, unlabelled, np.asarray(lam)))
    if flat or same_labels:
        exact = _no_spread_interval(kept_labels, confidence, proportion, binary_difference)
    if flat:
        # Labels that are all the same have no spread, so the CLT interval has zero width
        # (95% sure of a perfect mean from two labels); lambda is then 0, and the estimate
        # is the labels' own mean.
        low, high, note = exact
        notes.append(note)
    if same_labels:  # the labels-only interval: the same rule
        labels_low, labels_high, _ = exact
    if n < PPI_FEW_LABELS and not (flat and math.isfinite(low)):  # exact: no CLT
        notes.append(
            f"only {n} labels: the normal interval may cover less than {confidence:.0%}; "
            f"{PPI_FEW_LABELS} or more are safer"
        )
    if big_n and float(lam) == 0.0:
        notes.append(
            "lambda is 0: on the labelled rows the judge's scores do not rise with the "
            "labels, so the estimate is the labels' own"
        )
    if any(left_out):
        notes.append(
            f"rows whose judged score is NaN are left out ({left_out[0]} unlabelled, "
            f"{left_out[1]} labelled): the estimate is of the rows the judge scored"
        )
    return PPIEstimate(
        mean=float(theta),
        low=low,
        high=high,
        confidence=confidence,
        lam=float(lam),
        n_labelled=n,
        n_unlabelled=big_n,
        judge_only=MeanInterval(float(every.mean()), judge_low, judge_high, int(every.size)),
        labels_only=MeanInterval(labels_mean, labels_low, labels_high, n),
        left_out=left_out,
        notes=tuple(notes),
    )


def ppi_mean(
    judged: Sequence[float] | np.ndarray,
    judged_labelled: Sequence[float] | np.ndarray,
    labels: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
) -> PPIEstimate:
    """The mean of people's labels, estimated from a judge's scores on every row and labels
    on a random subset: prediction-powered inference with power tuning (PPI++).

    Prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023,
    "Prediction-powered inference", Science 382, 669-674) corrects the judge's mean by its
    average error on the labelled rows, so the estimate is unbiased for the labels' mean
    however biased the judge is; PPI++ (Angelopoulos, Duchi & Zrnic 2023, "PPI++:
    Efficient Prediction-Powered Inference", arXiv:2311.01453) weighs the judge by a
    lambda tuned from the data, so the interval is never much wider than the labels-only
    one and narrower when the judge tracks the labels. The interval is the papers' CLT
    interval (`ppi_tuned` has the formulas). It holds only when the labelled rows are a
    random sample of the rows (drawn uniformly, independently of the scores and labels).

    NaN judged scores (a row the judge could not score) are left out, on both sides: the
    estimate is then of the labels' mean over the rows the judge scored, and `left_out`
    counts them. A NaN label is refused. Labels that are all 1 (or all 0) have no spread, so
    their CLT interval would have zero width: the interval is then the exact binomial
    (Clopper-Pearson) one, [(alpha/2)^(1/n), 1] for n labels all 1; other labels all the
    same give NaN bounds; `notes` says which.

    Args:
        judged: the judge's scores on the rows without a label (the papers' unlabelled
            data; not the labelled rows: those go in `judged_labelled`).
        judged_labelled: the judge's scores on the labelled rows.
        labels: the people's labels of those rows, in the same order (0/1 or any number
            on the scale to estimate).
        confidence: the intervals' coverage, strictly between 0 and 1.

    Returns:
        A `PPIEstimate`: `mean`, `low`, `high`, lambda, the counts, and the judge-only
        and labels-only estimates beside it.

    Raises:
        judge.InputFormatError: lengths that differ, a NaN label, a value that is no
            number, fewer than 2 labelled rows with a judged score, or a confidence
            outside (0, 1).
    """
    scores = _numbers(judged_labelled, "judged_labelled")
    values = _numbers(labels, "labels")
    _same_length(scores, "judged_labelled", values, "labels")
    _no_nan_labels(values, "labels", "judged_labelled")
    return _ppi(_numbers(judged, "judged"), scores, values, confidence)


def ppi_mean_difference(
    *,
    judged_a: Sequence[float] | np.ndarray,
    judged_b: Sequence[float] | np.ndarray,
    judged_labelled_a: Sequence[float] | np.ndarray,
    judged_labelled_b: Sequence[float] | np.ndarray,
    labels_a: Sequence[float] | np.ndarray,
    labels_b: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
) -> PPIEstimate:
    """The paired difference B - A of the labels' means of two systems (or two prompts, two
    models) answering the same rows, prediction-powered as `ppi_mean` estimates one mean.

    The same rows are judged under A and under B; on a random subset, people labelled
    both A's and B's output. The per-row differences (B's score minus A's, B's label minus
    A's) go through `ppi_mean`, so the interval is of the mean paired difference of the
    labels (PPI++ for the mean of differences; Angelopoulos, Duchi & Zrnic 2023). A row
    where either judged score is NaN is left out. Keyword-only: a swapped pair flips the sign.
    Differences of 0/1 labels that are all -1 (or all +1) have no spread: the interval is
    then [-1, 1 - 2 (alpha/2)^(1/n)] (or its mirror image), from the exact binomial
    interval of the share of rows B is worse (better) on.

    Args:
        judged_a: A's judged scores on the rows without labels.
        judged_b: B's judged scores on the same rows, in the same order.
        judged_labelled_a: A's judged scores on the labelled rows.
        judged_labelled_b: B's judged scores on the labelled rows, in the same order.
        labels_a: the people's labels of A's output on the labelled rows.
        labels_b: the people's labels of B's output on the labelled rows.
        confidence: the intervals' coverage, strictly between 0 and 1.

    Returns:
        A `PPIEstimate` of B - A (`judge_only` is the judge's mean difference over every
        row both scored; `labels_only` the labels' mean difference).
    """
    unlabelled_a, unlabelled_b = _numbers(judged_a, "judged_a"), _numbers(judged_b, "judged_b")
    _same_length(unlabelled_a, "judged_a", unlabelled_b, "judged_b")
    scores_a = _numbers(judged_labelled_a, "judged_labelled_a")
    scores_b = _numbers(judged_labelled_b, "judged_labelled_b")
    values_a, values_b = _numbers(labels_a, "labels_a"), _numbers(labels_b, "labels_b")
    _same_length(scores_a, "judged_labelled_a", scores_b, "judged_labelled_b")
    _same_length(scores_a, "judged_labelled_a", values_a, "labels_a")
    _same_length(scores_a, "judged_labelled_a", values_b, "labels_b")
    _no_nan_labels(values_a, "labels_a", "judged_labelled_a")
    _no_nan_labels(values_b, "labels_b", "judged_labelled_b")
    binary = bool(np.isin(values_a, (0.0, 1.0)).all() and np.isin(values_b, (0.0, 1.0)).all())
    return _ppi(
        unlabelled_b - unlabelled_a,
        scores_b - scores_a,
        values_b - values_a,
        confidence,
        proportion=False,
        binary_difference=binary,
    )


# Sample sizes: how many questions a paired comparison needs to detect a difference, and how
# many labels a PPI interval needs to be narrow enough.


@dataclass(frozen=True)
class PairedSpread:
    """The spread of paired differences B - A per sampling unit: a question, or a whole
    conversation when rows are turns of conversations.

    Args:
        sd: the standard deviation of one unit's difference: of a row's, or (conversations)
            of a conversation's turns' mean difference, linearised for the turn-weighted
            mean (`paired_spread`).
        units: the units measured (rows, or conversations).
        rows: the rows measured.
        mean_size: rows per unit (1 for rows).
        design_effect: the variance of the mean by conversation over its variance were the
            same turns independent rows (1 for rows; Kish 1965).
        icc: the intra-conversation correlation the design effect implies,
            (design_effect - 1) / (mean_size - 1); None for rows or one-turn conversations.
        step: the lattice step of one unit's difference (`lattice_step`; for a
            conversation, of its turns' differences over mean_size): 0 for none.
    """

    sd: float
    units: int
    rows: int
    mean_size: float = 1.0
    design_effect: float = 1.0
    icc: float | None = None
    step: float = 0.0


def paired_spread(differences: np.ndarray, clusters: np.ndarray | None = None) -> PairedSpread:
    """The standard deviation of paired differences per unit, from a pilot.

    Rows: the sample standard deviation of the differences. Conversations (`clusters`
    numbered 0..C-1): the mean difference is the turn-weighted mean, sum(T_c) / sum(m_c)
    over conversations of m_c turns summing to T_c (what `judge compare`'s cluster bootstrap
    resamples); its variance is, to first order, var(e_c) / C with the linearised residual
    e_c = (T_c - dbar * m_c) / mbar (Cochran 1977, *Sampling Techniques*, 6.8, the ratio
    estimator), which is the variance of the conversations' mean differences when every
    conversation has mbar turns. Its ratio to the variance of the mean of as many
    independent rows, mbar * var(e_c) / var(rows), is the design effect, 1 + (mbar - 1) *
    ICC (Kish 1965, *Survey Sampling*, 8.2).

    Args:
        differences: B - A per row (no NaN).
        clusters: the conversation of each row, numbered 0..C-1 with none unused; None
            when the rows are independent.
    """
    rows = int(differences.size)
    row_var = variance(differences, ddof=1) if rows > 1 else math.nan  # 0 when all equal
    step = lattice_step(differences)
    if clusters is None:
        return PairedSpread(sd=math.sqrt(row_var), units=rows, rows=rows, step=step)
    totals = cluster_totals(differences, clusters)
    sizes = np.bincount(clusters, minlength=totals.size).astype(np.float64)
    units = int(totals.size)
    mean_size = rows / units if units else math.nan
    ratio = float(totals.sum() / sizes.sum()) if rows else math.nan
    residuals = (totals - ratio * sizes) / mean_size
    unit_var = float(residuals.var(ddof=1)) if units > 1 else math.nan
    deff = unit_var * mean_size / row_var if row_var > 0 else math.nan
    icc = (deff - 1) / (mean_size - 1) if mean_size > 1 and math.isfinite(deff) else None
    return PairedSpread(
        sd=math.sqrt(unit_var),
        units=units,
        rows=rows,
        mean_size=mean_size,
        design_effect=deff,
        icc=icc,
        step=step / mean_size,
    )


def checked_probability(value: float, name: str, example: str) -> float:
    """A probability strictly between 0 and 1, or an InputFormatError naming `name`=."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise InputFormatError(
            f"{name}= must lie strictly between 0 and 1 ({example}), not {value!r}"
        )
    return float(value)


def lattice_step(values: np.ndarray) -> float:
    """The step of the lattice the values lie on: the greatest common divisor of their
    nonzero magnitudes as fractions of denominator at most 1,000 (1 for differences of 0/1
    scores, 0.25 for differences of quarter grades); 0 for values on no such lattice, or
    none nonzero."""
    magnitudes = np.unique(np.abs(values[np.isfinite(values) & (values != 0)]))
    if not magnitudes.size or magnitudes.size > 1_000:
        return 0.0
    step = Fraction(0)
    for value in magnitudes.tolist():
        fraction = Fraction(value).limit_denominator(1_000)
        if abs(float(fraction) - value) > 1e-9 * max(1.0, value):
            return 0.0
        step = Fraction(
            math.gcd(step.numerator * fraction.denominator, fraction.numerator * step.denominator),
            step.denominator * fraction.denominator,
        )
    return float(step)


def smallest_units(alpha: float = 0.05) -> int:
    """The fewest units (questions, or conversations) at which `permutation_p_value`, the
    test `judge compare` runs, can give p < `alpha` at all: its smallest p on n units is
    2 / 2^n (every difference of one sign, only it and its mirror image as extreme), so n
    must exceed 1 + log2(1 / alpha): 6 at 0.05, 8 at 0.05 / 4. Below it the test has no
    power whatever the data.

    Raises:
        judge.InputFormatError: `alpha` so small that neither the exact test (on at most
            20 units: 2 / 2^20) nor its Monte Carlo form (1 / 200,001) gives a p below it:
            no count would do.
    """
    alpha = checked_probability(alpha, "alpha", "0.05")
    units = units_to_reach(alpha)  # the gates' own rule: one count for plans and gates
    if units is not None:
        return units
    raise InputFormatError(
        f"alpha= {alpha:g} (per test) is below the smallest p judge compare's randomisation "
        f"test can give on more than {EXACT_LIMIT} units, 1/{RANDOM_PERMUTATIONS + 1:,}: no "
        "count of questions would do; plan at a larger alpha, or for fewer tests"
    )


# Up to this many units, `units_needed` checks the normal formula against the exact test's
# power (seeded, SMALL_POWER_DRAWS normal data sets): the exact test's discreteness makes
# the formula promise too much there (power 0.62 at n = 6 for 0.8 planned, 0.75 at n = 7).
SMALL_UNITS = 12
SMALL_POWER_DRAWS = 2_000


def exact_test_power(n: int, effect: float, alpha: float = 0.05, *, seed: int = SEED) -> float:
    """The power of `permutation_p_value` (exact on n <= EXACT_LIMIT units) at level
    `alpha` (p < alpha rejects) when the n differences are normal with mean `effect` and
    standard deviation 1: the share of SMALL_POWER_DRAWS seeded data sets it rejects.
    Exact in each data set (all 2^n sign patterns); for small n (its cost is 2^n n per
    data set)."""
    if n > EXACT_LIMIT:
        raise ValueError(f"n = {n}: the exact test runs on at most {EXACT_LIMIT} units")
    rng = np.random.default_rng(seed)
    data = rng.normal(effect, 1.0, size=(SMALL_POWER_DRAWS, n))
    observed = np.abs(data.sum(axis=1))
    slack = observed - 1e-12 * np.maximum(1.0, observed)
    extreme = np.zeros(SMALL_POWER_DRAWS, dtype=np.int64)
    for signs in _sign_patterns(n, 1 << 10):
        extreme += (np.abs(signs @ data.T) >= slack).sum(axis=0)
    return float((extreme / (1 << n) < alpha).mean())


def normal_units(
    sd: float,
    difference: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    step: float = 0.0,
) -> int:
    """`units_needed`'s normal formula alone (at least 2): the paired t-test's
    normal-approximation sample size with Guenther's correction, continuity-corrected on a
    lattice; without the exact test's floor and small-sample check."""
    z_alpha = NormalDist().inv_cdf(1 - checked_probability(alpha, "alpha", "0.05") / 2)
    z_power = NormalDist().inv_cdf(checked_probability(power, "power", "0.8 for 80%"))
    if (
        isinstance(difference, bool)
        or not isinstance(difference, (int, float))
        or not math.isfinite(difference)
        or difference == 0
    ):
        raise InputFormatError(
            f"difference= must be a nonzero number (the smallest change worth detecting, "
            f"e.g. 0.05), not {difference!r}"
        )
    if not math.isfinite(sd) or sd < 0:
        raise InputFormatError(f"the standard deviation of the differences is {sd!r}: no plan")
    d = abs(float(difference))
    spread = (z_alpha + z_power) * sd
    root = (spread + math.sqrt(spread**2 + 4 * d * max(step, 0.0))) / (2 * d)  # sqrt(n)
    n = root**2 + z_alpha**2 / 2
    # 1e-9: a figure that is an integer up to rounding error is that integer
    return max(2, math.ceil(n - 1e-9))


def units_needed(
    sd: float,
    difference: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    step: float = 0.0,
) -> int:
    """The units (questions, or conversations) a two-sided paired test at level `alpha`
    needs to detect a true mean difference `difference` with probability `power`, when one
    unit's difference has standard deviation `sd`.

    The paired t-test's normal-approximation sample size, ((z_{1-alpha/2} + z_{power}) * sd /
    D)^2, plus z_{1-alpha/2}^2 / 2, Guenther's correction for the t-test's estimated variance
    (Guenther 1981, "Sample size formulas for normal theory t tests", The American
    Statistician 35, 243-244); rounded up (`normal_units`). `judge compare`'s sign-flip
    randomisation test (`permutation_p_value`) rejects about as often: its null spread,
    sqrt(sd^2 + D^2), is wider, but its statistic, normalised by that spread as observed,
    varies less by about as much (tests/test_plan.py simulates it). For differences on a
    lattice of step h (`lattice_step`: 1 for 0/1 scores, where the test is the sign test,
    discrete and so conservative) a continuity correction: the least n with D * n >=
    (z_{1-alpha/2} + z_{power}) * sd * sqrt(n) + h, plus Guenther's term.

    Two checks for the exact test at few units: the count is at least `smallest_units`
    (alpha), the fewest at which the test can reject at all (6 at alpha 0.05: the smallest p
    of 5 units is 2/32); and for differences on no lattice, when the formula gives at most
    SMALL_UNITS (12), the count is the least from that floor at which `exact_test_power`,
    the exact test's power on normal differences of mean D / sd, reaches `power`.

    Args:
        sd: the standard deviation of one unit's difference (`paired_spread`).
        difference: the true mean difference to detect (its sign does not matter).
        power: the probability of detecting it, strictly between 0 and 1.
        alpha: the test's two-sided level, strictly between 0 and 1 (per test: the level
            the first of k tests must reach under Holm's correction is alpha / k).
        step: the lattice step of one unit's difference (`lattice_step`); 0 for none.
    """
    formula = normal_units(sd, difference, power=power, alpha=alpha, step=step)
    floor = smallest_units(alpha)
    if sd == 0 or step > 0 or max(formula, floor) > SMALL_UNITS:
        return max(formula, floor)
    effect = abs(float(difference)) / sd
    for n in range(floor, SMALL_UNITS + 1):
        if exact_test_power(n, effect, alpha) >= power:
            return n
    return max(formula, SMALL_UNITS + 1)


def ppi_half_widths(
    labelled: np.ndarray,
    rows: int,
    *,
    var_judged: float,
    var_judged_labelled: float,
    var_labels: float,
    cov: float,
    confidence: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """The PPI++ interval's half-width, and its lambda, for each count of labelled rows
    among `rows` judged rows (the rest unlabelled), from the moments of a pilot.

    `ppi_tuned`'s formulas with the pilot's moments in place of the data's: lambda(n) =
    cov / ((1 + n/N) var_judged) clipped to [0, 1], N = rows - n, and the half-width z *
    sqrt(lambda^2 var_judged / N + var(labels - lambda * judged) / n), where var(labels -
    lambda * judged) = var_labels - 2 lambda cov + lambda^2 var_judged_labelled on the
    labelled rows. Every row labelled (N = 0): lambda 0, the labels' own interval.

    Args:
        labelled: counts of labelled rows, each in 1..rows.
        rows: the judged rows.
        var_judged: the variance of the judge's scores over all rows.
        var_judged_labelled: their variance over labelled rows.
        var_labels: the variance of the labels.
        cov: the covariance of labels and the judge's scores on labelled rows.
        confidence: the interval's coverage.
    """
    z = normal_quantile(confidence)
    n = labelled.astype(np.float64)
    unlabelled = rows - n
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(
            (unlabelled > 0) & (var_judged > 0),
            np.clip(cov / ((1 + n / unlabelled) * var_judged), 0.0, 1.0),
            0.0,
        )
        imputed = np.where(unlabelled > 0, lam**2 * var_judged / unlabelled, 0.0)
    rectifier = np.maximum(var_labels - 2 * lam * cov + lam**2 * var_judged_labelled, 0.0)
    return z * np.sqrt(imputed + rectifier / n), lam
