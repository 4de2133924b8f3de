"""The monitor's windows: a window is a span of the traces' start times (`--window 1h`) or a
number of judged rows (`--window 500`); closed, it gets each metric's mean with a bootstrap
interval (`judge.stats`), and after the baseline windows each metric is checked against the
baseline by a `WindowCheck` (the alert statistics)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from judge.errors import JudgeError
from judge.monitor.baseline import Baseline
from judge.stats import bootstrap_ci

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
NS = 1_000_000_000


@dataclass(frozen=True)
class WindowSpec:
    """A window: `seconds` of the traces' start times, or `traces` judged rows."""

    seconds: int | None = None
    traces: int | None = None

    def __str__(self) -> str:
        return f"{self.seconds}s" if self.seconds is not None else str(self.traces)


def parse_window(text: str) -> WindowSpec:
    """`--window`: a duration (90s, 30m, 1h, 1d) or a number of judged rows (500)."""
    given = text.strip().lower()
    if given.isdigit() and int(given) > 0:
        return WindowSpec(traces=int(given))
    match = re.fullmatch(r"(\d+)\s*([smhd])", given)
    if match and int(match[1]) > 0:
        return WindowSpec(seconds=int(match[1]) * _UNITS[match[2]])
    raise JudgeError(
        f"--window {text}: give a duration (e.g. 30m, 1h, 1d) or a number of judged traces "
        "(e.g. 500)"
    )


def parse_duration(text: str) -> int | None:
    """A duration (90s, 30m, 12h, 7d, or 0) in seconds; None when `text` is none."""
    given = text.strip().lower()
    if given == "0":
        return 0
    match = re.fullmatch(r"(\d+)\s*([smhd])", given)
    return int(match[1]) * _UNITS[match[2]] if match else None


class WindowCheck(Protocol):
    """The alert statistics of one metric, window after window (the sequential test).

    Called with the metric, the baseline (a `Baseline`: its scores, a sequence, and where
    they came from), the closed window's scores, the state it returned for the window
    before (None the first time) and, as `number`, the window's number as the monitor
    counts windows (an alert that names windows names them so); returns the alert (a
    JSON object: the test's statistic and what it concluded) or None, and its new state
    (JSON values), which the monitor keeps in its state between windows and restarts.
    """

    def __call__(
        self,
        metric: str,
        baseline: Baseline,
        window: Sequence[float],
        state: Any | None,
        *,
        number: int,
    ) -> tuple[Mapping[str, Any] | None, Any]:
        """(the alert or None, the new state) of one closed window."""
        ...


def metric_summary(
    values: Sequence[float], bounds: tuple[float, float] | None = None
) -> dict[str, Any]:
    """A metric's figures in a window: scored rows, mean and 95% bootstrap interval (None
    bounds when there is none: one row, or rows all the same; `bounds` the metric's range,
    `judge.metrics.registry.metric_range`, or None)."""
    scores = np.array([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if not len(scores):
        return {"scored": 0, "mean": None, "ci_low": None, "ci_high": None}
    low, high = bootstrap_ci(scores, bounds=bounds)
    return {
        "scored": len(scores),
        "mean": float(scores.mean()),
        "ci_low": None if math.isnan(low) else float(low),
        "ci_high": None if math.isnan(high) else float(high),
    }
