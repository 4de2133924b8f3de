"""Attacks on `judge plan` (issue 42): degenerate pilots."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import judge
from judge.errors import InputFormatError
from judge.labels.estimate import estimate
from tests.helpers.cli import run as run_cli
from tests.helpers.plan import write_run


@pytest.mark.parametrize("value", [0, 1])
def test_a_pilot_of_labels_all_the_same_plans_no_count(tmp_path, value):
    """Labels all alike have no spread: the normal half-width is 0 at any count, so the
    plan said 2 labels were enough for any width (and judge estimate would give them an
    exact binomial interval, far wider)."""
    run = write_run(tmp_path / "run.jsonl", np.linspace(0, 1, 40))
    labels = tmp_path / "labels.jsonl"
    sample = {"method": "random", "seed": 1, "of": 40}
    labels.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "ok": value, "sample": sample}) + "\n"
            for i in range(0, 40, 4)
        ),
        encoding="utf-8",
    )
    with pytest.raises(InputFormatError, match=f"labels are all {value}"):
        judge.plan_labels(run, metric="faithfulness", half_width=0.05, labels=labels, label="ok")


def labels_of(path, ids, values, of):
    """A labels file of rows `ids` (q0, q1, ...) drawn at random from `of` rows."""
    sample = {"method": "random", "seed": 1, "of": of}
    path.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "ok": v, "sample": sample}) + "\n"
            for i, v in zip(ids, values, strict=True)
        ),
        encoding="utf-8",
    )
    return path


def estimate_width(run, tmp_path, values) -> float:
    """judge estimate's interval's width over labels `values` of the run's first rows."""
    labels = labels_of(tmp_path / "est.jsonl", range(len(values)), values, of=500)
    found = estimate(run, labels=labels, label="ok", metric="faithfulness")
    return found.ppi.high - found.ppi.low


@pytest.mark.parametrize("half_width", [0.05, 0.1, 0.02])
def test_a_judge_scoring_every_row_1_plans_the_labels_the_exact_interval_needs(
    tmp_path, half_width
):
    """The audit's case: the judge scores all 500 rows 1.0, so the assumed labels' variance
    m (1 - m) was 0 and the plan said 2 labels for any half-width; judge estimate gives 2
    labels both 1 the Clopper-Pearson interval [0.158, 1]. Labels as alike as the judge's
    scores get that exact interval, 2W wide only from ln(0.025) / ln(1 - 2W) labels: 36 at
    W 0.05. At the count planned judge estimate's interval is that narrow, one fewer not."""
    run = write_run(tmp_path / "run.jsonl", np.ones(500))
    plan = judge.plan_labels(
        run, metric="faithfulness", half_width=half_width, judge_correlation=0.5
    )
    exact = math.ceil(math.log(0.025) / math.log(1 - 2 * half_width))
    assert plan.needed == exact and plan.labels_only == exact
    # the half-width at the count is the exact interval's (half its width), not the normal 0
    assert (
        plan.reached == pytest.approx((1 - 0.025 ** (1 / exact)) / 2) and plan.reached <= half_width
    )
    assert estimate_width(run, tmp_path, [1] * plan.needed) <= 2 * half_width
    assert estimate_width(run, tmp_path, [1] * (plan.needed - 1)) > 2 * half_width
    assert any("Clopper-Pearson" in note for note in plan.notes)
    # the judge, with no spread, says nothing of how people's labels spread: the note says
    # what labels at a mean of 0.5 would need, z^2 / (4 W^2)
    worst = math.ceil(1.959963984540054**2 * 0.25 / half_width**2)
    assert any(f"up to {worst}" in note for note in plan.notes)


def test_judge_plan_of_the_audits_all_1_run(tmp_path):
    run = write_run(tmp_path / "allone.jsonl", np.ones(500))
    args = ["--metric", "faithfulness", "--half-width", "0.05", "--judge-correlation", "0.5"]
    done = run_cli("plan", run, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "faithfulness: 36 labels of 500 judged rows for a 95% PPI interval of half-width 0.05"
    )
    assert "the labels alone would need 36" in done.stdout


def test_a_judge_almost_always_1_is_floored_too(tmp_path):
    """One row of 500 scored 0: m (1 - m) = 0.002 gives 3 labels by the normal formula,
    which would most likely all be 1 and get the exact interval, 0.6 wide."""
    scores = np.ones(500)
    scores[7] = 0.0
    run = write_run(tmp_path / "run.jsonl", scores)
    plan = judge.plan_labels(run, metric="faithfulness", half_width=0.05, judge_correlation=0.9)
    assert plan.needed is not None and plan.needed >= 36
    assert estimate_width(run, tmp_path, [1] * plan.needed) <= 0.1


def test_a_pilot_of_0_1_labels_with_little_spread_is_floored(tmp_path):
    """A pilot of 60 labels, one of them 0: the normal count at W 0.05 is below 36, where
    the labels to come would most likely be all 1 and get the exact interval."""
    rng = np.random.default_rng(2)
    scores = rng.uniform(0.9, 1.0, 500)
    run = write_run(tmp_path / "run.jsonl", scores)
    ids = list(range(0, 500, 5))[:60]
    values = [0] + [1] * 59
    labels = labels_of(tmp_path / "labels.jsonl", ids, values, of=500)
    plan = judge.plan_labels(run, metric="faithfulness", half_width=0.05, labels=labels, label="ok")
    assert plan.needed == 36
    assert any("Clopper-Pearson" in note for note in plan.notes)
