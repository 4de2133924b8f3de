"""Every worked example of the two seed documents, reproduced exactly.

Seed 000 (RAG evaluation metrics) uses exponential nDCG gain; seed 004 (evaluating a
reranker) uses linear gain. Each example is computed both with the single-ranking
functions the seeds use and, where it is a retrieval metric, with `judge.ir.evaluate`
on the same data written as qrels and a run.
"""

from __future__ import annotations

import math

import pytest

from judge import ir
from judge.metrics import scorers


def as_qrels_and_run(grades: list[int], extra_judged: list[int] = ()) -> tuple[dict, dict]:
    """One query whose ranked results have `grades`; `extra_judged` are unretrieved judged docs."""
    run = {"q": {f"d{i}": float(100 - i) for i in range(len(grades))}}
    qrels = {"q": {f"d{i}": g for i, g in enumerate(grades)}}
    qrels["q"].update({f"unretrieved{i}": g for i, g in enumerate(extra_judged)})
    return qrels, run


# Seed 000, 2.1: 4 relevant docs in all; top 5 = [rel, -, rel, rel, -].
SEED000_TOP5 = [1, 0, 1, 1, 0]


def test_precision_and_recall_at_5():
    assert ir.precision_at_k(SEED000_TOP5, 5) == 0.6
    assert ir.recall_at_k(SEED000_TOP5, 5, num_relevant=4) == 0.75
    qrels, run = as_qrels_and_run(SEED000_TOP5, extra_judged=[1])  # the 4th relevant doc
    assert dict(ir.evaluate(qrels, run, ["P@5", "recall@5"])) == {"P@5": 0.6, "recall@5": 0.75}


def test_context_precision_and_recall():
    # Seed 000, 2.2: contexts judged [1, 0, 1, 0] -> (1.0 + 0.667) / 2 = 0.833.
    assert scorers.context_precision([1, 0, 1, 0]) == pytest.approx(5 / 6, abs=1e-15)
    assert round(scorers.context_precision([1, 0, 1, 0]), 3) == 0.833
    assert scorers.context_precision([True, True, False]) == 1.0  # perfect ranking
    assert scorers.context_precision([0, 0]) == 0.0


def test_mrr_three_queries():
    # Seed 000, 2.3: first relevant doc at ranks 2, 1 and 4 -> (0.5 + 1 + 0.25) / 3 = 0.583.
    lists = [[0, 1, 0], [1, 0, 0], [0, 0, 0, 1]]
    rr = [ir.reciprocal_rank(x) for x in lists]
    assert rr == [0.5, 1.0, 0.25]
    assert round(sum(rr) / 3, 3) == 0.583
    qrels, run = {}, {}
    for n, grades in enumerate(lists):
        one_qrels, one_run = as_qrels_and_run(grades)
        qrels[f"q{n}"], run[f"q{n}"] = one_qrels["q"], one_run["q"]
    assert ir.evaluate(qrels, run, ["mrr"])["mrr"] == pytest.approx(1.75 / 3, abs=1e-15)


def test_average_precision_and_map():
    # Seed 000, 2.4: top 6 = [rel, -, rel, -, -, rel], 3 relevant -> AP 0.722; MAP with 0.5.
    top6 = [1, 0, 1, 0, 0, 1]
    ap = ir.average_precision(top6)
    assert ap == pytest.approx((1 + 2 / 3 + 0.5) / 3, abs=1e-15)
    assert round(ap, 3) == 0.722
    assert round((ap + 0.5) / 2, 3) == 0.611
    qrels, run = as_qrels_and_run(top6)
    second_qrels, second_run = as_qrels_and_run([0, 1])  # AP = 1/2
    qrels["q2"], run["q2"] = second_qrels["q"], second_run["q"]
    per_query = ir.evaluate(qrels, run, ["map"], per_query=True)
    assert per_query["q"]["map"] == ap and per_query["q2"]["map"] == 0.5
    assert round(ir.evaluate(qrels, run, ["map"])["map"], 3) == 0.611


def test_ndcg_exponential_gain_seed000():
    # Seed 000, 2.5: grades [3, 0, 2, 1, 2], gain 2^rel - 1: DCG@5 10.092, NDCG@5 0.932.
    grades = [3, 0, 2, 1, 2]
    dcg = ir.dcg_at_k(grades, 5, gain="exponential")

    # The seed adds the per-rank terms after rounding each to 3 decimals; the exact sum is
    # 10.0912..., so 10.092 is reproduced from the rounded terms the seed prints.
    # The same holds for the ideal DCG: 7.000 + 1.893 + 1.500 + 0.431 = 10.824 (exact 10.8235).
    def rounded_terms(ranking: list[int]) -> list[float]:
        cumulative = [ir.dcg_at_k(ranking[: i + 1], gain="exponential") for i in range(5)]
        return [round(b - a, 3) for a, b in zip([0.0, *cumulative], cumulative, strict=False)]

    assert rounded_terms(grades) == [7.0, 0.0, 1.5, 0.431, 1.161]
    assert round(sum(rounded_terms(grades)), 3) == 10.092
    assert dcg == pytest.approx(10.0912, abs=1e-4)
    ideal = sorted(grades, reverse=True)
    assert ideal == [3, 2, 2, 1, 0]
    assert rounded_terms(ideal) == [7.0, 1.893, 1.5, 0.431, 0.0]
    assert round(sum(rounded_terms(ideal)), 3) == 10.824
    assert ir.dcg_at_k(ideal, 5, gain="exponential") == pytest.approx(10.8235, abs=1e-4)
    ndcg = ir.ndcg_at_k(grades, 5, gain="exponential")
    assert round(ndcg, 3) == 0.932
    qrels, run = as_qrels_and_run(grades)
    assert ir.evaluate(qrels, run, ["ndcg_exp@5"])["ndcg_exp@5"] == pytest.approx(ndcg, abs=1e-15)


def test_answer_relevancy_from_similarities():
    # Seed 000, 3.2: similarities 0.95, 0.82, 0.97 -> 0.913.
    value = scorers.answer_relevancy([0.95, 0.82, 0.97])
    assert round(value, 3) == 0.913
    assert scorers.answer_relevancy([0.95, 0.82, 0.97], noncommittal=True) == 0.0
    assert math.isnan(scorers.answer_relevancy([]))


def test_reranker_example_seed004():
    # Seed 004: reranked [0,1,0,0,1] vs bad [0,0,0,1,1], ideal [1,1,0,0,0], linear gain.
    good, bad, ideal = [0, 1, 0, 0, 1], [0, 0, 0, 1, 1], [1, 1, 0, 0, 0]
    assert ir.reciprocal_rank(good) == 0.5
    assert ir.reciprocal_rank(bad) == 0.25
    idcg = 1 + 1 / math.log2(3)
    good_ndcg = (1 / math.log2(3) + 1 / math.log2(6)) / idcg
    bad_ndcg = (1 / math.log2(5) + 1 / math.log2(6)) / idcg
    assert ir.ndcg_at_k(good, 5, ideal=ideal) == pytest.approx(good_ndcg, abs=1e-15)
    assert ir.ndcg_at_k(bad, 5, ideal=ideal) == pytest.approx(bad_ndcg, abs=1e-15)
    assert f"{ir.ndcg_at_k(good, 5, ideal=ideal):.4f}" == "0.6241"
    assert f"{ir.ndcg_at_k(bad, 5, ideal=ideal):.4f}" == "0.5013"
    for grades, rr, ndcg in ((good, 0.5, good_ndcg), (bad, 0.25, bad_ndcg)):
        qrels, run = as_qrels_and_run(grades)
        result = ir.evaluate(qrels, run, ["mrr", "ndcg@5"])
        assert result["mrr"] == rr
        assert result["ndcg@5"] == pytest.approx(ndcg, abs=1e-15)
