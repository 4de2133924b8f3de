"""nDCG's ideal ranking, built from a table of grade counts or by sorting (wide grades)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from judge.ir import evaluate, ndcg_at_k


def _data(top: int, seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(40):
        docs = [f"d{i}" for i in range(15)]
        grades = rng.integers(-1, top + 1, 10).tolist()
        if q % 9 == 0:
            grades = [min(g, 0) for g in grades]  # nothing relevant: nDCG is 0
        qrels[f"q{q}"] = dict(zip(docs[:10], grades, strict=True))
        run[f"q{q}"] = dict(zip(docs[3:], rng.random(12).tolist(), strict=True))
    return qrels, run


@pytest.mark.parametrize("top", [1, 3, 100_000])  # 100,000: too wide for a table of counts
@pytest.mark.parametrize("k", [None, 3, 10])
def test_ndcg_matches_the_textbook_formula(top: int, k: int | None) -> None:
    qrels, run = _data(top, seed=top)
    metric = "ndcg" if k is None else f"ndcg@{k}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = evaluate(qrels, run, [metric, metric.replace("ndcg", "ndcg_exp")], per_query=True)
    for q, docs in run.items():
        ranked = sorted(docs, key=lambda d: (docs[d], d), reverse=True)
        in_order = [qrels[q].get(d, 0) for d in ranked]
        ideal = list(qrels[q].values())
        expected = ndcg_at_k(in_order, k, ideal=ideal)
        assert ours[q][metric] == pytest.approx(expected, abs=1e-12)
        if top < 1000:  # 2**100000 overflows
            expected_exp = ndcg_at_k(in_order, k, ideal=ideal, gain="exponential")
            assert ours[q][metric.replace("ndcg", "ndcg_exp")] == pytest.approx(
                expected_exp, abs=1e-12
            )
