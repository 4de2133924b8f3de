"""Whether each probe's expectation held: pure functions of score arrays, numpy only.

Scores are aligned arrays, one value per row, NaN where a metric was undefined; a row
counts only where every compared score is defined. Each check names its expectation and
its tolerance, so a reader can disagree with the bar without rereading the code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from judge.formatting import counted
from judge.labels import kinds

# The bars, in score units (metrics run 0 to 1). Chosen so that a well-behaved judge with
# some sampling noise passes and a judge with a systematic bias fails:
TOLERANCE = {
    "repeat_std": 0.10,  # mean per-row standard deviation over repeats
    "repeat_crossing": 0.10,  # share of rows whose repeats fall on both sides of the threshold
    "order": 0.05,  # mean |change| when contexts are shuffled (or |actual - expected|)
    "verbosity": 0.02,  # mean gain from filler: none expected, a little noise allowed
    "granularity": 0.10,  # mean |change| when the answer is cut into sentences differently
    "spearman": 0.70,  # cross-model rank agreement at least this
    "kappa": 0.60,  # cross-model Cohen's kappa of pass/fail at the threshold at least this
}
MOVED = 1e-9  # a score differing by more than this has moved (float slack)
# The fewest compared rows on which a bar met counts as held. None of n rows moving is what
# a judge that moves half the rows shows with probability 0.5^n: 1/16 at 4 rows, 1/32 at 5,
# the first below 0.05 (a one-sided 95% bound: from 5 rows, a clean result rules out such a
# judge; the sign test's reasoning, Clopper-Pearson's bound 1 - 0.05^(1/n) < 1/2). Fewer
# rows cannot tell: the check is n/a, with the count. A bar broken on fewer still fails.
MIN_ROWS = 5
WORST = 5  # rows named in a check as the ones that moved most


def _worst(mask: np.ndarray, moves: np.ndarray) -> list[int]:
    """The rows (input positions) that moved most, largest first, at most WORST of them.

    Args:
        mask: which rows were compared.
        moves: how far each compared row moved (mask.sum() values, >= 0).
    """
    rows = np.flatnonzero(mask)
    largest = np.argsort(-moves, kind="stable")[:WORST]
    return [int(rows[k]) for k in largest if moves[k] > MOVED]


@dataclass(frozen=True)
class Check:
    """One probe's verdict on one metric.

    Args:
        probe: repeat, order, verbosity, granularity (with its variant) or models.
        metric: the metric checked.
        expectation: what a stable judge does, in words, with the tolerance.
        rows: rows compared (every compared score defined).
        figures: what was measured (names in the expectation).
        held: whether the expectation held; None when no row could be compared, or the
            bar was met on fewer than MIN_ROWS rows (too few to tell).
        note: why a figure is undefined, when one is.
        worst: the rows (input positions, from 0) that moved most, largest first.
    """

    probe: str
    metric: str
    expectation: str
    rows: int
    figures: dict[str, float] = field(default_factory=dict)
    held: bool | None = None
    note: str | None = None
    worst: list[int] = field(default_factory=list)


def _few(held: bool | None, rows: int, note: str | None = None) -> tuple[bool | None, str | None]:
    """A verdict on `rows` compared rows: below MIN_ROWS a bar met cannot tell (None), and
    the note says so with the count (a broken bar stays broken, noted)."""
    if rows >= MIN_ROWS or held is None:
        return held, note
    few = f"{counted(rows, 'row')} compared, fewer than {MIN_ROWS}: too few to tell"
    return (None if held else held), (few if note is None else f"{few}; {note}")


def _defined(*arrays: np.ndarray) -> np.ndarray:
    """Rows where every array is defined."""
    mask = np.ones(arrays[0].shape[-1], dtype=bool)
    for a in arrays:
        mask &= ~np.isnan(a).reshape(-1, a.shape[-1]).any(axis=0)
    return mask


def repeat(metric: str, runs: np.ndarray, threshold: float) -> Check:
    """Repeat noise: runs is (repeats, rows). Per row the standard deviation over the
    repeats (population, ddof 0) and whether they fall on both sides of the threshold."""
    expectation = (
        f"the same row judged {runs.shape[0]} times with different seeds scores the same: "
        f"mean_std <= {TOLERANCE['repeat_std']} and crossing_share <= "
        f"{TOLERANCE['repeat_crossing']} (rows with repeats on both sides of {threshold:g})"
    )
    mask = _defined(runs)
    kept = runs[:, mask]
    if kept.shape[1] == 0:
        return Check("repeat", metric, expectation, 0, note="no row scored in every repeat")
    std = kept.std(axis=0)
    crossing = (kept >= threshold).any(axis=0) & (kept < threshold).any(axis=0)
    figures = {
        "mean_std": float(std.mean()),
        "max_std": float(std.max()),
        "crossing_share": float(crossing.mean()),
        "rows_varying": float(np.count_nonzero(std > MOVED)),
    }
    held = (
        figures["mean_std"] <= TOLERANCE["repeat_std"]
        and figures["crossing_share"] <= TOLERANCE["repeat_crossing"]
    )
    worst = _worst(mask, std)
    verdict, note = _few(held, kept.shape[1])
    return Check("repeat", metric, expectation, kept.shape[1], figures, verdict, note, worst)


def unchanged(
    probe: str, metric: str, before: np.ndarray, after: np.ndarray, expectation: str
) -> Check:
    """after must equal before within TOLERANCE[probe] of mean |after - before|."""
    tolerance = TOLERANCE[probe.split(":")[0]]
    expectation = f"{expectation}: mean_abs_change <= {tolerance}"
    mask = _defined(before, after)
    if not mask.any():
        return Check(probe, metric, expectation, 0, note="no row scored both ways")
    change = after[mask] - before[mask]
    figures = {
        "mean_abs_change": float(np.abs(change).mean()),
        "max_abs_change": float(np.abs(change).max()),
        "mean_change": float(change.mean()),
        "rows_moved": float(np.count_nonzero(np.abs(change) > MOVED)),
    }
    held = figures["mean_abs_change"] <= tolerance
    worst = _worst(mask, np.abs(change))
    verdict, note = _few(held, int(mask.sum()))
    return Check(probe, metric, expectation, int(mask.sum()), figures, verdict, note, worst)


def no_gain(metric: str, before: np.ndarray, after: np.ndarray) -> Check:
    """Padding must not raise the score: mean(after - before) <= TOLERANCE["verbosity"]."""
    expectation = (
        "the answer padded with content-free filler gains nothing: "
        f"mean_gain <= {TOLERANCE['verbosity']}"
    )
    mask = _defined(before, after)
    if not mask.any():
        return Check("verbosity", metric, expectation, 0, note="no row scored both ways")
    gain = after[mask] - before[mask]
    figures = {
        "mean_gain": float(gain.mean()),
        "max_gain": float(gain.max()),
        "rows_gaining": float(np.count_nonzero(gain > MOVED)),
        "rows_losing": float(np.count_nonzero(gain < -MOVED)),
    }
    held = figures["mean_gain"] <= TOLERANCE["verbosity"]
    worst = _worst(mask, np.maximum(gain, 0.0))
    verdict, note = _few(held, int(mask.sum()))
    return Check("verbosity", metric, expectation, int(mask.sum()), figures, verdict, note, worst)


def models(metric: str, first: np.ndarray, second: np.ndarray, threshold: float) -> Check:
    """Cross-model agreement: Spearman of the scores, Cohen's kappa of pass/fail at the
    threshold, each with a 95% bootstrap interval (judge.labels' measures)."""
    expectation = (
        f"a second judge model ranks and passes the rows alike: spearman >= "
        f"{TOLERANCE['spearman']} and kappa@{threshold:g} >= {TOLERANCE['kappa']}"
    )
    mask = _defined(first, second)
    a, b = first[mask], second[mask]
    ranked, _ = kinds.graded(a, b)
    # kappa is symmetric: the second model's pass/fail plays the labels of the first's.
    passed, _ = kinds.binary(
        (a >= threshold).astype(np.float64), (b >= threshold).astype(np.float64)
    )
    rho, kappa = ranked["spearman"], passed["kappa@0.5"]
    figures = {
        "spearman": rho.value,
        "spearman_ci_low": rho.ci_low,
        "spearman_ci_high": rho.ci_high,
        "kappa": kappa.value,
        "kappa_ci_low": kappa.ci_low,
        "kappa_ci_high": kappa.ci_high,
        "mean_first": float(a.mean()) if a.size else math.nan,
        "mean_second": float(b.mean()) if b.size else math.nan,
    }
    undefined = {
        "spearman": "one model gave every row the same score",
        "kappa": f"one model passed (or failed) every row at {threshold:g}",
    }
    notes = []
    for name, m in (("spearman", rho), ("kappa", kappa)):
        if math.isnan(m.value):
            notes.append(
                f"{name} undefined: {'fewer than two rows' if a.size < 2 else undefined[name]}"
            )
        elif m.note:
            notes.append(f"{name}: {m.note}")
    held = (
        None
        if math.isnan(rho.value) and math.isnan(kappa.value)
        else bool(rho.value >= TOLERANCE["spearman"] and kappa.value >= TOLERANCE["kappa"])
    )
    held, note = _few(held, int(mask.sum()), "; ".join(notes) or None)
    worst = _worst(mask, np.abs(a - b))  # the widest gaps between the two models
    return Check("models", metric, expectation, int(mask.sum()), figures, held, note, worst)
