"""The agreement measures: hand-computed values on tiny inputs, and an independent check of
each against scipy and scikit-learn (test extras only; the package uses numpy alone)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from judge.labels import kinds, measures
from judge.stats import BOOTSTRAP_RESAMPLES, bootstrap_ci, bootstrap_ci_of, expanded_tail


def one(n: int) -> np.ndarray:
    return np.ones((1, n))


def a(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def test_auroc_by_hand_with_a_tie_counted_half():
    assert measures.auroc(a(0.1, 0.4, 0.35, 0.8), a(0, 0, 1, 1), one(4))[0] == 0.75
    # positives 0.5 and 0.9, negatives 0.5 and 0.2: pairs 0.5 (tie) + 1 + 1 + 1 of 4
    assert measures.auroc(a(0.5, 0.5, 0.2, 0.9), a(1, 0, 0, 1), one(4))[0] == 0.875


def test_classification_by_hand():
    labels, predicted = a(1, 1, 1, 0, 0, 0), a(1, 1, 0, 0, 0, 1)
    counts = measures.confusion(predicted, labels, one(6))
    assert counts.tolist() == [[2, 1, 1, 2]]  # tp, fn, fp, tn
    balanced, f1_negative, kappa = measures.classification(counts)[0]
    assert balanced == pytest.approx(2 / 3)
    assert f1_negative == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert kappa == pytest.approx((4 / 6 - 0.5) / 0.5)  # observed 4/6, chance 1/2


def test_best_threshold_maximises_balanced_accuracy_and_prefers_the_cut_nearest_half():
    # 0.4 and 0.9 both give balanced accuracy 0.75; 0.4 is nearer 0.5
    best = measures.best_threshold(a(0.2, 0.4, 0.8, 0.9), a(0, 1, 0, 1), one(4))[0]
    assert best[0] == 0.4 and best[1] == 0.75
    assert best[2] == pytest.approx(2 / 3)  # class 0: tn 1, one 0 predicted 1, no 1 predicted 0
    # 0.3 and 0.7 are equally near 0.5: the lower wins
    assert measures.best_threshold(a(0.2, 0.3, 0.6, 0.7), a(0, 1, 0, 1), one(4))[0][0] == 0.3
    perfect = measures.best_threshold(a(0.1, 0.45, 0.9), a(0, 1, 1), one(3))[0]
    assert perfect.tolist() == [0.45, 1.0, 1.0, 1.0]


def test_rank_correlations_by_hand_with_ties():
    x, y = a(1, 2, 2, 3), a(1, 3, 2, 4)
    # average ranks of x: 1, 2.5, 2.5, 4
    assert measures.spearman(x, y, one(4))[0] == pytest.approx(3 / math.sqrt(10))
    # 5 concordant pairs, 0 discordant, one pair tied in x: 5 / sqrt(5 * 6)
    assert measures.kendall_tau_b(x, y, one(4))[0] == pytest.approx(5 / math.sqrt(30))
    assert measures.pearson(a(1, 2, 3), a(1, 3, 2), one(3))[0] == pytest.approx(0.5)


def test_sign_test_by_hand():
    assert measures.sign_test(9, 1) == 2 * (1 + 10) / 2**10
    assert measures.sign_test(3, 0) == 0.25
    assert measures.sign_test(5, 5) == 1.0 and measures.sign_test(4, 3) == 1.0
    assert math.isnan(measures.sign_test(0, 0))
    assert 0 < measures.sign_test(3000, 2000) < 1e-40  # exact, no overflow


def random_cases(count: int):
    rng = np.random.default_rng(12)
    for _ in range(count):
        n = int(rng.integers(2, 40))
        yield (
            rng.integers(0, 5, n) / 4.0,  # scores with many ties
            rng.integers(0, 2, n).astype(np.float64),
            rng.integers(0, 4, n).astype(np.float64),
            rng.integers(0, 3, (1, n)).astype(np.float64),  # bootstrap-like weights
        )


def test_binary_measures_match_scikit_learn():
    checked = 0
    for scores, labels, _, _ in random_cases(120):
        if labels.min() == labels.max():
            continue
        checked += 1
        w = one(scores.size)
        assert measures.auroc(scores, labels, w)[0] == pytest.approx(
            skm.roc_auc_score(labels, scores)
        )
        predicted = (scores >= 0.5).astype(np.float64)
        got = measures.classification(measures.confusion(predicted, labels, w))[0]
        assert got[0] == pytest.approx(skm.balanced_accuracy_score(labels, predicted))
        assert got[1] == pytest.approx(skm.f1_score(labels, predicted, pos_label=0))
        if predicted.min() != predicted.max():
            assert got[2] == pytest.approx(skm.cohen_kappa_score(labels, predicted))
    assert checked > 90


def test_correlations_match_scipy():
    checked = 0
    for scores, _, grades, _ in random_cases(120):
        if scores.min() == scores.max() or grades.min() == grades.max():
            continue
        checked += 1
        w = one(scores.size)
        assert measures.spearman(scores, grades, w)[0] == pytest.approx(
            stats.spearmanr(scores, grades).statistic
        )
        assert measures.kendall_tau_b(scores, grades, w)[0] == pytest.approx(
            stats.kendalltau(scores, grades, variant="b").statistic
        )
        assert measures.pearson(scores, grades, w)[0] == pytest.approx(
            stats.pearsonr(scores, grades).statistic
        )
    assert checked > 90


def test_sign_test_matches_scipy_binomtest():
    for n in range(1, 41):
        for wins in range(n + 1):
            expected = stats.binomtest(wins, n, 0.5, alternative="two-sided").pvalue
            assert measures.sign_test(wins, n - wins) == pytest.approx(expected, rel=1e-12)


def test_weights_count_copies_of_rows():
    """A bootstrap resample is computed as if its drawn rows were copied."""
    checked = 0
    for scores, labels, grades, weights in random_cases(100):
        copies = np.repeat(np.arange(scores.size), weights[0].astype(int))
        s, y, g = scores[copies], labels[copies], grades[copies]
        if 0 < y.sum() < y.size:
            assert measures.auroc(scores, labels, weights)[0] == pytest.approx(
                skm.roc_auc_score(y, s)
            )
        if s.min() != s.max() and g.min() != g.max():
            checked += 1
            assert measures.spearman(scores, grades, weights)[0] == pytest.approx(
                stats.spearmanr(s, g).statistic
            )
            assert measures.kendall_tau_b(scores, grades, weights)[0] == pytest.approx(
                stats.kendalltau(s, g).statistic
            )
            assert measures.pearson(scores, grades, weights)[0] == pytest.approx(
                stats.pearsonr(s, g).statistic
            )
    assert checked > 50


def test_undefined_measures_are_nan_not_errors():
    w = one(3)
    assert math.isnan(measures.auroc(a(0.1, 0.5, 0.9), a(1, 1, 1), w)[0])
    assert np.isnan(measures.best_threshold(a(0.1, 0.5, 0.9), a(0, 0, 0), w)[0]).all()
    assert math.isnan(measures.spearman(a(0.1, 0.5, 0.9), a(2, 2, 2), w)[0])
    assert math.isnan(measures.kendall_tau_b(a(0.3, 0.3, 0.3), a(1, 2, 3), w)[0])
    # a constant that float rounding would leave with a tiny, non-zero variance
    assert math.isnan(measures.pearson(a(0.1, 0.1, 0.1), a(1, 2, 3), w)[0])


def test_the_bootstrap_of_any_statistic_draws_as_bootstrap_ci_does():
    values = (np.arange(37) % 3 == 0).astype(np.float64)
    # at the expanded level bootstrap_ci takes its percentiles at
    level = 1 - 2 * expanded_tail(37)
    low, high, left_out = bootstrap_ci_of(lambda w: (w @ values / 37)[:, None], 37, level)
    assert (low[0], high[0]) == pytest.approx(bootstrap_ci(values), rel=1e-12) and left_out[0] == 0


def test_binary_kind_reports_one_class_as_undefined_with_a_note():
    found, counts = kinds.binary(a(0.2, 0.6, 0.9), a(1, 1, 1))
    assert counts == {"positive": 3, "negative": 0}
    auroc = found["auroc"]
    assert math.isnan(auroc.value) and math.isnan(auroc.ci_low)
    assert auroc.note == "every scored row is labelled 1: needs both 0 and 1"
    assert found["kappa@0.5"].value == pytest.approx(0.0)  # defined: no agreement beyond chance


def test_binary_kind_intervals_leave_out_undefined_resamples():
    scores, labels = a(0.1, 0.2, 0.3, 0.7, 0.8, 0.9), a(0, 0, 1, 0, 1, 1)
    found, _ = kinds.binary(scores, labels)
    auroc = found["auroc"]
    assert auroc.value == pytest.approx(skm.roc_auc_score(labels, scores))
    assert 0 <= auroc.ci_low <= auroc.value <= auroc.ci_high <= 1
    # a resample drawing only 0s or only 1s has no AUROC: 2 * (1/2)^6 of them, about 312
    left_out = int(auroc.note.split()[0])
    assert 200 < left_out < 450 and f"of {BOOTSTRAP_RESAMPLES} resamples" in auroc.note


def test_pairwise_kind_by_hand():
    found, counts = kinds.pairwise(a(0.9, 0.5, 0.2, 0.8), a(0.1, 0.5, 0.7, 0.3))
    assert counts == {"wins": 2, "ties": 1, "losses": 1}
    assert found["accuracy"].value == 0.625 and found["tie_rate"].value == 0.25
    assert found["accuracy"].ci_low <= 0.625 <= found["accuracy"].ci_high
    assert found["sign_test_p"].value == 1.0 and math.isnan(found["sign_test_p"].ci_low)
    none, _ = kinds.pairwise(a(0.5), a(0.5))
    assert math.isnan(none["sign_test_p"].value) and "no untied pair" in none["sign_test_p"].note


def test_graded_kind_names_why_it_is_undefined():
    found, counts = kinds.graded(a(0.2, 0.5, 0.9), a(3, 3, 3))
    assert counts["distinct_labels"] == 1
    assert all(math.isnan(m.value) for m in found.values())
    assert found["spearman"].note == "every label is the same"
    flat, _ = kinds.graded(a(0.5, 0.5, 0.5), a(1, 2, 3))
    assert flat["pearson"].note == "the judge gave every row the same score"
