"""How many labels a label-corrected mean needs: from a run's judged scores and a pilot of
labels (or an assumed judge-label correlation), the labelled rows for which the PPI++
interval of `judge estimate` has a given half-width (`plan_labels`, `judge plan`)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from judge.errors import InputFormatError, JudgeError
from judge.formatting import number
from judge.json_values import nan_to_null
from judge.stats import normal_quantile, ppi_half_widths, ppi_tuned, variance

from .estimate import RunScores, labelled_run, run_scores


@dataclass
class LabelPlan:
    """The labels a PPI++ interval of a given half-width needs: `judge plan --half-width`.

    Args:
        metric: the metric whose mean is corrected.
        orientation: "score", or "1 - score" for a metric where lower is better.
        half_width: the interval's half-width asked for, on the labels' scale.
        confidence: the interval's coverage.
        rows: the judged rows the labelled ones are drawn from.
        needed: the labelled rows needed (of `rows`); None when even labelling every row
            leaves the interval wider.
        lam: PPI++'s lambda at that many labels.
        reached: the half-width at `needed` labels; when None, the narrowest any count
            of labels of these rows gives.
        reached_at: the labels giving `reached`.
        labels_only: the labels the labels-only interval (no judge) would need.
        source: "labels" (a pilot's labels file) or "assumed" (`judge_correlation`).
        correlation: the judge-label correlation, observed on the pilot or assumed.
        pilot_labels: the pilot's labelled rows with a judged score; None when assumed.
        pilot_half_width: the pilot's own PPI++ half-width (what `judge estimate` gives
            now); None when assumed.
        notes: what the reader should know.
        config: the inputs.
    """

    metric: str
    orientation: str
    half_width: float
    confidence: float
    rows: int
    needed: int | None
    lam: float
    reached: float
    reached_at: int
    labels_only: int
    source: str
    correlation: float
    pilot_labels: int | None = None
    pilot_half_width: float | None = None
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the `--format json` output), NaN as null."""
        data = {
            "metric": self.metric,
            "orientation": self.orientation,
            "half_width": self.half_width,
            "confidence": self.confidence,
            "rows": self.rows,
            "needed": self.needed,
            "lambda": self.lam,
            "reached": self.reached,
            "reached_at": self.reached_at,
            "labels_only": self.labels_only,
            "source": self.source,
            "correlation": self.correlation,
            "pilot": {"labels": self.pilot_labels, "half_width": self.pilot_half_width},
            "notes": self.notes,
            "config": self.config,
        }
        return nan_to_null(data)  # type: ignore[no-any-return]

    def text(self) -> str:
        """The plan in a few lines for the terminal."""
        level = f"{self.confidence:.0%}"
        if self.needed is None:
            head = (
                f"{self.metric}: no count of labels of these {self.rows} rows gives a {level} "
                f"PPI interval of half-width {self.half_width:g}: the narrowest is "
                f"{number(self.reached)}, at {self.reached_at} labels; judge more rows (rows=)"
            )
        else:
            head = (
                f"{self.metric}: {self.needed} labels of {self.rows} judged rows for a {level} "
                f"PPI interval of half-width {self.half_width:g} (lambda {self.lam:.2f}); "
                f"the labels alone would need {self.labels_only}"
            )
        if self.source == "labels":
            basis = (
                f"pilot: {self.pilot_labels} labels, judge-label correlation "
                f"{number(self.correlation)}, PPI half-width now {number(self.pilot_half_width)}"
            )
        else:
            basis = (
                f"assumed: judge-label correlation {self.correlation:g}, labels with the "
                "spread of 0/1 labels at the judge's mean (no labels file)"
            )
        return "\n".join([head, basis, *[f"note: {note}" for note in self.notes]])


def exact_floor(half_width: float, confidence: float = 0.95) -> int:
    """The fewest labels, all 1 (or all 0), whose exact interval is no wider than a
    normal one of half-width `half_width`: `judge estimate` gives 0/1 labels with no spread
    the Clopper-Pearson interval [(alpha/2)^(1/n), 1] (Clopper & Pearson 1934, Biometrika
    26, 404-413; at 95% the two-sided form of Hanley & Lippman-Hand's "rule of three",
    JAMA 249, 1743-1745, 1983), 2 * half_width wide from n = ln(alpha/2) / ln(1 - 2
    half_width): 36 at 0.05, 17 at 0.1. At least 2 (judge estimate's least)."""
    if 2 * half_width >= 1:
        return 2
    n = math.log((1 - confidence) / 2) / math.log(1 - 2 * half_width)
    return max(2, math.ceil(n - 1e-9))


def _search(half_widths: np.ndarray, target: float) -> int | None:
    """The position of the first half-width at most `target`, None if none is."""
    met = np.flatnonzero(half_widths <= target * (1 + 1e-12))
    return int(met[0]) if met.size else None


def plan_labels(
    results: str | os.PathLike[str],
    *,
    metric: str,
    half_width: float,
    labels: str | os.PathLike[str] | list[dict[str, Any]] | None = None,
    label: str | None = None,
    judge_correlation: float | None = None,
    confidence: float = 0.95,
    rows: int | None = None,
    annotator: str | None = None,
) -> LabelPlan:
    """The human labels (of a random sample of the rows) for which `judge estimate`'s PPI++
    interval of a run's `metric` has half-width `half_width`, from a pilot.

    With a labels file (a pilot: some rows of the run labelled at random, as `judge
    estimate` reads it), the moments PPI++'s variance uses are the pilot's: the judge's
    variance over all rows, and on the labelled rows the labels' variance and their
    covariance with the judge's scores; for each count n of labels (the other rows judged
    only), lambda is re-tuned and the half-width is z * sqrt(lambda^2 var(judged) / N +
    var(label - lambda * judged) / n) (Angelopoulos, Duchi & Zrnic 2023, PPI++;
    `judge.stats.ppi_half_widths`). The answer is the least n that reaches `half_width`.

    Without labels, `judge_correlation` is assumed: the labels are taken to spread as 0/1
    labels whose mean is the judge's (variance m (1 - m), the most a label on [0, 1] with
    that mean can spread: so the count errs high; for a judge outside [0, 1], the judge's
    own variance), correlated with the judge's scores by that much.

    For 0/1 labels (a pilot's, or assumed at the judge's mean) the count is at least
    `exact_floor`: labels all 1 (or all 0), likely at a small count, get judge estimate's
    exact Clopper-Pearson interval, 2 * half_width wide only from ln(alpha/2) / ln(1 - 2
    half_width) labels (36 at 0.05). A judge scoring every row alike has no spread (the
    assumed labels' variance is then 0): the count is that floor, and a note gives the
    count for labels at a mean of 0.5, z^2 / (4 half_width^2).

    Args:
        results: the run: its output folder or results.jsonl.
        metric: the metric whose mean is to be corrected.
        half_width: the interval's half-width wanted, on the labels' scale (e.g. 0.05).
        labels: a labels file of a pilot (or its records); None to assume
            `judge_correlation`.
        label: the labels' column (with `labels`).
        judge_correlation: without `labels`, the assumed correlation of the judge's
            scores with people's labels, in [0, 1].
        confidence: the interval's coverage, strictly between 0 and 1.
        rows: the judged rows the labels will be drawn from (default: the run's rows
            with a score; more for a run to come of that many rows).
        annotator: use this annotator's labels only (default: every annotator's, averaged).

    Returns:
        A `LabelPlan`: `needed`, `text()` for the terminal, `to_dict()` for JSON.

    Raises:
        judge.InputFormatError: a run without the metric, labels of no row of the run,
            fewer than 2 pilot labels, a half-width or confidence out of range.
        judge.JudgeError: both or neither of `labels` and `judge_correlation`, `label`
            missing with `labels`, a correlation or `rows` out of range.
    """
    if isinstance(half_width, bool) or not isinstance(half_width, (int, float)):
        raise InputFormatError(f"half_width= must be a positive number, not {half_width!r}")
    if not (math.isfinite(half_width) and half_width > 0):
        raise InputFormatError(f"half_width= must be a positive number, not {half_width!r}")
    z = normal_quantile(confidence)
    if (labels is None) == (judge_correlation is None):
        raise JudgeError(
            "give labels= (a labels file of a random pilot, with label=) or "
            "judge_correlation= (an assumed judge-label correlation), one of the two"
            + ("" if labels is None else ", not both")
        )
    if labels is not None and label is None:
        raise JudgeError("labels= needs label=: the labels' column")
    if labels is None and (label is not None or annotator is not None):
        raise JudgeError(
            f"{'label=' if label is not None else 'annotator='} is for labels= (a labels "
            "file); without one the plan assumes judge_correlation="
        )
    notes: list[str] = []
    config: dict[str, Any] = {"results": str(results)}
    pilot_labels = None
    pilot_half_width = None
    base: RunScores
    if labels is not None:
        assert label is not None
        base = run = labelled_run(
            results, labels=labels, label=label, metric=metric, annotator=annotator
        )
        scores = run.scores
        keep = ~np.isnan(scores[run.labelled])
        judged_l, values = scores[run.labelled][keep], run.values[keep]
        if values.size < 2:
            raise InputFormatError(
                f"{values.size} labelled row{'s' if values.size != 1 else ''} with a judged "
                "score: the plan needs at least 2 (30 or more for a steady one); label more "
                "rows of a random sample"
            )
        zero_one = bool(np.isin(values, (0.0, 1.0)).all())
        if values.size and bool((values == values[0]).all()):
            # No spread to plan with: every count's normal half-width would be 0, and
            # judge estimate gives such labels an exact binomial interval, not PPI's.
            raise InputFormatError(
                f"the pilot's {values.size} labels are all {float(values[0]):g}: "
                "their spread, which the count depends on, is unknown; label more rows of "
                "the random sample (or plan with judge_correlation=, an assumed "
                "judge-label correlation)"
            )
        unlabelled = scores[run.unlabelled]
        every = np.concatenate([judged_l, unlabelled[~np.isnan(unlabelled)]])
        var_f = variance(every, ddof=1)  # exactly 0 for scores all equal
        var_fl = variance(judged_l)
        var_y = variance(values)
        cov = float(((values - values.mean()) * (judged_l - judged_l.mean())).mean())
        correlation = cov / math.sqrt(var_y * var_fl) if var_y > 0 and var_fl > 0 else 0.0
        pilot_labels = int(values.size)
        # the pilot's interval exactly as judge estimate computes it
        _, se, _ = ppi_tuned(values, judged_l, unlabelled[~np.isnan(unlabelled)])
        pilot_half_width = float(z * se)
        source = "labels"
        config.update(labels=str(labels) if not isinstance(labels, list) else "records")
        config.update(label=label, annotator=annotator)
        if run.not_random:
            notes.append(
                f"{run.not_random} of {run.labelled.size} pilot labels record no random "
                "sample: the pilot's correlation may not be the rows' (judge estimate warns "
                "the same)"
            )
        if pilot_labels < 30:
            notes.append(
                f"the pilot has {pilot_labels} labels: its correlation, and so the count, "
                "is rough; 30 or more give a steadier one"
            )
    else:
        r = judge_correlation
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r <= 1:
            raise JudgeError(
                f"judge_correlation= must lie in [0, 1] (how closely the judge's scores "
                f"follow people's labels), not {judge_correlation!r}"
            )
        base = run_scores(results, metric)
        scores, every = base.scores, base.scores[~np.isnan(base.scores)]
        if every.size < 2:
            raise InputFormatError(
                f"{every.size} row scored on {metric!r}: the plan needs the judge's spread "
                "over at least 2"
            )
        var_f = var_fl = variance(every, ddof=1)
        mean = float(every.mean())
        on_unit = bool(((every >= 0) & (every <= 1)).all())
        var_y = max(mean * (1 - mean), var_f) if on_unit else var_f
        zero_one = on_unit  # the labels are assumed 0/1, at the judge's mean
        correlation = float(r)
        cov = correlation * math.sqrt(var_y * var_f)
        source = "assumed"
        config.update(judge_correlation=correlation)
        notes.append(
            "no labels: the judge-label correlation is assumed; a pilot of 30 or more "
            "random labels (labels=) measures it"
        )
        if var_f == 0:
            worst = math.ceil(z**2 * 0.25 / half_width**2 - 1e-9)
            notes.append(
                f"the judge scores every row {float(every[0]):g}: its scores have no spread, "
                "so they neither correct the labels nor say how people's labels spread; "
                f"the count assumes labels all {float(every[0]):g} too. Labels that vary "
                f"need more: up to {worst} (z^2 / (4 W^2), labels at a mean of 0.5); a "
                "pilot (labels=) tells"
            )
    up = base.up
    scored = int(every.size)
    total = scored if rows is None else rows
    if isinstance(total, bool) or not isinstance(total, int) or total < 2:
        raise JudgeError(f"rows= must be a whole number of judged rows, 2 or more, not {rows!r}")
    if rows is not None and source == "labels" and pilot_labels is not None and rows < pilot_labels:
        raise JudgeError(f"rows= is {rows}, fewer than the pilot's {pilot_labels} labels")
    counts = np.arange(2, total + 1)
    widths, lams = ppi_half_widths(
        counts,
        total,
        var_judged=var_f,
        var_judged_labelled=var_fl,
        var_labels=var_y,
        cov=cov,
        confidence=confidence,
    )
    found = _search(widths, half_width)
    labels_only = max(2, math.ceil(z**2 * var_y / half_width**2 - 1e-9))
    # 0/1 labels (or assumed so) all alike get judge estimate's exact interval, not the
    # normal one, and a count the normal formula finds small is one at which they are
    # likely all alike: the count is at least the exact interval's floor.
    floor = exact_floor(half_width, confidence) if zero_one else 2
    if found is not None and counts[found] < floor:
        normal = int(counts[found])
        found = floor - 2 if floor <= total else None
        notes.append(
            f"{floor} labels at least: 0/1 labels all 1 (or all 0), which so few labels "
            "may well be, get judge estimate's exact (Clopper-Pearson) interval, "
            f"{2 * half_width:g} wide "
            f"(±{half_width:g}) only from {floor} labels; the normal count was {normal}"
            + ("" if found is not None else f", and these {total} rows are fewer")
        )
    if zero_one and labels_only < floor:
        labels_only = floor
    at = found if found is not None else int(np.argmin(widths))
    reached = float(widths[at])
    if floor > 2 and found is not None and counts[found] == floor:
        # at the floor, labels all alike are the case that binds: their exact interval's
        # half its width
        reached = max(reached, (1 - ((1 - confidence) / 2) ** (1 / floor)) / 2)
    if scored < scores.size:
        notes.append(f"{scores.size - scored} rows the judge left NaN are not counted")
    if any(r.conversation_id is not None for r in base.rows):
        notes.append(
            "the rows are turns of conversations: PPI treats them as independent rows (as "
            "judge estimate does), so the count may be low when a conversation's turns move "
            "together"
        )
    if found is not None and counts[found] > total / 2:
        notes.append(
            "more than half the rows need labels: the judge adds little at this width; "
            "judge more rows (rows=) or accept a wider interval"
        )
    return LabelPlan(
        metric=metric,
        orientation="score" if up else "1 - score (lower is better)",
        half_width=float(half_width),
        confidence=confidence,
        rows=total,
        needed=None if found is None else int(counts[found]),
        lam=float(lams[at]),
        reached=reached,
        reached_at=int(counts[at]),
        labels_only=labels_only,
        source=source,
        correlation=correlation,
        pilot_labels=pilot_labels,
        pilot_half_width=pilot_half_width,
        notes=notes,
        config=config,
    )
