"""The deterministic scorers, table-tested: pure functions on judged data."""

from __future__ import annotations

import math

import pytest

from judge.metrics import scorers

NAN = float("nan")


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-15)


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        (["supported", "supported"], 1.0),
        (["supported", "not_found", "contradicted"], 1 / 3),
        (["contradicted"], 0.0),
        ([], NAN),
    ],
)
def test_faithfulness_and_context_recall(verdicts, expected):
    assert same(scorers.faithfulness(verdicts), expected)
    assert same(scorers.context_recall(verdicts), expected)


@pytest.mark.parametrize(
    ("relevance", "expected"),
    [
        ([1, 0, 1, 0], (1 + 2 / 3) / 2),  # seed 000: 0.833
        ([1, 1, 0, 0], 1.0),  # perfect ranking reaches exactly 1.0
        ([0, 0, 1], 1 / 3),
        ([0, 0], 0.0),
        ([], NAN),
    ],
)
def test_context_precision(relevance, expected):
    assert same(scorers.context_precision(relevance), expected)


@pytest.mark.parametrize(
    ("relevant", "expected"),
    [([True, False, True, False], 0.5), ([False], 0.0), ([], NAN)],
)
def test_context_relevance(relevant, expected):
    assert same(scorers.context_relevance(relevant), expected)


@pytest.mark.parametrize(
    ("grades", "k", "expected"),
    [
        ([3, 2, 0], None, 1.0),
        ([0, 3], None, (3 / math.log2(3)) / 3),
        ([0, 3, 3], 1, 0.0),
        ([0, 0], 5, 0.0),
        ([], 5, NAN),
    ],
)
def test_context_ndcg(grades, k, expected):
    assert same(scorers.context_ndcg(grades, k), expected)


@pytest.mark.parametrize(
    ("similarities", "noncommittal", "expected"),
    [([0.95, 0.82, 0.97], False, 0.913333333333333), ([0.9], True, 0.0), ([], False, NAN)],
)
def test_answer_relevancy(similarities, noncommittal, expected):
    assert same(
        round(scorers.answer_relevancy(similarities, noncommittal=noncommittal), 15), expected
    )


def test_cosine_similarities():
    sims = scorers.cosine_similarities([1.0, 0.0], [[2.0, 0.0], [0.0, 3.0], [1.0, 1.0], [0, 0]])
    assert sims == pytest.approx([1.0, 0.0, math.sqrt(0.5), 0.0], abs=1e-15)
