"""`judge estimate` and `judge.ppi_mean` against damaged labels files and degenerate labels:
the files `judge annotate` leaves after a kill, labels that are all the same, values too
large for the arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import judge
from judge.annotate.labels_file import LabelsWriter
from judge.errors import InputFormatError
from judge.labels.estimate import estimate
from tests.helpers.cli import run
from tests.helpers.corrected_runs import RANDOM, labels_for, scores_of, write_run


def test_a_labels_file_killed_mid_write_and_resumed_is_read_with_a_warning(tmp_path: Path):
    # judge annotate killed mid-write leaves half a line; the next session starts a new
    # line after it (LabelsWriter), so the cut line ends up in the middle of the file.
    scores = scores_of(40)
    results = write_run(tmp_path / "run", scores)
    records = labels_for(range(20), scores, sample=RANDOM, annotator="ana")
    path = tmp_path / "labels.jsonl"
    writer = LabelsWriter(path)
    for record in records[:10]:
        writer.append(record)
    writer.close()
    with open(path, "ab") as handle:
        handle.write(json.dumps(records[10]).encode()[:15])  # SIGKILL mid-write
    writer = LabelsWriter(path)
    for record in records[11:]:
        writer.append(record)
    writer.close()
    result = estimate(results, labels=path, label="ok", metric="faithfulness")
    kept = [r for i, r in enumerate(records) if i != 10]
    direct = estimate(results, labels=kept, label="ok", metric="faithfulness")
    assert (result.ppi.mean, result.ppi.low, result.ppi.high) == (
        direct.ppi.mean,
        direct.ppi.low,
        direct.ppi.high,
    )
    assert result.ppi.n_labelled == 19
    assert any(f"{path} line 11" in w and "left out" in w for w in result.warnings)
    done = run("estimate", results, "--labels", path, "--label", "ok", "--metric", "faithfulness")
    assert done.returncode == 0, done.stderr
    assert "line 11" in done.stderr and "judge: warning:" in done.stderr


def test_a_labels_file_with_a_byte_order_mark_is_read(tmp_path: Path):
    scores = scores_of(40)
    results = write_run(tmp_path / "run", scores)
    records = labels_for(range(20), scores, sample=RANDOM)
    path = tmp_path / "labels.jsonl"
    path.write_text("\ufeff" + "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = estimate(results, labels=path, label="ok", metric="faithfulness")
    assert result.ppi.n_labelled == 20 and result.warnings == []


@pytest.mark.parametrize("n", [2, 5, 40])
def test_labels_all_one_give_the_exact_binomial_interval_not_a_zero_width_one(n: int):
    # The CLT interval of labels that are all 1 is [1, 1]: 95% sure of a perfect mean from
    # two labels. The labels' mean is a binomial proportion: the exact (Clopper-Pearson)
    # interval of n successes in n is [(alpha/2)^(1/n), 1].
    result = judge.ppi_mean([0.5, 0.6] * 20, [0.9] * n, [1] * n)
    low = 0.025 ** (1 / n)
    assert result.mean == 1.0 and result.high == 1.0
    assert result.low == pytest.approx(low, rel=1e-12)
    assert result.labels_only.low == pytest.approx(low, rel=1e-12)
    assert any("Clopper-Pearson" in note for note in result.notes)
    zeros = judge.ppi_mean([0.5, 0.6] * 20, [0.9] * n, [0] * n, confidence=0.9)
    assert (zeros.mean, zeros.low) == (0.0, 0.0)
    assert zeros.high == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-12)


def test_labels_all_equal_on_another_scale_have_no_interval():
    result = judge.ppi_mean([0.5, 0.6] * 20, [0.9, 0.1, 0.5], [3, 3, 3])
    assert result.mean == 3.0
    assert result.low != result.low and result.high != result.high  # NaN: no interval
    assert any("every label is 3" in note for note in result.notes)
    same = judge.ppi_mean_difference(
        judged_a=[0.2] * 10,
        judged_b=[0.4] * 10,
        judged_labelled_a=[0.1, 0.3, 0.2],
        judged_labelled_b=[0.5, 0.9, 0.2],
        labels_a=[1, 0, 1],
        labels_b=[1, 0, 1],
    )
    assert same.mean == 0.0 and same.low != same.low


def test_a_gate_is_not_met_by_two_labels_that_are_both_yes(tmp_path: Path):
    scores = scores_of(40)
    results = write_run(tmp_path / "run", scores)
    records = [{"id": "r0", "ok": 1, "sample": RANDOM}, {"id": "r5", "ok": 1, "sample": RANDOM}]
    result = estimate(
        results, labels=records, label="ok", metric="faithfulness", gates=["faithfulness>=0.99"]
    )
    assert result.ppi.low == pytest.approx(0.025**0.5)
    assert result.missed and "lower end 0.1581 < 0.99" in result.missed[0]


def test_a_labels_file_of_skips_alone_says_so_not_another_run(tmp_path: Path):
    results = write_run(tmp_path / "run", scores_of(40))
    skips = [{"id": f"r{i}", "ok": None, "sample": RANDOM} for i in range(5)]
    with pytest.raises(InputFormatError, match=r"no row is labelled: the 5 rows .* skipped"):
        estimate(results, labels=skips, label="ok", metric="faithfulness")


def test_values_too_large_for_the_arithmetic_are_refused_not_an_infinite_interval():
    with pytest.raises(InputFormatError, match=r"too large"):
        judge.ppi_mean([0.5] * 10, [0.1, 0.9, 0.4], [1e300, 0.0, 1e300])
    # Scores whose variance overflows get lambda 0: the labels' own estimate, still valid.
    result = judge.ppi_mean([1e200] * 10, [1e200, 0.0, 1e200], [1.0, 0.0, 1.0])
    assert result.lam == 0.0 and result.mean == result.labels_only.mean


def lying_run(tmp_path: Path) -> tuple[Path, list[float]]:
    scores = [(i * 37 % 101) / 100 for i in range(400)]
    return write_run(tmp_path / "run", scores), scores


def test_labels_that_say_random_but_are_the_judges_disagreements_are_warned_about(
    tmp_path: Path,
):
    results, scores = lying_run(tmp_path)
    said = {"method": "random", "seed": 1, "of": 400}
    nearest = sorted(range(400), key=lambda i: abs(scores[i] - 0.5))[:40]
    lie = [{"id": f"r{i}", "ok": int(scores[i] > 0.5), "sample": said} for i in nearest]
    result = estimate(results, labels=lie, label="ok", metric="faithfulness")
    assert any("not spread as the other rows'" in w for w in result.warnings), result.warnings
    import random

    honest_rows = random.Random(1).sample(range(400), 40)
    honest = [{"id": f"r{i}", "ok": int(scores[i] > 0.5), "sample": said} for i in honest_rows]
    assert estimate(results, labels=honest, label="ok", metric="faithfulness").warnings == []


def test_the_two_sample_test_is_kolmogorov_smirnovs():
    from scipy import stats as scipy_stats

    from judge.stats import ks_two_sample

    a = [(i * 37 % 101) / 100 for i in range(60)]
    b = [((i * 13 % 17) / 17) ** 2 for i in range(45)]
    d, p = ks_two_sample(a, b)
    expected = scipy_stats.ks_2samp(a, b)
    assert d == pytest.approx(expected.statistic, abs=1e-15)
    assert p == pytest.approx(scipy_stats.kstwobign.sf(d * (60 * 45 / 105) ** 0.5), rel=1e-9)


@pytest.mark.parametrize("value", [0.1, 0.2, 0.3, 0.6, 0.7, 0.9, 2 / 3, 4.2])
@pytest.mark.parametrize("n", [3, 30, 40, 47])
def test_labels_all_equal_have_no_interval_whatever_their_floats_mean(value: float, n: int):
    # The mean of n labels all 0.9 is off 0.9 in the last bit for some n, and their
    # standard deviation then ~1e-17, not 0: "no spread" is decided on the labels (all
    # equal), not on the float result, so no zero-width interval is given as one.
    result = judge.ppi_mean(np.linspace(0.6, 1, 270), np.linspace(0.6, 1, n), [value] * n)
    assert result.low != result.low and result.high != result.high  # NaN: no interval
    assert result.labels_only.low != result.labels_only.low
    assert any(f"every label is {value:g}" in note for note in result.notes)
    assert result.lam == 0.0 and result.mean == pytest.approx(value, rel=1e-15)
    differences = judge.ppi_mean_difference(
        judged_a=[0.2, 0.3] * 20,
        judged_b=[0.4, 0.35] * 20,
        judged_labelled_a=np.linspace(0.1, 0.5, n),
        judged_labelled_b=np.linspace(0.2, 0.9, n),
        labels_a=[0.0] * n,
        labels_b=[value] * n,
    )
    assert differences.low != differences.low  # differences all equal: no interval


def test_a_judge_with_one_score_gets_no_weight_whatever_its_floats_variance():
    # 0.9 judged on every row: the variance of the scores is ~1e-33, not 0, and lambda was
    # cov / that, clipped to 1, for a judge that tells nothing.
    result = judge.ppi_mean([0.9] * 270, [0.9] * 30, [0, 1, 1] * 10)
    assert result.lam == 0.0 and result.mean == pytest.approx(2 / 3)


def test_judge_estimate_gate_is_not_met_by_thirty_labels_all_equal(tmp_path: Path):
    # 30 graded labels all 0.9: their float mean is off in the last bit, and the gate was
    # met on the interval [0.900, 0.900] (exit 0).
    scores = [round(0.6 + 0.4 * ((i * 37) % 300) / 300, 3) for i in range(300)]
    results = write_run(tmp_path / "run", scores)
    records = [{"id": f"r{i}", "grade": 0.9, "sample": RANDOM} for i in range(0, 300, 10)]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    done = run(
        "estimate", results, "--labels", labels, "--label", "grade", "--metric", "faithfulness",
        "--gate", "faithfulness>=0.9",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "every label is 0.9" in done.stdout + done.stderr
