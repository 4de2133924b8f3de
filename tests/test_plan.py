"""`judge.plan_questions` and `judge.plan_labels` against simulation: for each case a model of
the data, a pilot drawn from it and written as runs (and a labels file), the plan made from
the pilot, and then many seeded data sets of the planned size drawn from the model. The
questions planned must give the power asked for under judge compare's randomisation test
(and be within 15% of the count at which the simulated power first reaches it); the labels
planned must give the PPI++ interval the half-width asked for, within 15%. Counts, not
time: vectorised numpy, a few seconds."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

import judge
from judge.errors import InputFormatError, JudgeError
from judge.stats import (
    lattice_step,
    paired_spread,
    permutation_p_value,
    ppi_half_widths,
    ppi_tuned,
    units_needed,
)
from tests.helpers.plan import write_run

SIMS = 4_000  # data sets per size: the power's standard error is about 0.006 at 0.8
POWER, ALPHA = 0.8, 0.05


# Models of a pilot's two runs: (rng, units, sims) -> A and B, shaped (sims, units) (or
# (units,) for sims None), whose true mean difference B - A is DIFFERENCE[case].


def graded(rng, n, sims=None, shift=0.04):
    """Scores on [0, 1] with question difficulty shared by A and B, uniform noise."""
    shape = (n,) if sims is None else (sims, n)
    q = rng.uniform(0.2, 0.6, shape)
    return q + rng.uniform(-0.15, 0.15, shape), q + shift + rng.uniform(-0.15, 0.15, shape)


def binary(rng, n, sims=None, p_a=0.6, p_b=0.7, keep=0.7):
    """0/1 scores: B's latent draw is A's with probability `keep` (pairs correlate)."""
    shape = (n,) if sims is None else (sims, n)
    u = rng.random(shape)
    v = np.where(rng.random(shape) < keep, u, rng.random(shape))
    return (u < p_a) * 1.0, (v < p_b) * 1.0


def sizes_of(rng, shape):
    """Turns per conversation: 2 to 6."""
    return rng.integers(2, 7, size=shape)


def conversation_differences(rng, sizes, shift=0.05):
    """Per turn (conversations x 6, masked beyond the size): the difference B - A, a
    conversation's shared effect plus a turn's own noise (ICC about 0.5)."""
    effect = rng.normal(0, 0.1, size=(*sizes.shape, 1))
    turns = shift + effect + rng.normal(0, 0.1, size=(*sizes.shape, 6))
    return turns, np.arange(6) < sizes[..., None]


def randomisation_power(totals: np.ndarray) -> float:
    """The share of data sets (rows) where judge compare's sign-flip randomisation test of
    the mean of the units' values (`permutation_p_value`: a question's difference, or a
    conversation's total) rejects, by its normal approximation: the sum of the signs flipped
    has variance sum(value^2), so |sum| > z * sqrt(sum(value^2)) rejects."""
    z = stats.norm.ppf(1 - ALPHA / 2)
    return float((np.abs(totals.sum(axis=1)) > z * np.sqrt((totals**2).sum(axis=1))).mean())


def sign_test_power(d: np.ndarray) -> float:
    """The share of data sets of differences in {-1, 0, 1} where the randomisation test
    rejects, exactly: flipping signs of such differences is the two-sided sign test."""
    up, down = (d > 0).sum(axis=1), (d < 0).sum(axis=1)
    p = np.minimum(1.0, 2 * stats.binom.cdf(np.minimum(up, down), up + down, 0.5))
    return float((p < ALPHA).mean())


def test_the_sign_test_is_judge_compares_randomisation_test_of_0_1_differences():
    rng = np.random.default_rng(12)
    for _ in range(4):
        d = rng.choice([-1.0, 0.0, 0.0, 1.0, 1.0], size=16)
        up, down = int((d > 0).sum()), int((d < 0).sum())
        exact = min(1.0, 2 * stats.binom.cdf(min(up, down), up + down, 0.5))
        assert permutation_p_value(d) == pytest.approx(exact, abs=1e-12)


def conversation_power(c: int, seed: int) -> float:
    """The share of data sets of c conversations where judge compare's randomisation test
    (a whole conversation's sign flipped: the test of its turns' differences summed)
    rejects."""
    rng = np.random.default_rng(seed)
    sizes = sizes_of(rng, (SIMS, c))
    turns, mask = conversation_differences(rng, sizes)
    return randomisation_power((turns * mask).sum(axis=2))


def simulated_count(power_at: Callable[[int], float], planned: int) -> int:
    """The least size, from half the planned one up, whose simulated power reaches POWER
    (the same seed at every size: common random numbers keep the curve smooth)."""
    for n in range(max(3, planned // 2), 3 * planned):
        if power_at(n) >= POWER:
            return n
    raise AssertionError("the simulated power never reached the target")


def paired_power(model, n: int, seed: int) -> float:
    a, b = model(np.random.default_rng(seed), n, SIMS)
    return sign_test_power(b - a) if model is binary else randomisation_power(b - a)


@pytest.mark.parametrize(
    ("model", "difference"),
    [(graded, 0.04), (binary, 0.1)],
    ids=["graded scores", "0/1 scores"],
)
def test_the_questions_planned_from_two_runs_give_the_power_asked(tmp_path, model, difference):
    a, b = model(np.random.default_rng(1), 300)
    plan = judge.plan_questions(
        write_run(tmp_path / "a.jsonl", a),
        write_run(tmp_path / "b.jsonl", b),
        metric="faithfulness",
        difference=difference,
    )
    assert plan.unit == "question" and plan.paired and plan.spread.units == 300
    assert plan.spread.sd == pytest.approx(float((b - a).std(ddof=1)))
    power = paired_power(model, plan.needed, seed=5)
    assert power == pytest.approx(POWER, abs=0.03)
    simulated = simulated_count(lambda n: paired_power(model, n, seed=5), plan.needed)
    assert plan.needed == pytest.approx(simulated, rel=0.15)


def test_the_conversations_planned_give_the_power_asked_and_the_design_effect_says_why(tmp_path):
    rng = np.random.default_rng(2)
    sizes = sizes_of(rng, 300)
    turns, mask = conversation_differences(rng, sizes)
    diff = turns[mask]
    owner = np.repeat(np.arange(300), sizes)
    a = rng.uniform(0.3, 0.7, diff.size)
    plan = judge.plan_questions(
        write_run(tmp_path / "a.jsonl", a, owner),
        write_run(tmp_path / "b.jsonl", a + diff, owner),
        metric="faithfulness",
        difference=0.05,
    )
    assert plan.unit == "conversation" and plan.spread.units == 300
    assert plan.spread.rows == diff.size and plan.turns == math.ceil(plan.needed * diff.size / 300)
    # ICC 0.5 by construction, about 4 turns a conversation: a design effect near 2.5
    assert 1.8 < plan.spread.design_effect < 3.2 and 0.3 < plan.spread.icc < 0.7
    power = conversation_power(plan.needed, seed=6)
    assert power == pytest.approx(POWER, abs=0.03)
    simulated = simulated_count(lambda c: conversation_power(c, seed=6), plan.needed)
    assert plan.needed == pytest.approx(simulated, rel=0.15)
    # treating the turns as independent rows would plan far too few: the simulated power
    # of that many turns, spread over conversations, falls well short
    as_rows = units_needed(float(diff.std(ddof=1)), 0.05)
    assert as_rows < 0.6 * plan.turns
    assert conversation_power(max(3, round(as_rows / 4)), seed=6) < 0.6
    assert "design effect" in plan.text() and "conversations" in plan.text()


def test_one_run_plans_from_its_spread_and_the_assumed_correlation(tmp_path):
    # graded(): corr(A, B) = var(q) / (var(q) + var(noise)) = 0.01333 / 0.02083 = 0.64
    a, _ = graded(np.random.default_rng(3), 300)
    run = write_run(tmp_path / "a.jsonl", a)
    plan = judge.plan_questions(run, metric="faithfulness", difference=0.04, pair_correlation=0.64)
    assert not plan.paired and plan.observed is None
    power = paired_power(graded, plan.needed, seed=7)
    assert power == pytest.approx(POWER, abs=0.04)
    simulated = simulated_count(lambda n: paired_power(graded, n, seed=7), plan.needed)
    assert plan.needed == pytest.approx(simulated, rel=0.15)
    # no correlation given: no benefit of pairing assumed, so more questions, and a note
    unpaired = judge.plan_questions(run, metric="faithfulness", difference=0.04)
    assert unpaired.needed > 2 * plan.needed
    assert unpaired.pair_correlation == 0.0
    assert any("pair_correlation=" in note for note in unpaired.notes)


# Labels: a model of judged rows and people's labels; a run of 4,000 rows drawn from it, a
# random pilot of 200 labelled, the plan; then many data sets of 4,000 rows drawn afresh,
# the planned number labelled. PPI's interval is for the model's mean (a new row's expected
# label), so each data set is new rows, not the same rows relabelled.


def informative(rng, n):
    """0/1 labels (60% good) and a lenient judge that follows them."""
    labels = (rng.random(n) < 0.6) * 1.0
    return labels, np.clip(0.3 + 0.5 * labels + rng.normal(0, 0.2, n), 0, 1)


def graded_labels(rng, n):
    """1-5 grades and a noisy judge on [0, 1] (lambda clipped near 1)."""
    grades = rng.integers(1, 6, n) * 1.0
    return grades, np.clip((grades - 1) / 4 + rng.normal(0, 0.3, n), 0, 1)


def matching(rng, n):
    """0/1 labels (half good) and a judge whose mean is theirs, correlated about 0.6: what
    the no-labels plan assumes."""
    labels = (rng.random(n) < 0.5) * 1.0
    return labels, 0.5 + 0.15 * (2 * labels - 1) + rng.uniform(-0.35, 0.35, n)


def simulated_half_widths(population, rows: int, n: int, seed: int) -> tuple[float, float]:
    """Over 1,000 data sets of `rows` rows drawn afresh from the population's model, n of
    them labelled (the rest judged only): the median half-width PPI++ reports, and 1.96
    times the spread of its estimates about the model's mean."""
    labels, scores = population(np.random.default_rng(seed), (1_000, rows))
    theta, se, _ = ppi_tuned(labels[:, :n], scores[:, :n], scores[:, n:])
    z = stats.norm.ppf(0.975)
    return float(np.median(z * se)), float(z * theta.std())


@pytest.mark.parametrize(
    ("population", "half_width"),
    [(informative, 0.03), (graded_labels, 0.1)],
    ids=["0/1 labels, lenient judge", "graded labels"],
)
def test_the_labels_planned_from_a_pilot_give_the_half_width_asked(
    tmp_path, population, half_width
):
    labels, scores = population(np.random.default_rng(4), 4_000)
    run = write_run(tmp_path / "run.jsonl", scores)
    pilot = np.random.default_rng(8).choice(4_000, size=200, replace=False)
    sample = {"method": "random", "seed": 8, "of": 4_000}
    records = [{"id": f"q{i}", "ok": labels[i], "sample": sample} for i in pilot.tolist()]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    plan = judge.plan_labels(
        run,
        metric="faithfulness",
        half_width=half_width,
        labels=tmp_path / "labels.jsonl",
        label="ok",
    )
    assert plan.source == "labels" and plan.pilot_labels == 200 and plan.rows == 4_000
    assert plan.needed is not None and plan.needed < plan.labels_only
    assert plan.reached <= half_width
    reported, actual = simulated_half_widths(population, 4_000, plan.needed, seed=9)
    assert reported == pytest.approx(half_width, rel=0.15)
    assert actual == pytest.approx(half_width, rel=0.15)
    # the pilot's own half-width is what judge estimate reports on it
    direct = judge.labels.estimate.estimate(
        run, labels=tmp_path / "labels.jsonl", label="ok", metric="faithfulness"
    )
    assert plan.pilot_half_width == pytest.approx((direct.ppi.high - direct.ppi.low) / 2)


def test_the_labels_planned_from_an_assumed_correlation_give_the_half_width_asked(tmp_path):
    labels, scores = matching(np.random.default_rng(5), 4_000)
    assert np.corrcoef(labels, scores)[0, 1] == pytest.approx(0.6, abs=0.02)
    run = write_run(tmp_path / "run.jsonl", scores)
    plan = judge.plan_labels(run, metric="faithfulness", half_width=0.04, judge_correlation=0.6)
    assert plan.source == "assumed" and plan.pilot_labels is None
    reported, actual = simulated_half_widths(matching, 4_000, plan.needed, seed=10)
    assert reported == pytest.approx(0.04, rel=0.15)
    assert actual == pytest.approx(0.04, rel=0.15)
    # a better judge needs fewer labels; labels alone need z^2 p (1 - p) / W^2
    assert (
        judge.plan_labels(run, metric="faithfulness", half_width=0.04, judge_correlation=0.9).needed
        < plan.needed
    )
    # labels alone: z^2 var / W^2, the variance that of 0/1 labels at the judge's mean
    m = scores.mean()
    assert plan.labels_only == math.ceil(stats.norm.ppf(0.975) ** 2 * m * (1 - m) / 0.04**2)


def test_units_needed_is_the_normal_formula_with_guenthers_correction():
    # sd 0.2, D 0.05, 80% power at 5%: (1.95996 + 0.84162)^2 * 16 = 125.58, + 1.92 -> 128
    assert units_needed(0.2, 0.05) == 128
    assert units_needed(0.2, -0.05) == 128
    z_a, z_b = stats.norm.ppf(0.975), stats.norm.ppf(0.9)
    assert units_needed(0.2, 0.05, power=0.9) == math.ceil(((z_a + z_b) * 4) ** 2 + z_a**2 / 2)
    # agrees with the paired t-test's exact (noncentral t) power to a question or two
    n = units_needed(0.2, 0.05)
    delta = 0.05 / 0.2 * math.sqrt(n)
    crit = stats.t.ppf(0.975, n - 1)
    exact = stats.nct.sf(crit, n - 1, delta) + stats.nct.cdf(-crit, n - 1, delta)
    assert exact == pytest.approx(0.8, abs=0.01)
    # a lattice step h: the least n with D n >= (z_a + z_b) sd sqrt(n) + h, + z_a^2 / 2
    spread = (z_a + stats.norm.ppf(0.8)) * 0.45
    x = (spread + math.sqrt(spread**2 + 4 * 0.1 * 1.0)) / (2 * 0.1)
    assert units_needed(0.45, 0.1, step=1.0) == math.ceil(x * x + z_a**2 / 2)
    assert units_needed(0.45, 0.1, step=1.0) > units_needed(0.45, 0.1) + 15


def test_lattice_steps():
    assert lattice_step(np.array([0.0, 1.0, -1.0])) == 1.0
    assert lattice_step(np.array([0.25, -0.5, 0.75])) == 0.25
    assert lattice_step(np.array([1 / 3, 2 / 3, -1 / 6])) == pytest.approx(1 / 6)
    assert lattice_step(np.random.default_rng(0).normal(size=50)) == 0.0
    assert lattice_step(np.zeros(3)) == 0.0


def test_the_design_effect_of_equal_conversations_is_kishs():
    # 50 conversations of 4 turns: a conversation's mean difference varies by its own
    # effect; paired_spread's design effect is m var(conversation means) / var(turns)
    rng = np.random.default_rng(11)
    turns = rng.normal(0, 0.1, (50, 1)) + rng.normal(0, 0.1, (50, 4))
    owners = np.repeat(np.arange(50), 4)
    spread = paired_spread(turns.ravel(), owners)
    means = turns.mean(axis=1)
    assert spread.sd == pytest.approx(float(means.std(ddof=1)))
    deff = 4 * means.var(ddof=1) / turns.ravel().var(ddof=1)
    assert spread.design_effect == pytest.approx(deff)
    assert spread.icc == pytest.approx((deff - 1) / 3)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"difference": 0}, InputFormatError, "difference= must be a nonzero number"),
        ({"difference": "0.05"}, InputFormatError, "difference= must be a nonzero number"),
        ({"difference": 0.05, "power": 1.2}, InputFormatError, "power= must lie strictly"),
        ({"difference": 0.05, "alpha": 0}, InputFormatError, "alpha= must lie strictly"),
        ({"difference": 0.05, "pair_correlation": 1}, JudgeError, "pair_correlation= must"),
        ({"difference": 0.05, "metric": "nope"}, InputFormatError, "no row scored on 'nope'"),
    ],
)
def test_bad_question_plans_are_errors_in_keyword_words(tmp_path, kwargs, error, message):
    run = write_run(tmp_path / "a.jsonl", np.linspace(0, 1, 40))
    with pytest.raises(error, match=message):
        judge.plan_questions(run, **{"metric": "faithfulness", **kwargs})


def test_pair_correlation_with_two_runs_is_refused(tmp_path):
    run = write_run(tmp_path / "a.jsonl", np.linspace(0, 1, 40))
    with pytest.raises(JudgeError, match="pair_correlation= is for a plan from one run"):
        judge.plan_questions(run, run, metric="faithfulness", difference=0.05, pair_correlation=0.5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give labels= .* or judge_correlation="),
        ({"judge_correlation": 0.5, "labels": "x.jsonl", "label": "ok"}, "not both"),
        ({"labels": "x.jsonl"}, "labels= needs label="),
        ({"judge_correlation": 0.5, "annotator": "ana"}, r"annotator= is for labels= \("),
        ({"judge_correlation": 1.5}, r"judge_correlation= must lie in \[0, 1\]"),
        ({"judge_correlation": 0.5, "half_width": 0}, "half_width= must be a positive"),
        ({"judge_correlation": 0.5, "rows": 1}, "rows= must be a whole number"),
    ],
)
def test_bad_label_plans_are_errors_in_keyword_words(tmp_path, kwargs, message):
    run = write_run(tmp_path / "a.jsonl", np.linspace(0, 1, 40))
    with pytest.raises(JudgeError, match=message):
        judge.plan_labels(run, **{"metric": "faithfulness", "half_width": 0.05, **kwargs})


def test_a_width_out_of_reach_says_so(tmp_path):
    run = write_run(tmp_path / "a.jsonl", np.linspace(0, 1, 40))
    plan = judge.plan_labels(run, metric="faithfulness", half_width=0.01, judge_correlation=0.5)
    assert plan.needed is None
    # the narrowest of every count of labels, and no wider than every row labelled (the
    # labels' own interval, 1.96 * sqrt(0.25 / 40))
    assert plan.reached <= stats.norm.ppf(0.975) * math.sqrt(0.25 / 40) + 1e-12
    widths, _ = ppi_half_widths(
        np.arange(2, 41),
        40,
        var_judged=float(np.linspace(0, 1, 40).var(ddof=1)),
        var_judged_labelled=float(np.linspace(0, 1, 40).var(ddof=1)),
        var_labels=0.25,
        cov=0.5 * math.sqrt(0.25 * np.linspace(0, 1, 40).var(ddof=1)),
    )
    assert (plan.reached, plan.reached_at) == (pytest.approx(widths.min()), 2 + widths.argmin())
    assert "no count of labels" in plan.text()
    # a larger run to come reaches it
    assert (
        judge.plan_labels(
            run, metric="faithfulness", half_width=0.01, judge_correlation=0.5, rows=100_000
        ).needed
        is not None
    )
