"""`judge plan`'s question counts against the test `judge compare` actually runs: its exact
sign-flip test at few questions (whose smallest p on n questions is 2/2^n, so nothing below
6 questions can reach p < 0.05), and Holm's correction across the metrics it compares by
default. Seeded simulations of `permutation_p_value` (and `holm`) themselves, at counts small
enough for the exact test to be quick."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import judge
from judge.run.rows import ResultRow
from judge.stats import holm, normal_units, permutation_p_value, smallest_units, units_needed
from tests.helpers.cli import run

ALPHA, POWER = 0.05, 0.8


def write_metrics(path: Path, columns: dict[str, np.ndarray]) -> Path:
    """results.jsonl of rows q0, q1, ... scored on each metric of `columns`."""
    names = list(columns)
    lines = []
    for i in range(len(columns[names[0]])):
        scores = {m: float(columns[m][i]) for m in names}
        lines.append(ResultRow(row=i, id=f"q{i}", scores=scores, turn=2).json_line() + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def compare_power(n: int, sd: float, difference: float, metrics: int, reps: int, seed: int):
    """The share of `reps` seeded comparisons of n questions in which judge compare's test
    finds the first metric's difference (normal, mean `difference`, SD `sd`) significant
    after Holm's correction across `metrics` metrics (the others unchanged: mean 0). The
    other metrics are drawn only when they can matter (alpha / metrics <= p < alpha)."""
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(reps):
        p = permutation_p_value(rng.normal(difference, sd, n))
        if p < ALPHA / metrics:
            found += 1
        elif p < ALPHA:
            others = [permutation_p_value(rng.normal(0.0, sd, n)) for _ in range(metrics - 1)]
            found += holm([p, *others])[0] < ALPHA
    return found / reps


def pilot(tmp_path: Path, sd: float, metrics: int = 1, seed: int = 5) -> tuple[Path, Path]:
    """Runs A and B of 300 questions; B's faithfulness is lower by 0.1 with spread `sd`,
    its other metrics (m1, m2, ...) unchanged but for noise of the same spread."""
    rng = np.random.default_rng(seed)
    a = {"faithfulness": rng.uniform(0.3, 0.7, 300)}
    a.update({f"m{j}": rng.uniform(0.3, 0.7, 300) for j in range(1, metrics)})
    b = {m: v + rng.normal(0, sd, 300) for m, v in a.items()}
    b["faithfulness"] -= 0.1
    return write_metrics(tmp_path / "a.jsonl", a), write_metrics(tmp_path / "b.jsonl", b)


def test_the_smallest_count_is_where_the_exact_test_can_reject():
    # the smallest p of the sign-flip test on n equal-signed differences is 2/2^n
    assert permutation_p_value(np.full(5, 0.1)) == pytest.approx(2 / 32)
    assert permutation_p_value(np.full(6, 0.1)) == pytest.approx(2 / 64)
    assert smallest_units(0.05) == 6  # 2/32 = 0.0625 >= 0.05 > 2/64
    assert smallest_units(0.05 / 4) == 8  # 2/128 = 0.0156 >= 0.0125 > 2/256
    assert smallest_units(0.0625) == 6  # p < alpha rejects: 2/32 is not below 0.0625
    # never below the floor, however many tests: 2/2^16 < 0.05 / 1000 <= 2/2^15
    assert normal_units(0.01, 0.1, alpha=0.05 / 1000) == 9
    assert smallest_units(0.05 / 1000) == 16 == units_needed(0.01, 0.1, alpha=0.05 / 1000)
    with pytest.raises(judge.InputFormatError, match="below the smallest p"):
        smallest_units(1e-7)


def test_judge_plan_never_plans_fewer_questions_than_the_test_can_reject_on(tmp_path):
    """The audit's case: a pilot SD of 0.010 against a difference of 0.1; the normal formula
    said 2 questions (3 on the audit's rounded pilot), where judge compare's p is at least 0.5."""
    a, b = pilot(tmp_path, sd=0.01)
    done = run("plan", a, b, "--metric", "faithfulness", "--difference", "0.1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("faithfulness: 6 questions to detect a difference of 0.1")
    assert (
        "judge compare's test cannot reject on fewer than 6 questions at alpha 0.05: its "
        "smallest p on n questions is 2/2^n (0.0625 on 5); the count is that floor, not the "
        "normal formula's 2" in done.stdout
    )
    data = json.loads(
        run(
            "plan", a, b, "--metric", "faithfulness", "--difference", "0.1", "--format", "json"
        ).stdout
    )["questions"]
    assert (data["needed"], data["formula"], data["floor"]) == (6, 2, 6)
    assert compare_power(6, 0.01, 0.1, 1, reps=200, seed=1) == 1.0
    assert compare_power(5, 0.01, 0.1, 1, reps=200, seed=1) == 0.0


@pytest.mark.parametrize("sd", [0.01, 0.04, 0.06, 0.07, 0.08, 0.1])
def test_the_questions_planned_give_the_power_asked_under_judge_compares_test(tmp_path, sd):
    """For a difference of 0.1 and SDs whose normal formula gives 2 to 10 questions, the
    power of permutation_p_value at the planned count (400 seeded data sets: standard error
    0.02 at 0.8) is about 0.8 or more, and one question fewer would not give it (or could
    not reject at all)."""
    a, b = pilot(tmp_path, sd=sd)
    plan = judge.plan_questions(a, b, metric="faithfulness", difference=0.1)
    power = compare_power(plan.needed, plan.spread.sd, 0.1, 1, reps=400, seed=2)
    assert power >= POWER - 0.04, (plan.needed, power)
    assert plan.tests == 1 and plan.floor == 6
    if plan.needed > plan.floor:
        fewer = compare_power(plan.needed - 1, plan.spread.sd, 0.1, 1, reps=400, seed=2)
        assert fewer < POWER + 0.04, (plan.needed, fewer)


def test_a_plan_for_several_metrics_is_made_at_holms_first_level(tmp_path):
    """judge compare A B tests every metric the runs share, with Holm's correction: a
    plan at alpha per test (the old plan: 4 questions, power 0 with 4 metrics, none below
    alpha / 4 = 0.0125 possible before 8) overstates its power. The plan is made at alpha /
    4, and the simulated power under Holm across the 4 metrics is at least 0.8."""
    a, b = pilot(tmp_path, sd=0.05, metrics=4)
    plan = judge.plan_questions(a, b, metric="faithfulness", difference=0.1)
    power = compare_power(plan.needed, plan.spread.sd, 0.1, 4, reps=400, seed=3)
    assert power >= POWER - 0.04, (plan.needed, power)
    assert (plan.tests, plan.tests_source, plan.level) == (4, "pilot", 0.0125)
    assert plan.needed >= 8 == plan.floor
    assert any("planned at alpha / 4 = 0.0125" in note for note in plan.notes)
    # the plan for one metric alone, at alpha 0.05, has far less power under Holm's 4
    alone = judge.plan_questions(a, b, metric="faithfulness", difference=0.1, tests=1)
    assert alone.needed < plan.needed and alone.level == 0.05
    assert compare_power(alone.needed, alone.spread.sd, 0.1, 4, reps=400, seed=3) < 0.5
    # the note names the count for one metric alone
    assert any(f"plan with tests= 1: {alone.needed} questions" in note for note in plan.notes)


def test_judge_plan_takes_the_tests_to_correct_for(tmp_path):
    a, b = pilot(tmp_path, sd=0.1)
    args = ["--metric", "faithfulness", "--difference", "0.1"]
    one = run("plan", a, b, *args)
    assert "faithfulness: 10 questions" in one.stdout
    assert (
        "note: planned for one test at alpha 0.05: judge compare of more than two runs, or of "
        "more metrics, corrects across them all with Holm's method; give --tests" in one.stdout
    )
    four = run("plan", a, b, *args, "--tests", "4")
    assert four.returncode == 0, four.stderr
    sd = judge.plan_questions(a, b, metric="faithfulness", difference=0.1).spread.sd
    n = units_needed(sd, 0.1, alpha=0.0125)
    assert n == normal_units(sd, 0.1, alpha=0.0125) == 15
    assert four.stdout.startswith(
        f"faithfulness: {n} questions to detect a difference of 0.1 with power 0.8 "
        "(two-sided, alpha 0.05 / 4 tests = 0.0125 each, Holm)"
    )
    data = json.loads(run("plan", a, b, *args, "--tests", "4", "--format", "json").stdout)
    assert data["questions"]["tests"] == 4 and data["questions"]["alpha_per_test"] == 0.0125
    bad = run("plan", a, b, *args, "--tests", "0")
    assert bad.returncode == 2 and "--tests" in bad.stderr
    labels_only = run("plan", a, "--metric", "faithfulness", "--tests", "2", "--half-width", "0.1")
    assert labels_only.returncode == 2
    assert "--tests plans questions: give --difference D too" in labels_only.stderr
    with pytest.raises(judge.JudgeError, match="tests= must be a whole number"):
        judge.plan_questions(a, b, metric="faithfulness", difference=0.1, tests=0)
    assert math.isclose(
        judge.plan_questions(a, b, metric="faithfulness", difference=0.1, tests=4).level, 0.0125
    )


def test_a_pilot_with_no_spread_plans_the_floor(tmp_path):
    """Every pilot difference the same (-0.1): the formula's count was 2, at which judge
    compare's p is 0.5 at best."""
    a = write_metrics(tmp_path / "a.jsonl", {"faithfulness": np.linspace(0.3, 0.8, 40)})
    b = write_metrics(tmp_path / "b.jsonl", {"faithfulness": np.linspace(0.3, 0.8, 40) - 0.125})
    plan = judge.plan_questions(a, b, metric="faithfulness", difference=0.1)
    assert plan.spread.sd == 0 and plan.needed == 6
    assert any("no spread, so the fewest the test can reject on" in n for n in plan.notes)
    assert permutation_p_value(np.full(plan.needed, -0.1)) < ALPHA
