"""A regression gate that could not have failed is refused, not passed: the paired
randomisation test on n units cannot give p below 2/2^n, so with 5 or fewer paired
questions (or conversations), or more under Holm across several metrics or runs, no
regression however large is significant. `judge compare --fail-on-regression` (two runs,
many runs, conversations) and `judge.assert_no_regression` refuse such a gate, saying how
many units there are, how many it needs and what to change."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import judge
from judge.pytest_plugin.assertions import ScoreAssertionError
from judge.stats import permutation_p_value, smallest_p_value, units_to_reach
from tests.helpers.cli import run


def write(
    path: Path,
    scores: list[float],
    conversations: list[str] | None = None,
    metrics: tuple[str, ...] = ("faithfulness", "answer_relevancy"),
) -> Path:
    lines = []
    for i, score in enumerate(scores):
        row = {
            "row": i,
            "id": f"s{i}",
            "question": f"question {i}",
            "scores": dict.fromkeys(metrics, score),
            "reasons": {},
            "errors": {},
            "error": None,
        }
        if conversations is not None:
            row.update(conversation_id=conversations[i], turn=2 * i + 2)
        lines.append(json.dumps(row) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def pair(tmp_path: Path, n: int, drop: float = 0.1, **kw) -> tuple[Path, Path]:
    base = [round(0.5 + 0.04 * (i % 7), 3) for i in range(n)]
    worse = [round(s - drop - 0.001 * i, 4) for i, s in enumerate(base)]
    return write(tmp_path / f"a{n}.jsonl", base, **kw), write(tmp_path / f"b{n}.jsonl", worse, **kw)


def test_five_pairs_all_worse_are_refused_not_passed(tmp_path: Path):
    # Each of 5 questions dropped ~0.1: p = 2/2^5 = 0.0625, the smallest the test can give;
    # the gate exited 0.
    a, b = pair(tmp_path, 5)
    done = run("compare", a, b, "--metric", "faithfulness", "--fail-on-regression")
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stderr
    assert "--fail-on-regression cannot fail: faithfulness has 5 paired questions" in said
    assert "2/2^5 = 0.0625, not below 0.05" in said
    assert "it needs at least 6 paired questions" in said and "(--metric)" in said
    assert "0.062" in done.stdout  # the table is printed before the refusal
    # without the gate, the comparison is only shown
    assert run("compare", a, b, "--metric", "faithfulness").returncode == 0
    # six can fail, and do
    a6, b6 = pair(tmp_path, 6)
    done = run("compare", a6, b6, "--metric", "faithfulness", "--fail-on-regression")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REGRESSION: faithfulness" in done.stderr


def test_holm_across_two_metrics_raises_the_floor(tmp_path: Path):
    # Two metrics: Holm multiplies the smallest p by 2, so 6 pairs (2/64 * 2 = 0.0625) are
    # too few and 7 are enough.
    a, b = pair(tmp_path, 6)
    done = run("compare", a, b, "--fail-on-regression")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "(Holm across 2 tests: 0.05/2)" in done.stderr
    assert "needs at least 7 paired questions" in done.stderr
    a7, b7 = pair(tmp_path, 7)
    assert run("compare", a7, b7, "--fail-on-regression").returncode == 1


def test_many_runs_count_every_run_and_metric(tmp_path: Path):
    a, b = pair(tmp_path, 7)
    c = write(tmp_path / "c.jsonl", [s - 0.2 for s in json_scores(b)])
    done = run("compare", a, b, c, "--fail-on-regression")  # 2 runs x 2 metrics: 4 tests
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Holm across 4 tests" in done.stderr and "needs at least 8" in done.stderr
    assert "fewer metrics (--metric) or runs" in done.stderr


def json_scores(path: Path) -> list[float]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["scores"]["faithfulness"] for line in lines]


def test_turns_of_five_conversations_are_five_units(tmp_path: Path):
    # 30 turns every one worse, but in 5 conversations: the test flips whole
    # conversations, so its smallest p is 2/2^5 whatever the turns.
    chats = [f"c{i // 6}" for i in range(30)]
    a, b = pair(tmp_path, 30, conversations=chats)
    done = run("compare", a, b, "--metric", "faithfulness", "--fail-on-regression")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "faithfulness has 5 conversations" in done.stderr
    assert "needs at least 6 conversations" in done.stderr


def test_assert_no_regression_refuses_a_gate_that_cannot_fail(tmp_path: Path):
    # The audit's case: 5 questions each down 0.5 passed with p_holm 0.062.
    base = write(tmp_path / "base.jsonl", [0.9, 0.8, 0.95, 0.85, 0.9])
    new = write(tmp_path / "new.jsonl", [0.4, 0.3, 0.45, 0.35, 0.4])
    with pytest.raises(ScoreAssertionError) as failed:
        judge.assert_no_regression(new, base, metrics=["faithfulness"])
    said = str(failed.value)
    assert "assert_no_regression cannot fail: faithfulness has 5 paired questions" in said
    assert "needs at least 6" in said and "metrics=" in said and "alpha=" in said
    # a larger alpha can fail, and does
    with pytest.raises(ScoreAssertionError, match="significantly worse"):
        judge.assert_no_regression(new, base, metrics=["faithfulness"], alpha=0.1)
    # an alpha no number of questions reaches says so
    with pytest.raises(ScoreAssertionError, match="no number of questions is enough"):
        judge.assert_no_regression(new, base, alpha=1e-6)


@pytest.mark.parametrize("n", [1, 2, 5, 6, 12, 20, 21, 40])
def test_the_floor_is_the_tests_own_smallest_p_value(n: int):
    # every difference of one sign, distinct magnitudes: the most extreme data there is
    diff = -0.1 - 0.001 * np.arange(n)
    assert permutation_p_value(diff) == pytest.approx(smallest_p_value(n), rel=1e-12)


def test_the_units_needed_per_alpha_and_number_of_tests():
    # least n with min(1, k * smallest_p_value(n)) < alpha
    assert [units_to_reach(0.05, k) for k in (1, 2, 3, 4, 6, 8, 10)] == [6, 7, 7, 8, 8, 9, 9]
    assert [units_to_reach(0.01, k) for k in (1, 2, 4)] == [8, 9, 10]
    assert units_to_reach(0.1) == 5
    assert units_to_reach(1e-6) is None  # past the Monte Carlo test's 1/200,001


def labelled_runs(tmp_path: Path, a: list[int], b: list[int]) -> list[object]:
    """Two runs of 40 rows, judged alike, and people's labels of the first len(a) rows."""
    rng = np.random.default_rng(7)
    scores = rng.uniform(0.5, 0.9, 40).round(3)
    later = (scores + rng.normal(0, 0.05, 40)).clip(0, 1).round(3)
    one = ("faithfulness",)
    run_a = write(tmp_path / "lab_a.jsonl", scores.tolist(), metrics=one)
    run_b = write(tmp_path / "lab_b.jsonl", later.tolist(), metrics=one)
    sample = {"method": "random", "seed": 1, "of": 40}
    files = []
    for name, values in (("labels_a.jsonl", a), ("labels_b.jsonl", b)):
        records = [{"id": f"s{i}", "faithful": v, "sample": sample} for i, v in enumerate(values)]
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        files.append(path)
    return [run_a, run_b, "--labels-a", files[0], "--labels-b", files[1], "--label", "faithful"]


def test_three_labelled_pairs_give_no_verdict_of_the_labels(tmp_path: Path):
    # The audit's case: differences (-1, -1, 0) gave REGRESSION on the interval
    # [-1.1999, -0.1340], past -1, exit 1; the exact sign test's p is 0.5.
    args = labelled_runs(tmp_path, [1, 1, 1], [0, 0, 1])
    done = run("compare", *args, "--fail-on-regression")
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stderr
    assert "--fail-on-regression: the labels give no verdict on faithfulness" in said
    assert "3 labelled pairs" in said and "needs at least 6 labelled pairs" in said
    assert "REGRESSION" not in said
    shown = run("compare", *args)  # no gate: the comparison, and the warning
    assert shown.returncode == 0 and "judge: warning: the labels give no verdict" in shown.stderr
    # six labelled pairs, every one worse by the labels: a verdict, and a regression
    args = labelled_runs(tmp_path, [1] * 6, [0] * 6)
    done = run("compare", *args, "--fail-on-regression")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "got worse by the labels" in done.stderr
