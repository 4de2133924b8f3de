"""Prediction-powered means (`judge.ppi_mean`, `judge.ppi_mean_difference`): the PPI++
arithmetic against its authors' implementation, the errors, NaN scores, and a simulation of
many seeded data sets where a biased, noisy judge meets a few labels."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

import judge
from judge.errors import InputFormatError
from judge.stats import ppi_tuned

# A binary case: 12 labelled rows, 20 unlabelled (lambda lands inside (0, 1)).
LABELS = [1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
JUDGED_LABELLED = [0.2, 0.24, 0.08, 1.0, 0.36, 0.61, 0.63, 0.53, 0.04, 0.2, 0.42, 0.24]
JUDGED = [0.79, 0.44, 0.51, 0.96, 0.66, 0.35, 0.45, 0.66, 1.0, 0.42]
JUDGED += [0.43, 0.8, 0.23, 0.41, 0.76, 0.67, 0.53, 0.7, 0.0, 0.81]
# A graded case: labels 1-5 against scores in [0, 1] (lambda clipped to 1).
GRADED = [3, 4, 2, 5, 4, 3, 1, 4, 5, 2]
GRADED_JUDGED_LABELLED = [0.5, 0.9, 0.4, 1.0, 0.7, 0.7, 0.1, 0.8, 0.95, 0.3]
GRADED_JUDGED = [0.6, 0.2, 0.9, 0.85, 0.4, 0.55, 0.7, 0.3]


def test_ppi_mean_gives_the_intervals_of_the_authors_ppi_py():
    # The figures of ppi_py 0.2.3's ppi_mean_ci / ppi_mean_pointestimate (Angelopoulos et
    # al.'s implementation, lam=None: tuned and clipped) on the same data.
    at_95 = judge.ppi_mean(JUDGED, JUDGED_LABELLED, LABELS)
    assert at_95.mean == pytest.approx(0.39692841453324934, abs=1e-12)
    assert at_95.low == pytest.approx(0.1384163880079518, abs=1e-12)
    assert at_95.high == pytest.approx(0.655440441058547, abs=1e-12)
    assert 0 < at_95.lam < 1
    at_90 = judge.ppi_mean(JUDGED, JUDGED_LABELLED, LABELS, confidence=0.90)
    assert (at_90.low, at_90.high) == pytest.approx((0.17997828290085804, 0.6138785461656407))
    graded = judge.ppi_mean(GRADED_JUDGED, GRADED_JUDGED_LABELLED, GRADED)
    assert (graded.mean, graded.low, graded.high) == pytest.approx(
        (3.2275, 2.5889724488873203, 3.86602755111268), abs=1e-12
    )
    assert graded.lam == 1.0
    # ppi_py's classical_mean_ci: the labels-only interval
    assert (graded.labels_only.low, graded.labels_only.high) == pytest.approx(
        (2.513568267341815, 4.086431732658184), abs=1e-12
    )


def test_the_estimate_says_its_counts_and_the_judge_only_and_labels_only_means():
    result = judge.ppi_mean(JUDGED, JUDGED_LABELLED, LABELS)
    assert (result.n_labelled, result.n_unlabelled, result.left_out) == (12, 20, (0, 0))
    assert result.labels_only.mean == pytest.approx(4 / 12)
    assert result.labels_only.n == 12
    every = JUDGED + JUDGED_LABELLED
    assert result.judge_only.mean == pytest.approx(sum(every) / len(every))
    assert result.judge_only.n == 32
    assert result.judge_only.low < result.judge_only.mean < result.judge_only.high
    assert any("only 12 labels" in note for note in result.notes)
    data = result.to_dict()
    assert data["lambda"] == result.lam and data["labels_only"]["n"] == 12
    assert data["left_out"] == {"unlabelled": 0, "labelled": 0}


def test_nan_scores_are_left_out_and_counted():
    judged = [*JUDGED, math.nan, math.nan]
    judged_labelled = [*JUDGED_LABELLED, math.nan]
    labels = [*LABELS, 1]
    result = judge.ppi_mean(judged, judged_labelled, labels)
    clean = judge.ppi_mean(JUDGED, JUDGED_LABELLED, LABELS)
    assert (result.mean, result.low, result.high) == (clean.mean, clean.low, clean.high)
    assert result.left_out == (2, 1)
    assert any("NaN are left out (2 unlabelled, 1 labelled)" in n for n in result.notes)


def test_every_row_labelled_is_the_labels_own_mean():
    result = judge.ppi_mean([], JUDGED_LABELLED, LABELS)
    assert result.lam == 0.0
    assert (result.mean, result.low, result.high) == pytest.approx(
        (result.labels_only.mean, result.labels_only.low, result.labels_only.high)
    )


def test_a_judge_that_gives_one_score_gets_no_weight():
    result = judge.ppi_mean([0.5] * 20, [0.5] * 12, LABELS)
    assert result.lam == 0.0 and result.mean == pytest.approx(4 / 12)
    assert any("lambda is 0" in note for note in result.notes)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: judge.ppi_mean(JUDGED, JUDGED_LABELLED[:-1], LABELS), "judged_labelled= has 11"),
        (lambda: judge.ppi_mean(JUDGED, [0.1, 0.2], [1, math.nan]), r"labels= has NaN at .* 1 "),
        (lambda: judge.ppi_mean(JUDGED, [0.4], [1]), "1 labelled row with a judged score"),
        (
            lambda: judge.ppi_mean(JUDGED, [0.4, math.nan], [1, 0]),
            r"1 labelled row .*\(1 more have a NaN",
        ),
        (lambda: judge.ppi_mean(JUDGED, JUDGED_LABELLED, LABELS, confidence=95), "confidence="),
        (lambda: judge.ppi_mean(["high"], JUDGED_LABELLED, LABELS), "judged= must be numbers"),
        (lambda: judge.ppi_mean([[0.1]], JUDGED_LABELLED, LABELS), "judged= must be one list"),
        (lambda: judge.ppi_mean([math.inf], JUDGED_LABELLED, LABELS), "judged= holds an inf"),
        (
            lambda: judge.ppi_mean_difference(
                judged_a=[0.1, 0.2],
                judged_b=[0.1],
                judged_labelled_a=[0.1],
                judged_labelled_b=[0.1],
                labels_a=[1],
                labels_b=[1],
            ),
            "judged_a= has 2 values and judged_b= 1",
        ),
        (
            lambda: judge.ppi_mean_difference(
                judged_a=[0.1],
                judged_b=[0.1],
                judged_labelled_a=[0.1, 0.2],
                judged_labelled_b=[0.1, 0.2],
                labels_a=[1, 0],
                labels_b=[1],
            ),
            "labels_b= 1",
        ),
    ],
)
def test_bad_input_is_an_error_in_keyword_words(call, message):
    with pytest.raises(InputFormatError, match=message):
        call()


def test_the_paired_difference_is_ppi_of_the_per_row_differences():
    rng = np.random.default_rng(5)
    a_u, b_u = rng.random(40), rng.random(40)
    a_l, b_l = rng.random(15), rng.random(15)
    y_a, y_b = (a_l > 0.4) * 1.0, (b_l > 0.3) * 1.0
    a_u[3] = math.nan  # left out with its B score
    result = judge.ppi_mean_difference(
        judged_a=a_u,
        judged_b=b_u,
        judged_labelled_a=a_l,
        judged_labelled_b=b_l,
        labels_a=y_a,
        labels_b=y_b,
    )
    direct = judge.ppi_mean(np.delete(b_u - a_u, 3), b_l - a_l, y_b - y_a)
    assert (result.mean, result.low, result.high, result.lam) == (
        direct.mean,
        direct.low,
        direct.high,
        direct.lam,
    )
    assert result.left_out == (1, 0)
    with pytest.raises(TypeError):  # keyword-only: a swapped pair would flip the sign
        judge.ppi_mean_difference(a_u, b_u, a_l, b_l, y_a, y_b)  # type: ignore[misc]


# The simulation: many seeded data sets, all at once (each row of the arrays one data set).
DATA_SETS = 1000
LABELLED, UNLABELLED = 100, 1000
Z95 = NormalDist().inv_cdf(0.975)


def simulate(seed: int, judge_of: str) -> dict[str, np.ndarray]:
    """Per data set: the true mean, PPI's estimate and standard error, the labels-only and
    the judge-only estimates and standard errors (the CLT intervals of each)."""
    rng = np.random.default_rng(seed)
    size = (DATA_SETS, LABELLED + UNLABELLED)
    if judge_of == "binary":  # labels 0/1; the judge over-scores by about 0.3 - 0.5 p
        truth = rng.uniform(0.3, 0.8, size=(DATA_SETS, 1))
        labels = (rng.random(size) < truth) * 1.0
        judged = np.clip(0.3 + 0.5 * labels + rng.normal(0, 0.2, size), 0, 1)
        judged = np.round(judged * 10) / 10  # a ratio of few claims: tied values
    elif judge_of == "graded":  # labels on a 1-5 scale, a judge in [0, 1] that under-scores
        truth = rng.uniform(2.5, 4.0, size=(DATA_SETS, 1))
        labels = np.clip(np.round(truth + rng.normal(0, 1.0, size)), 1, 5)
        truth = np.array([_graded_mean(t) for t in truth[:, 0]])[:, None]
        judged = np.clip((labels - 1) / 4 - 0.2 + rng.normal(0, 0.15, size), 0, 1)
    else:  # "noise": a judge whose scores have nothing to do with the labels
        truth = rng.uniform(0.3, 0.8, size=(DATA_SETS, 1))
        labels = (rng.random(size) < truth) * 1.0
        judged = np.clip(0.6 + rng.normal(0, 0.2, size), 0, 1)
    labelled = labels[:, :LABELLED]
    theta, se, lam = ppi_tuned(labelled, judged[:, :LABELLED], judged[:, LABELLED:])
    return {
        "truth": truth[:, 0],
        "ppi": theta,
        "ppi_se": se,
        "lam": lam,
        "labels": labelled.mean(axis=1),
        "labels_se": labelled.std(axis=1) / math.sqrt(LABELLED),
        "judge": judged.mean(axis=1),
        "judge_se": judged.std(axis=1) / math.sqrt(size[1]),
    }


def _graded_mean(mean: float) -> float:
    """The exact mean of clip(round(mean + N(0, 1)), 1, 5): the true mean of a graded label."""
    normal = NormalDist(mean, 1.0)
    # round() halves to even, but a normal puts no mass on the halves
    cuts = [-math.inf, 1.5, 2.5, 3.5, 4.5, math.inf]
    return sum(v * (normal.cdf(cuts[v]) - normal.cdf(cuts[v - 1])) for v in range(1, 6))


def coverage(sim: dict[str, np.ndarray], name: str) -> float:
    return float(np.mean(np.abs(sim[name] - sim["truth"]) <= Z95 * sim[f"{name}_se"]))


@pytest.mark.parametrize("judge_of", ["binary", "graded"])
def test_with_a_biased_noisy_judge_ppi_covers_and_is_narrower_than_the_labels(judge_of):
    sim = simulate(7, judge_of)
    assert coverage(sim, "ppi") >= 0.92
    assert coverage(sim, "labels") >= 0.92  # the CLT holds at 100 labels: a fair baseline
    assert coverage(sim, "judge") < 0.5  # the judge alone is confidently wrong
    assert np.mean(sim["ppi_se"]) < 0.85 * np.mean(sim["labels_se"])
    assert np.mean(sim["ppi_se"] < sim["labels_se"]) > 0.95


def test_with_an_uninformative_judge_ppi_still_covers_and_is_barely_wider():
    sim = simulate(11, "noise")
    assert coverage(sim, "ppi") >= 0.92
    assert np.mean(sim["ppi_se"]) < 1.02 * np.mean(sim["labels_se"])
    assert np.mean(sim["lam"]) < 0.2


def test_ppi_mean_is_the_simulations_arithmetic():
    rng = np.random.default_rng(3)
    labels = (rng.random((3, 50)) < 0.6) * 1.0
    judged = np.clip(0.2 + 0.6 * labels + rng.normal(0, 0.2, (3, 50)), 0, 1)
    unlabelled = rng.random((3, 200))
    theta, se, lam = ppi_tuned(labels, judged, unlabelled)
    for k in range(3):
        one = judge.ppi_mean(unlabelled[k], judged[k], labels[k])
        assert (one.mean, one.lam) == pytest.approx((theta[k], lam[k]), abs=1e-12)
        assert one.high - one.low == pytest.approx(2 * Z95 * se[k], abs=1e-12)
