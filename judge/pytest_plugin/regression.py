"""The regression gate of a test: fail only when a metric got significantly worse than a
baseline run on the questions both share (paired test, Holm across metrics, a stated
alpha), never on a fixed threshold that flakes; print the differences either way."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judge.comparison.evaluations import Comparison, GateWording, compare
from judge.errors import JudgeError
from judge.formatting import counted, number, p_text
from judge.pytest_plugin.assertions import ScoreAssertionError


def baseline_source(baseline: Any, runs: str | os.PathLike[str] | None = None) -> Any:
    """What a baseline names: an evaluation or output folder as given, else a run of the
    run store by id, id prefix or name; None is the store's pinned baseline."""
    if baseline is not None and (hasattr(baseline, "rows") or Path(baseline).exists()):
        return baseline
    from judge.runs.store import default_runs_path, open_existing

    path = Path(runs) if runs is not None else default_runs_path()
    what = (
        "baseline=None names the run store's pinned baseline, but there is "
        if baseline is None
        else f"baseline {str(baseline)!r}: no such file or folder, and "
    )
    store = open_existing(path, what)
    try:
        record = store.get(str(baseline)) if baseline is not None else store.baseline()
        if record is not None:
            store.check(record)  # a damaged record is refused, naming it
    finally:
        store.close()
    if record is None:
        raise JudgeError(
            f"{path} has no pinned baseline: pin one with `judge runs baseline RUN`, or pass "
            "baseline= a run id or output folder"
        )
    return record.out_dir


def assert_no_regression(
    result: Any,
    baseline: Any = None,
    *,
    alpha: float = 0.05,
    metrics: Sequence[str] | None = None,
    runs: str | os.PathLike[str] | None = None,
) -> Comparison:
    """Compare `result` (B) against `baseline` (A) on their shared questions; raise
    `ScoreAssertionError` when a metric is significantly worse. The comparison's table
    is printed either way (pytest shows it with the failure, or with `-rP`). When both
    runs' rows are turns of conversations, the test resamples conversations, not turns
    (`judge.compare`).

    Args:
        result: the evaluation under test (`rag_judge.evaluate`'s result, an output
            folder, a results.jsonl).
        baseline: the run to hold it to: an evaluation, an output folder, a
            results.jsonl, or a run of the run store by id, id prefix or name; None takes
            the store's pinned baseline (`judge runs baseline ID`).
        alpha: the significance level of the Holm-adjusted p-values.
        metrics: the metrics to compare; default every metric both runs have.
        runs: the run store (default `JUDGE_RUNS` or `.judge/runs.sqlite`).

    Returns:
        The `Comparison` (B against A), when no metric got significantly worse.

    Raises:
        ScoreAssertionError: a metric significantly worse; a metric with no paired
            scores; or a gate that could not have failed: too few paired questions (or
            conversations) for the paired randomisation test to reach p < alpha after
            Holm's adjustment (6 at alpha 0.05 with one metric, 7 with two or three, 8
            with four to six), whatever the scores; the message says how many it needs.
    """
    __tracebackhide__ = True
    if not 0 < alpha < 1:
        raise JudgeError(f"alpha={alpha!r}: give a significance level between 0 and 1, e.g. 0.05")
    comparison = compare(
        baseline_source(baseline, runs), result, metrics=list(metrics) if metrics else None
    )
    worse = [m for m in comparison.metrics.values() if m.worse and m.p_adjusted < alpha]
    # A metric with no paired scores compares nothing: that is no pass.
    unpaired = [m.metric for m in comparison.metrics.values() if m.n == 0]
    lines = [
        f"  {m.metric}: no paired scores (undefined or missing on one side)"
        if m.n == 0
        else f"  {m.metric}: {number(m.mean_a)} -> {number(m.mean_b)}, "
        f"Δ {number(m.delta, sign='+')} [{number(m.ci_low, sign='+')}, "
        f"{number(m.ci_high, sign='+')}], p_holm {p_text(m.p_adjusted)}"
        + (" (significantly worse)" if m in worse else "")
        for m in comparison.metrics.values()
    ]
    # turns of one chat are not independent: the test resampled whole conversations
    unit = f", {comparison.resampled}" if comparison.resampled is not None else ""
    text = (
        f"judge regression gate: {counted(len(comparison.keys), 'shared question')}{unit}, "
        f"alpha {alpha:g} (Holm across {counted(len(comparison.metrics), 'metric')}), "
        f"baseline {comparison.label_a}\n" + "\n".join(lines)
    )
    print(text)
    if not comparison.metrics:
        raise ScoreAssertionError(
            f"no metric scored in both the evaluation and the baseline {comparison.label_a}: "
            "nothing was compared; judge the same metrics, or name them with metrics=",
            [],
        )
    if unpaired:
        raise ScoreAssertionError(
            f"{counted(len(unpaired), 'metric')} could not be compared\n" + text, unpaired
        )
    words = GateWording("assert_no_regression", "fewer metrics (metrics=)", "alpha=")
    why = comparison.gate_cannot_fail(alpha, words)
    if why is not None and not worse:  # a gate that could not have failed: no pass
        raise ScoreAssertionError(
            why + "\n" + text, [m.metric for m in comparison.metrics.values()]
        )
    if worse:
        raise ScoreAssertionError(
            f"{counted(len(worse), 'metric')} significantly worse than the baseline\n" + text,
            [m.metric for m in worse],
        )
    return comparison
