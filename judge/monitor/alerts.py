"""Alerts on real drops only: a sequential change test per metric against a baseline.

`DropDetector` watches one metric's per-trace scores in [0, 1], a window at a time, and
returns an `Alert` when their mean has dropped below the baseline's by more than
`min_drop`. Its false-alarm rate is a proven bound, not a hope: on a stream that has not
dropped, the expected number of alerts in any W windows is at most `alpha * W` (one per
1,000 windows at the default `alpha=0.001`), whatever the scores' distribution, and even
when they are not independent (see below).

**The test: an e-detector.** It is the e-CUSUM of Shin, Ramdas & Rinaldo (2024, "E-detectors:
a nonparametric framework for sequential change detection", New England Journal of
Statistics in Data Science), built from the betting e-values of Waudby-Smith & Ramdas
(2023, "Estimating means of bounded random variables by betting", JRSS-B). Let `r` be
the reference: the lower end of the baseline mean's interval minus `min_drop`. A
trace scoring x (flipped to 1 - x for a metric where lower is better) turns a stake of 1
into `1 + lam * (r - x)`: a bet that the score falls below r, which pays on average at most
1 while the stream's mean stays at or above r, whatever `lam` in [0, 1/(1 - r)) is
chosen before the score is seen. A window's e-value `E` is the product over its traces.
For each bet size `lam_k` in a fixed grid (`BETS`), the e-CUSUM statistic is
`M_k <- max(M_k, 1) * E_k` per window; the test alerts when the average of the `M_k`
reaches `1/alpha`, then starts afresh. Each `M_k` is at most the e-Shiryaev-Roberts
statistic `R_k <- (R_k + 1) * E_k`, and `mean_k(R_k) - t` (t counting windows) is a
supermartingale while the stream has not dropped: so is `alerts / alpha + mean_k(R_k) - t`,
since an alert adds `1/alpha` and the restart takes away `mean_k(R_k) >= 1/alpha`. Its
expectation stays at most 0, hence E[alerts in W windows] <= alpha * W, and the average
run length to a false alarm is at least 1/alpha windows (Shin et al.'s bound).

**Why this and not a calibrated CUSUM (Page 1954).** A CUSUM on window means needs a model
of the scores (normal window means, or the baseline's rows resampled) and a threshold
found by simulating it; its false-alarm rate is then as good as that model, and live
traffic is not independent draws from a pinned run: hours differ, topics drift. The
e-detector's bound needs only that each trace's score, given the scores before it, has
mean at or above the reference: no distribution, no independence, no variance (a
baseline of all 1.0 works), no simulation at start-up, and the same bound for windows of
any size, so an hour's window of varying traffic is fine. The price is caution: its
real false-alarm rate is far below `alpha` (measured by `bench.monitor.alerts_sim`), so it
detects a little later than a CUSUM tuned exactly to a known distribution would. A
confidence sequence for the running mean alone would not do: after weeks of good traffic
the running mean hardly moves when quality drops, and the e-CUSUM's `max(M, 1)` forgets
the good past.

**The baseline** (a pinned run's per-row scores, or the first K windows' scores together)
is a sample, so its mean is known only to an interval: the Waudby-Smith & Ramdas
hedged-capital interval at level `1 - baseline_alpha` (`betting_interval`). The test
compares against its lower end minus `min_drop`, so the bound above holds whenever the
interval covers the baseline's true mean (probability at least `1 - baseline_alpha`); with
`min_drop > 0` a stream as good as the baseline has that margin besides. The formulas are
a few lines of numpy: `confseq` (the authors' package) builds from C++ source with Boost,
and `expectation` needs Python 3.12.

NaN scores (a judge error, a metric that does not apply) are skipped and counted; a window
with no score is counted and changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from judge.errors import JudgeError
from judge.formatting import number
from judge.metrics.registry import higher_is_better
from judge.monitor.baseline import Baseline
from judge.monitor.windows import WindowCheck
from judge.stats import bootstrap_ci

FORMAT = 1  # of `DropDetector.to_json`; a new format reads the old ones
# Bet sizes as fractions of the largest, 1 / (1 - reference): halving from 0.8 covers the
# best bets of drops from about 0.02 (0/1 scores) to 0.3 (scores near 0.85 spread like
# Beta(3.4, 0.6)). Averaging K statistics costs log(K) = 1.9 nats of evidence, about a
# quarter of log(1/alpha) at alpha=0.001.
BETS = (0.8, 0.4, 0.2, 0.1, 0.05, 0.025, 0.0125)
BASELINE_MIN_ROWS = 10
WORST_ROWS = 5
GRID = 1001  # the baseline interval's candidate means: a step of 0.001
CAP = 0.75  # the interval's bets stay below CAP / m and CAP / (1 - m) (WSR's c)
_CHUNK = 512  # rows of the interval's (rows x GRID) arrays at a time: 4 MB each
_LOG_CAP = 690.0  # exp(690) ~ 1e299: a larger statistic says nothing more, and stays finite


@dataclass(frozen=True)
class Alert:
    """A drop found by `DropDetector.update`: what dropped, from what, to what, on what
    evidence. Means and intervals are of the metric's own scores (for a metric where lower
    is better, a rise).

    Args:
        metric: the metric's name.
        window: the window that raised it: its `number` given to `DropDetector.update`,
            else counted from 0 over every window given to the detector (windows with no
            score included).
        since_window: the first window of the evidence (numbered as `window`): the
            e-CUSUM's restart point, an estimate of when the drop began.
        higher_is_better: the metric's direction.
        baseline_mean: the baseline's mean.
        baseline_interval: its interval at level `1 - baseline_alpha` (betting).
        reference: the mean the test compares against: the interval's worse end moved by
            `min_drop` in the bad direction.
        current_mean: the mean of this window's scores.
        current_interval: its 95% bootstrap interval (`judge.stats.bootstrap_ci`, as every
            judge summary); NaN bounds (null in JSON) when there is none: one row, or
            rows all the same but all 0 or all 1 (those get the exact bound).
        since_mean: the mean of the scores since `since_window`.
        since_rows: how many scores that is.
        statistic: the e-detector's value (the average of the e-CUSUM statistics).
        threshold: the value that raises an alert, `1 / alpha`.
        worst_rows: positions in this window's scores of its worst scores, worst first.
        nan_rows: NaN scores in this window, skipped.
        baseline_source: where the baseline came from: "run ID", "the first 3 windows", or
            "the scores given" (`Baseline.source`).
    """

    metric: str
    window: int
    since_window: int
    higher_is_better: bool
    baseline_mean: float
    baseline_interval: tuple[float, float]
    reference: float
    current_mean: float
    current_interval: tuple[float, float]
    since_mean: float
    since_rows: int
    statistic: float
    threshold: float
    worst_rows: tuple[int, ...]
    nan_rows: int
    baseline_source: str = "the scores given"

    @property
    def message(self) -> str:
        """One line for a log or a webhook's text."""
        moved = "dropped" if self.higher_is_better else "rose"
        low, high = self.current_interval
        b_low, b_high = self.baseline_interval
        return (
            f"{self.metric} {moved}: window {self.window} mean {self.current_mean:.3f} "
            f"[{number(low)}, {number(high)}], {self.since_mean:.3f} over {self.since_rows} scores "
            f"since window {self.since_window}, against baseline {self.baseline_mean:.3f} "
            f"[{b_low:.3f}, {b_high:.3f}] ({self.baseline_source}; "
            f"reference {self.reference:.3f}); evidence "
            f"{self.statistic:.4g} >= {self.threshold:.4g}"
        )

    def to_json(self) -> dict[str, Any]:
        """The alert as a JSON object (every value finite)."""
        return {
            "metric": self.metric,
            "window": self.window,
            "since_window": self.since_window,
            "higher_is_better": self.higher_is_better,
            "baseline_mean": self.baseline_mean,
            "baseline_interval": list(self.baseline_interval),
            "reference": self.reference,
            "current_mean": self.current_mean,
            # null bounds: no interval (one row, or rows all the same)
            "current_interval": [None if math.isnan(v) else v for v in self.current_interval],
            "since_mean": self.since_mean,
            "since_rows": self.since_rows,
            "statistic": self.statistic,
            "threshold": self.threshold,
            "worst_rows": list(self.worst_rows),
            "nan_rows": self.nan_rows,
            "baseline_source": self.baseline_source,
        }


def betting_interval(values: np.ndarray, alpha: float) -> tuple[float, float]:
    """The hedged-capital betting interval of the mean of values in [0, 1], at level
    1 - alpha (Waudby-Smith & Ramdas 2023, with their predictable plug-in bets for a fixed
    sample size, and the largest bet capped at CAP).

    A candidate mean m is rejected when the capital of betting that the mean is above m,
    or below it, ends at 2/alpha or more; the interval spans the candidates on a grid of
    step 0.001 left standing, widened by one step each side. The capital at the last row,
    not its running maximum (the confidence sequence at n): both are valid, but with the
    maximum a run of good rows early in the baseline can reject the true mean for good (it
    did for 0.3-0.5% of simulated baselines of 1,000 rows at alpha=0.01, none of 1,000
    with the last capital, for intervals 9-10% wider), and a baseline that misses its mean
    makes a monitor cry wolf on every window. It depends on the order of the values (the
    bets are predictable); valid for any order.

    Args:
        values: the values, in [0, 1], no NaN, at least one.
        alpha: the error probability.
    """
    n = values.size
    count = np.arange(1, n + 1)
    means = (0.5 + np.cumsum(values)) / (count + 1)
    spreads = (0.25 + np.cumsum((values - means) ** 2)) / (count + 1)
    before = np.concatenate(([0.25], spreads[:-1]))
    bets = np.sqrt(2 * math.log(2 / alpha) / (n * before))
    grid = np.linspace(0.0, 1.0, GRID)
    with np.errstate(divide="ignore"):
        # Bets capped so that a stake never reaches zero: 1 + bet * (x - m) >= 1 - CAP.
        cap_up = np.where(grid > 0, CAP / grid, np.inf)
        cap_down = np.where(grid < 1, CAP / (1 - grid), np.inf)
    up, down = np.zeros(GRID), np.zeros(GRID)
    for lo in range(0, n, _CHUNK):
        x = values[lo : lo + _CHUNK, None]
        bet = bets[lo : lo + _CHUNK, None]
        up += np.log1p(np.minimum(bet, cap_up) * (x - grid)).sum(axis=0)
        down += np.log1p(-np.minimum(bet, cap_down) * (x - grid)).sum(axis=0)
    bar = math.log(2 / alpha)
    standing = grid[(up < bar) & (down < bar)]
    if not standing.size:  # both capitals rejecting every candidate: Hoeffding's interval
        mean, half = float(values.mean()), math.sqrt(math.log(2 / alpha) / (2 * n))
        return (max(0.0, mean - half), min(1.0, mean + half))
    step = 1.0 / (GRID - 1)
    return (max(0.0, float(standing[0]) - step), min(1.0, float(standing[-1]) + step))


def _scores(
    values: Sequence[float | None] | np.ndarray, name: str
) -> tuple[np.ndarray, np.ndarray]:
    """The scores as floats and the mask of the NaN ones; a JudgeError for any other value
    outside [0, 1], naming the keyword argument."""
    try:
        scores = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise JudgeError(f"{name}: give numbers in [0, 1] ({error})") from None
    if scores.ndim != 1:
        raise JudgeError(f"{name}: give a flat sequence of scores, not shape {scores.shape}")
    nan = np.isnan(scores)
    outside = ~nan & ((scores < 0) | (scores > 1))
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise JudgeError(
            f"{name}: row {row} is {float(scores[row])!r}; DropDetector takes scores in [0, 1] "
            "(rescale a metric with another range before giving it)"
        )
    return scores, nan


class DropDetector:
    """The sequential drop test of one metric against its baseline (see the module).

    Feed it each window's per-trace scores with `update`; it returns an `Alert` when the
    mean has dropped by more than `min_drop` below the baseline's interval, then starts
    afresh (a drop that lasts alerts again, after about as many windows). Its state is
    `to_json`; `from_json` resumes the test exactly where it was.

    Args:
        baseline_scores: the baseline's per-row scores in [0, 1], NaN or None ones
            skipped: a `Baseline` (a pinned run's scores, or the first K windows'
            together, with their source for the messages and alerts), or the scores
            alone.
        metric: the metric's name, for the alerts.
        higher_is_better: False for a metric such as hallucination_rate, where a drop in
            quality is a rise in the score.
        alpha: the false-alarm rate per window: on a stream that has not dropped, at most
            alpha * W alerts are expected in W windows.
        min_drop: the smallest drop worth an alert, in the metric's units.
        baseline_alpha: the baseline interval's error probability.
    """

    def __init__(
        self,
        baseline_scores: Baseline | Sequence[float] | np.ndarray,
        *,
        metric: str = "score",
        higher_is_better: bool = True,
        alpha: float = 0.001,
        min_drop: float = 0.0,
        baseline_alpha: float = 0.01,
    ) -> None:
        if not 0 < alpha < 1:
            raise JudgeError(f"alpha={alpha!r}: give a false-alarm rate per window in (0, 1)")
        if not 0 < baseline_alpha < 1:
            raise JudgeError(f"baseline_alpha={baseline_alpha!r}: give a probability in (0, 1)")
        if not 0 <= min_drop < 1:
            raise JudgeError(f"min_drop={min_drop!r}: give a drop in [0, 1)")
        baseline = (
            baseline_scores if isinstance(baseline_scores, Baseline) else Baseline(baseline_scores)
        )
        # None: NaN, skipped. Scores given are named by their keyword, a run's or
        # windows' by their source (no caller of the monitor gave baseline_scores).
        named = "baseline_scores" if baseline.given else f"{metric}'s baseline ({baseline.source})"
        scores, nan = _scores(baseline.scores, named)
        kept = scores[~nan]
        # Scores given by the caller are named by their keyword; a run's or windows' by
        # their source, which the message says.
        given = "baseline_scores: " if baseline.given else ""
        if kept.size < BASELINE_MIN_ROWS:
            raise JudgeError(
                f"{given}{metric} has {kept.size} scored row(s)"
                + ("" if baseline.given else f" in its baseline ({baseline.source})")
                + (f" ({int(nan.sum())} NaN)" if nan.any() else "")
                + f"; a baseline needs at least {BASELINE_MIN_ROWS} to bound its mean: "
                f"{baseline.remedy}"
            )
        good = kept if higher_is_better else 1.0 - kept
        low, high = betting_interval(good, baseline_alpha)
        reference = low - min_drop
        if reference <= 0:
            worse = "lower" if higher_is_better else "upper"
            raise JudgeError(
                f"{given}the {worse} end of {metric}'s baseline interval "
                f"({_shown((low, high), higher_is_better)}, {kept.size} rows of "
                f"{baseline.source}) "
                f"moved by min_drop={min_drop} leaves no room for a drop: the scores "
                f"cannot go {'below 0' if higher_is_better else 'above 1'}. Give a baseline "
                "with more rows, or a smaller min_drop"
            )
        self.metric = metric
        self.higher_is_better = higher_is_better
        self.alpha = alpha
        self.min_drop = min_drop
        self.baseline_alpha = baseline_alpha
        self.baseline_rows = int(kept.size)
        self.baseline_source = baseline.source
        self.baseline_mean = float(kept.mean())
        self.baseline_interval = _metric_interval((low, high), higher_is_better)
        self._reference = reference  # of the good-direction scores
        self._bets = np.array(BETS) / (1.0 - reference)
        self.windows = 0
        self.nan_rows = 0
        self.alerts = 0
        self._restart()

    def _restart(self) -> None:
        """Every bet's statistic back to 1, its evidence not yet begun."""
        k = len(self._bets)
        self._log_m = np.zeros(k)
        self._since = np.full(k, self.windows, dtype=np.int64)
        self._since_sum = np.zeros(k)
        self._since_rows = np.zeros(k, dtype=np.int64)

    @property
    def reference(self) -> float:
        """The mean the test compares against, in the metric's own units."""
        return self._reference if self.higher_is_better else 1.0 - self._reference

    @property
    def threshold(self) -> float:
        """The statistic that raises an alert: 1 / alpha."""
        return 1.0 / self.alpha

    @property
    def statistic(self) -> float:
        """The e-detector's value now: the average of the e-CUSUM statistics."""
        return math.exp(min(_LOG_CAP, self._log_statistic()))

    def _log_statistic(self) -> float:
        top = float(self._log_m.max())
        return top + math.log(float(np.exp(self._log_m - top).mean()))

    def update(
        self, window_scores: Sequence[float] | np.ndarray, *, number: int | None = None
    ) -> Alert | None:
        """Take one window's per-trace scores; the alert when they complete a drop.

        Args:
            window_scores: the window's scores in [0, 1], in the order judged; NaN or None
                ones (undefined scores, as results.jsonl writes them) are skipped and
                counted.
            number: the window's number as the caller counts windows (the monitor's,
                which skips none and starts before the baseline's end), which the alert's
                `window` and `since_window` name; None: the detector's own count, from
                0 at its first window.
        """
        scores, nan = _scores(window_scores, "window_scores")
        window = self.windows if number is None else int(number)
        self.windows += 1
        self.nan_rows += int(nan.sum())
        kept = scores[~nan]
        if not kept.size:
            return None
        good = kept if self.higher_is_better else 1.0 - kept
        log_e = np.log1p(np.outer(self._bets, self._reference - good)).sum(axis=1)
        # max(M, 1): a statistic at or below 1 forgets its past, its evidence starts here.
        fresh = self._log_m <= 0
        self._log_m = np.maximum(self._log_m, 0.0) + log_e
        self._since = np.where(fresh, window, self._since)
        self._since_sum = np.where(fresh, 0.0, self._since_sum) + float(good.sum())
        self._since_rows = np.where(fresh, 0, self._since_rows) + good.size
        log_statistic = self._log_statistic()
        if log_statistic < -math.log(self.alpha):
            return None
        lead = int(np.argmax(self._log_m))
        since_mean = float(self._since_sum[lead] / self._since_rows[lead])
        positions = np.flatnonzero(~nan)[np.argsort(good, kind="stable")[:WORST_ROWS]]
        low, high = bootstrap_ci(kept, bounds=(0.0, 1.0))  # scores in [0, 1], checked
        alert = Alert(
            metric=self.metric,
            window=window,
            since_window=int(self._since[lead]),
            higher_is_better=self.higher_is_better,
            baseline_mean=self.baseline_mean,
            baseline_interval=self.baseline_interval,
            reference=self.reference,
            current_mean=float(kept.mean()),
            current_interval=(low, high),
            since_mean=since_mean if self.higher_is_better else 1.0 - since_mean,
            since_rows=int(self._since_rows[lead]),
            statistic=math.exp(min(_LOG_CAP, log_statistic)),
            threshold=self.threshold,
            worst_rows=tuple(int(p) for p in positions),
            nan_rows=int(nan.sum()),
            baseline_source=self.baseline_source,
        )
        self.alerts += 1
        self._restart()
        return alert

    def to_json(self) -> dict[str, Any]:
        """The detector's whole state as a JSON object: `from_json` resumes it exactly
        (floats are written with repr, which reads back bit for bit)."""
        return {
            "format": FORMAT,
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "alpha": self.alpha,
            "min_drop": self.min_drop,
            "baseline_alpha": self.baseline_alpha,
            "baseline_rows": self.baseline_rows,
            "baseline_source": self.baseline_source,
            "baseline_mean": self.baseline_mean,
            "baseline_interval": list(self.baseline_interval),
            "reference": self._reference,
            "bets": self._bets.tolist(),
            "windows": self.windows,
            "nan_rows": self.nan_rows,
            "alerts": self.alerts,
            "log_statistics": self._log_m.tolist(),
            "since_window": self._since.tolist(),
            "since_sum": self._since_sum.tolist(),
            "since_rows": self._since_rows.tolist(),
        }

    @classmethod
    def from_json(cls, state: Any) -> DropDetector:
        """The detector `to_json` saved, resumed exactly.

        Args:
            state: the JSON object `to_json` returned (read back with `json.loads`).
        """
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            found = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise JudgeError(
                f"state: not a DropDetector state of format {FORMAT} (found {found!r}); "
                "give what DropDetector.to_json returned"
            )
        self = cls.__new__(cls)
        try:
            self.metric = str(state["metric"])
            self.higher_is_better = bool(state["higher_is_better"])
            self.alpha = float(state["alpha"])
            self.min_drop = float(state["min_drop"])
            self.baseline_alpha = float(state["baseline_alpha"])
            self.baseline_rows = int(state["baseline_rows"])
            # Written since the baseline could be a pinned run; a state from before: windows.
            self.baseline_source = str(state.get("baseline_source", "the first windows"))
            self.baseline_mean = float(state["baseline_mean"])
            low, high = (float(v) for v in state["baseline_interval"])
            self.baseline_interval = (low, high)
            self._reference = float(state["reference"])
            self._bets = np.array(state["bets"], dtype=np.float64)
            self.windows = int(state["windows"])
            self.nan_rows = int(state["nan_rows"])
            self.alerts = int(state["alerts"])
            self._log_m = np.array(state["log_statistics"], dtype=np.float64)
            self._since = np.array(state["since_window"], dtype=np.int64)
            self._since_sum = np.array(state["since_sum"], dtype=np.float64)
            self._since_rows = np.array(state["since_rows"], dtype=np.int64)
        except (KeyError, TypeError, ValueError) as error:
            raise JudgeError(
                f"state: a DropDetector state missing or mistyping {error}; give what "
                "DropDetector.to_json returned"
            ) from None
        sizes = {a.size for a in (self._log_m, self._since, self._since_sum, self._since_rows)}
        if sizes != {self._bets.size} or not 0 < self._reference < 1:
            raise JudgeError("state: a DropDetector state whose arrays do not match its bets")
        return self


def _shown(good: tuple[float, float], higher_is_better: bool) -> str:
    """An interval of good-direction means, in the metric's own units, as text."""
    low, high = _metric_interval(good, higher_is_better)
    return f"[{low:.3f}, {high:.3f}]"


def _metric_interval(good: tuple[float, float], higher_is_better: bool) -> tuple[float, float]:
    """An interval of good-direction means in the metric's own units."""
    return good if higher_is_better else (1.0 - good[1], 1.0 - good[0])


# The state of a metric the check cannot test (its baseline too small, say), with why.
UNCHECKED = "unchecked"


def drop_check(*, alpha: float = 0.001, min_drop: float = 0.0) -> WindowCheck:
    """The monitor's check of each metric (`judge.monitor.windows.WindowCheck`): a
    `DropDetector` made from the baseline at the first window after it, resumed from its
    saved state at each later one.

    Args:
        alpha: the false-alarm rate per window of a metric that did not drop.
        min_drop: drops smaller than this (in the metric's units) are not alerted on.
    """

    if not 0 < alpha < 1:
        raise JudgeError(f"alpha={alpha!r}: give a false-alarm rate per window in (0, 1)")
    if not 0 <= min_drop < 1:
        raise JudgeError(f"min_drop={min_drop!r}: give a drop in [0, 1)")

    def check(
        metric: str,
        baseline: Baseline,
        window: Sequence[float],
        state: Any | None,
        *,
        number: int,
    ) -> tuple[Mapping[str, Any] | None, Any]:
        if isinstance(state, Mapping) and UNCHECKED in state:
            return None, state  # a baseline too small to test against stays so
        if state is None:
            try:
                detector = DropDetector(
                    baseline,
                    metric=metric,
                    higher_is_better=higher_is_better(metric),
                    alpha=alpha,
                    min_drop=min_drop,
                )
            except JudgeError as exc:  # too few baseline rows, or no room to drop
                return None, {UNCHECKED: str(exc)}
        else:
            detector = DropDetector.from_json(state)
        try:
            alert = detector.update(window, number=number)
        except JudgeError:  # a score outside [0, 1]: a metric of another range
            outside = [v for v in window if v is not None and not (math.isnan(v) or 0 <= v <= 1)]
            shown = f" of {outside[0]!r}" if outside else ""
            return None, {
                UNCHECKED: f"a window after the baseline has a score{shown}, "
                "outside [0, 1]: the drop test takes scores in [0, 1]; rescale the metric's "
                "scores to [0, 1] to have it checked"
            }
        return (alert.to_json() if alert is not None else None), detector.to_json()

    return check
