"""How many questions a comparison needs: from a pilot (two runs of the same questions, or
one run and an assumed correlation), the questions (or conversations) a paired test needs to
detect a difference of D in a metric with a given power (`plan_questions`, `judge plan`).

The test planned for is the paired one `judge compare` runs (its randomisation test of
the mean difference, which rejects about as often as the paired t-test, and for 0/1 scores
is the sign test); the formula is the normal-approximation sample size with Guenther's t
correction, continuity-corrected for differences on a lattice (`judge.stats.units_needed`)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from judge.errors import InputFormatError, JudgeError
from judge.formatting import number
from judge.json_values import nan_to_null
from judge.stats import (
    PairedSpread,
    checked_probability,
    normal_units,
    paired_spread,
    smallest_units,
    units_needed,
)

from .evaluations import keyed_scores, load_results, match_key, paired_conversations

# Below this many pilot units the standard deviation behind the plan is itself rough.
FEW_PILOT_UNITS = 30


@dataclass
class QuestionPlan:
    """The questions (or conversations) a paired comparison needs: `judge plan`.

    Args:
        metric: the metric compared.
        difference: the true mean difference B - A to detect (its size; either sign).
        power: the probability of detecting it.
        alpha: the two-sided test's level, for the family of `tests` tests.
        tests: the tests `judge compare` corrects with Holm's method (the metrics compared,
            times the runs against the baseline); the plan is made at alpha / tests.
        tests_source: "given" (`tests=`), or "pilot" (the metrics the pilot's runs share,
            which `judge compare` of two runs tests by default).
        formula: the normal formula's count at alpha / tests (`judge.stats.normal_units`).
        floor: the fewest units at which judge compare's test can reject at alpha / tests
            at all (`judge.stats.smallest_units`).
        unit: "question", or "conversation" when the rows are turns of conversations.
        needed: the questions (or conversations) needed.
        turns: for conversations, the turns that many conversations hold at the pilot's
            mean turns per conversation; None for questions.
        spread: the pilot's spread of differences (`judge.stats.PairedSpread`).
        paired: True for two runs (the observed differences); False for one run (the
            differences' spread assumed from its scores and `pair_correlation`).
        pair_correlation: for one run, the assumed correlation of A's and B's scores of a
            question; None for two runs.
        observed: the pilot's own mean difference B - A (two runs), else None.
        notes: what the reader should know.
        config: the inputs.
    """

    metric: str
    difference: float
    power: float
    alpha: float
    unit: str
    needed: int
    turns: int | None
    spread: PairedSpread
    paired: bool
    pair_correlation: float | None
    observed: float | None
    tests: int = 1
    tests_source: str = "given"
    formula: int = 0
    floor: int = 0
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the `--format json` output), NaN as null."""
        s = self.spread
        data = {
            "metric": self.metric,
            "difference": self.difference,
            "power": self.power,
            "alpha": self.alpha,
            "tests": self.tests,
            "tests_from": self.tests_source,
            "alpha_per_test": self.level,
            "unit": self.unit,
            "needed": self.needed,
            "formula": self.formula,
            "floor": self.floor,
            "turns": self.turns,
            "sd": s.sd,
            "pilot": {
                "units": s.units,
                "rows": s.rows,
                "mean_difference": self.observed,
                "mean_turns": s.mean_size if self.unit == "conversation" else None,
                "design_effect": s.design_effect if self.unit == "conversation" else None,
                "icc": s.icc,
                "step": s.step,
            },
            "paired": self.paired,
            "pair_correlation": self.pair_correlation,
            "notes": self.notes,
            "config": self.config,
        }
        return nan_to_null(data)  # type: ignore[no-any-return]

    @property
    def level(self) -> float:
        """The level the plan is made at: alpha / tests (Holm's first step)."""
        return self.alpha / self.tests

    def text(self) -> str:
        """The plan in a few lines for the terminal."""
        s = self.spread
        units = "questions" if self.unit == "question" else "conversations"
        level = (
            f"alpha {self.alpha:g}"
            if self.tests == 1
            else f"alpha {self.alpha:g} / {self.tests} tests = {self.level:.3g} each, Holm"
        )
        head = (
            f"{self.metric}: {self.needed} {units} to detect a difference of "
            f"{self.difference:g} with power {self.power:g} (two-sided, {level})"
        )
        if self.turns is not None:
            head += f", about {self.turns} turns"
        lines = [head]
        if self.paired:
            lines.append(
                f"pilot: {s.units} paired {units}, mean difference B - A "
                f"{number(self.observed, sign='+')}, SD of a {self.unit}'s difference "
                f"{number(s.sd)}"
            )
        else:
            lines.append(
                f"pilot: one run of {s.units} {units}; SD of a {self.unit}'s difference "
                f"{number(s.sd)} assumed: sqrt(2 (1 - r)) times the scores' SD, r = "
                f"{self.pair_correlation:g} (the correlation of A's and B's scores)"
            )
        if self.unit == "conversation":
            lines.append(
                f"by conversation: {s.rows} turns in {s.units} conversations "
                f"({s.mean_size:.2g} turns each on average), design effect "
                f"{number(s.design_effect)}"
                + (
                    f" (intra-conversation correlation {number(s.icc)})"
                    if s.icc is not None
                    else ""
                )
            )
        if s.step:
            lines.append(
                f"the {'differences' if self.paired else 'scores, so the differences,'} lie on "
                f"steps of {s.step:.3g}"
                + (
                    " (per conversation, over its mean turns)"
                    if self.unit == "conversation"
                    else ""
                )
                + ": the count has a continuity correction for the test's discreteness"
            )
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def _numbered(labels: Sequence[Hashable]) -> np.ndarray:
    """Each label's number among the distinct labels, in order of first occurrence."""
    numbers: dict[Hashable, int] = {}
    return np.array([numbers.setdefault(x, len(numbers)) for x in labels], dtype=np.int64)


def _paired_differences(
    a: Any, b: Any, metric: str
) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """B - A of `metric` per question both judged (NaN on either side left out), paired as
    `judge compare` pairs them, each pair's conversation (None unless turns), and the
    metrics `judge compare` of the two would test by default (those of A's first judged
    row that B's first has, as `compare_scores` takes them)."""
    rows_a, label_a = load_results(a)
    rows_b, label_b = load_results(b)
    key = match_key(rows_a, rows_b, label_a, label_b)
    scores_a, scores_b = keyed_scores(rows_a, key), keyed_scores(rows_b, key)
    for scores, label in ((scores_a, label_a), (scores_b, label_b)):
        if not any(metric in s for s in scores.values()):
            known = sorted({m for s in scores.values() for m in s})
            raise InputFormatError(
                f"{label}: no metric {metric!r} in the run (metrics: "
                f"{', '.join(known) or 'none'}); name one of them with metric="
            )
    keys = [
        k
        for k in scores_a
        if k in scores_b
        and not math.isnan(scores_a[k].get(metric, math.nan))
        and not math.isnan(scores_b[k].get(metric, math.nan))
    ]
    if not keys:
        raise InputFormatError(
            f"{label_a} and {label_b} share no question both scored on {metric}: nothing to "
            "pair (are they runs of the same questions?)"
        )
    diff = np.array([scores_b[k][metric] - scores_a[k][metric] for k in keys], dtype=np.float64)
    conversations = paired_conversations(rows_a, rows_b, key)
    clusters = None if conversations is None else _numbered([conversations[k] for k in keys])
    first_a, first_b = next(iter(scores_a.values())), next(iter(scores_b.values()))
    shared = [m for m in first_a if m in first_b]
    return diff, clusters, shared if metric in shared else [*shared, metric]


def _single_run(a: Any, metric: str) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """One run's scores of `metric` (NaN left out), each row's conversation (None unless
    turns; a row that is no turn is a conversation of its own), and the run's metrics (its
    first judged row's)."""
    rows, label = load_results(a)
    kept = [r for r in rows if not r.error and not math.isnan(r.scores.get(metric, math.nan))]
    if not kept:
        known = sorted({m for r in rows for m in r.scores})
        raise InputFormatError(
            f"{label}: no row scored on {metric!r} (metrics: {', '.join(known) or 'none'}); "
            "name one of them with metric="
        )
    scores = np.array([r.scores[metric] for r in kept], dtype=np.float64)
    first = next(r for r in rows if not r.error)
    metrics = list(first.scores) if metric in first.scores else [*first.scores, metric]
    if not any(r.conversation_id is not None for r in kept):
        return scores, None, metrics
    owners = [
        ("c", r.conversation_id) if r.conversation_id is not None else ("row", i)
        for i, r in enumerate(kept)
    ]
    return scores, _numbered(owners), metrics


def plan_questions(
    a: Any,
    b: Any = None,
    *,
    metric: str,
    difference: float,
    power: float = 0.8,
    alpha: float = 0.05,
    pair_correlation: float | None = None,
    tests: int | None = None,
) -> QuestionPlan:
    """The questions a paired comparison of two systems needs to detect a true difference
    of `difference` in `metric` with probability `power` at level `alpha`, from a pilot.

    Two runs (a pilot of A and B on the same questions, paired as `judge compare` pairs
    them): the standard deviation of the observed per-question differences. One run (a
    baseline alone): the differences' variance is assumed to be 2 (1 - r) var(scores), as
    for two systems of equal spread whose scores of a question correlate by r =
    `pair_correlation` (default 0: no benefit of pairing assumed, which over-counts when,
    as usual, the same questions are hard for both). The count is the paired test's
    normal-approximation sample size with Guenther's t correction, continuity-corrected when
    the differences lie on a lattice, as 0/1 scores' do (`judge.stats.units_needed`).

    When the rows are turns of conversations (they carry `conversation_id`), the unit is the
    conversation, as `judge compare` resamples conversations: the count is of conversations,
    from the between-conversation variance of the conversations' (turn-weighted) mean
    differences, and the plan reports the design effect 1 + (m - 1) ICC it implies
    (Kish 1965) over treating the turns as independent (`judge.stats.paired_spread`).

    Args:
        a: the pilot's run A (or the one baseline run): an EvaluationResult, a
            results.jsonl, or an output folder.
        b: the pilot's run B of the same questions; None to plan from `a` alone.
        metric: the metric to compare.
        difference: the true mean difference B - A worth detecting (either sign), on the
            metric's scale, e.g. 0.05.
        power: the probability of detecting it, strictly between 0 and 1.
        alpha: the two-sided test's level, strictly between 0 and 1.
        pair_correlation: with one run only, the assumed correlation of A's and B's scores
            of a question, in [-1, 1) (default 0).
        tests: how many tests `judge compare` will correct with Holm's method: the
            metrics compared, times the runs compared with the baseline. The plan is made
            at alpha / tests, the level the first test to be rejected must reach (a bound:
            the power is then at least `power`). Default: the metrics the pilot's runs
            share (one run: its metrics), which `judge compare A B` tests by default.

    Returns:
        A `QuestionPlan`: `needed`, `text()` for the terminal, `to_dict()` for JSON.

    Raises:
        judge.InputFormatError: a run without the metric, runs with no question in common,
            fewer than 2 pilot units, a power, alpha or difference out of range.
        judge.JudgeError: `pair_correlation` given with two runs, or out of range; `tests`
            not a whole number of 1 or more.
    """
    notes: list[str] = []
    if tests is not None and (isinstance(tests, bool) or not isinstance(tests, int) or tests < 1):
        raise JudgeError(
            f"tests= must be a whole number of 1 or more (the metrics judge compare will "
            f"test, times the runs against the baseline), not {tests!r}"
        )
    if b is not None:
        if pair_correlation is not None:
            raise JudgeError(
                "pair_correlation= is for a plan from one run: with two runs the "
                "differences are observed; leave it out, or give one run"
            )
        diff, clusters, shared = _paired_differences(a, b, metric)
        spread = paired_spread(diff, clusters)
        observed: float | None = float(diff.mean())
    else:
        r = 0.0 if pair_correlation is None else pair_correlation
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not -1 <= r < 1:
            raise JudgeError(
                f"pair_correlation= must lie in [-1, 1) (0 assumes no benefit of pairing), "
                f"not {pair_correlation!r}"
            )
        scores, clusters, shared = _single_run(a, metric)
        one = paired_spread(scores, clusters)
        spread = PairedSpread(
            sd=one.sd * math.sqrt(2 * (1 - r)),
            units=one.units,
            rows=one.rows,
            mean_size=one.mean_size,
            design_effect=one.design_effect,
            icc=one.icc,
            step=one.step,  # differences of scores on a lattice lie on it too
        )
        observed = None
        notes.append(
            "one run: the SD of the differences is assumed, not measured; a pilot of B on "
            "a few dozen of the same questions (judge plan A B) measures it"
            + (
                ""
                if pair_correlation is not None
                else " (pair_correlation= 0, no benefit of pairing assumed: the count is "
                "larger than a pilot of two runs usually gives)"
            )
        )
        if clusters is not None:
            notes.append(
                "by conversation from one run: the design effect of the differences is "
                "assumed that of the scores"
            )
    unit = "question" if clusters is None else "conversation"
    if spread.units < 2:
        raise InputFormatError(
            f"the pilot has {spread.units} {unit}: a spread needs at least 2 "
            f"({FEW_PILOT_UNITS} or more for a steady one)"
        )
    checked_probability(alpha, "alpha", "0.05")  # before it is divided by the tests
    k = len(shared) if tests is None else tests
    level = alpha / k
    needed = units_needed(spread.sd, difference, power=power, alpha=level, step=spread.step)
    formula = normal_units(spread.sd, difference, power=power, alpha=level, step=spread.step)
    floor = smallest_units(level)
    units_word = f"{unit}s"
    if needed == floor and formula < floor:
        notes.append(
            f"judge compare's test cannot reject on fewer than {floor} {units_word} at "
            f"{'alpha' if k == 1 else 'alpha / tests'} {level:.3g}: its smallest p on n "
            f"{units_word} is 2/2^n ({2 / 2 ** (floor - 1):.3g} on {floor - 1}); the count "
            f"is that floor, not the normal formula's {formula}"
        )
    elif needed != formula:
        notes.append(
            f"at {needed} {units_word} or fewer judge compare's exact test is coarse: the "
            f"count is the least at which its power (simulated on normal differences) "
            f"reaches {power:g}; the normal formula says {formula}"
        )
    if tests is None and k > 1:
        alone = units_needed(spread.sd, difference, power=power, alpha=alpha, step=spread.step)
        notes.append(
            f"planned at alpha / {k} = {level:.3g}: judge compare tests the {k} metrics "
            f"{'these runs share' if b is not None else 'of this run'} "
            f"({', '.join(shared)}) with Holm's correction by default, and the first test "
            f"it rejects must reach alpha / {k} (a bound: the power is at least "
            f"{power:g}); comparing {metric} alone (judge compare --metric {metric}), "
            f"plan with tests= 1: {alone} {units_word}"
        )
    elif tests is None:
        notes.append(
            f"planned for one test at alpha {alpha:g}: judge compare of more than two runs, "
            "or of more metrics, corrects across them all with Holm's method; give tests= "
            "(the metrics times the runs against the baseline) to plan for that"
        )
    elif k > 1:
        notes.append(
            f"planned at alpha / {k} = {level:.3g}: under Holm's correction across {k} "
            f"tests the first rejected must reach alpha / {k} (a bound: the power is at "
            f"least {power:g})"
        )
    if spread.units < FEW_PILOT_UNITS:
        notes.append(
            f"the SD comes from {spread.units} pilot {unit}s: the count may be off by a "
            f"third or more; {FEW_PILOT_UNITS} or more give a steadier one"
        )
    if spread.sd == 0:
        notes.append(
            f"every pilot {unit}'s difference is the same: no spread, so the fewest the "
            "test can reject on are enough by this formula; a pilot with some variation "
            "gives a count to trust"
        )
    if unit == "conversation" and spread.units < spread.rows:
        notes.append(
            "rows are turns of conversations: the unit is the conversation, and the count "
            "uses the variance between conversations' mean differences (a design effect, "
            "Kish 1965), as judge compare resamples whole conversations"
        )
    turns = None
    if unit == "conversation":
        turns = math.ceil(needed * spread.mean_size - 1e-9)
    config = {
        "tests": tests,
        "a": _source(a),
        "b": None if b is None else _source(b),
        "test": "paired, two-sided: normal approximation with Guenther's t correction"
        + (", continuity-corrected for differences on a lattice" if spread.step else ""),
    }
    return QuestionPlan(
        metric=metric,
        difference=abs(float(difference)),
        power=power,
        alpha=alpha,
        unit=unit,
        needed=needed,
        tests=k,
        tests_source="pilot" if tests is None else "given",
        formula=formula,
        floor=floor,
        turns=turns,
        spread=spread,
        paired=b is not None,
        pair_correlation=None if b is not None else float(pair_correlation or 0.0),
        observed=observed,
        notes=notes,
        config=config,
    )


def _source(run: Any) -> str:
    """A run as the plan's config names it."""
    return "result" if hasattr(run, "rows") else str(run)
