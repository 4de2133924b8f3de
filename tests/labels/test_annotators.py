"""Agreement between annotators: Fleiss' kappa on Fleiss's worked example and on rows with
unequal numbers of raters, Cohen's kappa against scikit-learn, and their intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from judge.labels import measures
from judge.labels.annotators import annotator_agreement

# The example of Fleiss' kappa on Wikipedia: 10 subjects, 14 raters, 5 categories;
# P-bar = 0.378, P-bar_e = 0.213, kappa = 0.210.
FLEISS_EXAMPLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_of_the_worked_example():
    counts = np.array(FLEISS_EXAMPLE, dtype=np.float64)
    kappa = measures.fleiss_kappa(counts, np.ones((1, 10)))[0]
    p_bar = (0.378 - 0.213) / (1 - 0.213)
    assert kappa == pytest.approx(p_bar, abs=2e-3)
    assert round(kappa, 3) == 0.210


def test_fleiss_kappa_with_weights_equals_the_rows_copied():
    counts = np.array(FLEISS_EXAMPLE, dtype=np.float64)
    weights = np.array([[2, 0, 1, 1, 3, 0, 1, 0, 1, 1]], dtype=np.float64)
    copied = np.repeat(counts, weights[0].astype(int), axis=0)
    expected = measures.fleiss_kappa(copied, np.ones((1, copied.shape[0])))[0]
    assert measures.fleiss_kappa(counts, weights)[0] == pytest.approx(expected)


def test_fleiss_kappa_is_undefined_when_every_rating_is_one_category():
    counts = np.array([[3, 0], [2, 0]], dtype=np.float64)
    assert math.isnan(measures.fleiss_kappa(counts, np.ones((1, 2)))[0])


def test_two_annotators_get_cohens_kappa_as_scikit_learn_computes_it():
    ana = [1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0]
    bob = [1, 0, 0, 1, 0, 1, 1, 1, 0, 1, 0, 0]
    labels = {f"r{i}": {"ana": a, "bob": b} for i, (a, b) in enumerate(zip(ana, bob, strict=True))}
    labels["r99"] = {"ana": 1}  # labelled by one: left out
    found = annotator_agreement(labels)
    assert found.measure == "cohen_kappa" and found.rows == 12
    assert found.kappa.value == pytest.approx(cohen_kappa_score(ana, bob))
    assert found.agreement.value == pytest.approx(9 / 12)
    assert found.kappa.ci_low < found.kappa.value < found.kappa.ci_high
    assert "cohen_kappa 0.5" in found.text() and "ana, bob" in found.text()


def test_three_annotators_get_fleiss_kappa_over_the_rows_two_or_more_labelled():
    labels = {
        "r0": {"ana": 1, "bob": 1, "cy": 1},
        "r1": {"ana": 0, "bob": 0, "cy": 1},
        "r2": {"ana": 0, "bob": 0, "cy": 0},
        "r3": {"ana": 1, "bob": 0},
        "r4": {"cy": 1},
    }
    found = annotator_agreement(labels)
    assert found.measure == "fleiss_kappa" and found.rows == 4
    counts = np.array([[0, 3], [2, 1], [3, 0], [1, 1]], dtype=np.float64)
    # by hand: P_i = 1, 1/3, 1, 0 -> 7/12; p = (6/11, 5/11) -> P_e = 61/121
    assert found.kappa.value == pytest.approx((7 / 12 - 61 / 121) / (1 - 61 / 121))
    assert found.kappa.value == pytest.approx(measures.fleiss_kappa(counts, np.ones((1, 4)))[0])
    assert found.agreement.value == pytest.approx(7 / 12)


def test_one_annotator_has_no_agreement():
    found = annotator_agreement({"r0": {"ana": 1}})
    assert found.rows == 0 and math.isnan(found.kappa.value)
    assert "two annotators" in found.text()
