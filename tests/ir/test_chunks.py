"""From dicts, queries are walked and ranked in chunks: any chunking gives the same values."""

from __future__ import annotations

import math
import warnings
from itertools import pairwise

import numpy as np
import pytest

from judge.errors import InputFormatError
from judge.ir import evaluate, from_dicts

METRICS = [
    "ndcg@10",
    "ndcg",
    "ndcg_exp@5",
    "map",
    "map@5",
    "mrr",
    "P@5",
    "recall@10",
    "r_precision",
]


def _data(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Ragged queries with exact ties, unretrieved and -1 judged docs, a missing query."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(60):
        docs = [f"d{i}" for i in rng.permutation(40)[: rng.integers(2, 30)]]
        scores = rng.integers(0, 6, len(docs)) / 4  # few distinct values: many ties
        run[f"q{q}"] = dict(zip(docs, scores.tolist(), strict=True))
        judged = docs[: rng.integers(1, len(docs))] + [f"u{i}" for i in range(rng.integers(0, 4))]
        grades = rng.integers(-1, 4, len(judged)).tolist()
        qrels[f"q{q}"] = dict(zip(judged, grades, strict=True))
    qrels["missing"] = {"d1": 2}
    run["unjudged"] = {"d1": 1.0}
    return qrels, run


def _evaluate(qrels: object, run: object) -> dict[str, dict[str, float]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dict(evaluate(qrels, run, METRICS, per_query=True))  # type: ignore[arg-type]


@pytest.mark.parametrize("chunk_values", [1, 7, 100, 1000])
def test_chunked_equals_one_chunk(chunk_values: int, monkeypatch: pytest.MonkeyPatch) -> None:
    qrels, run = _data(chunk_values)
    whole = _evaluate(qrels, run)  # some 2,000 values: one chunk
    monkeypatch.setattr(from_dicts, "_CHUNK_VALUES", chunk_values)
    assert len(from_dicts.chunk_bounds(np.full(61, 50))) > 1  # really several chunks
    chunked = _evaluate(qrels, run)
    assert chunked == whole  # bit for bit
    assert any(0 < v[m] < 1 for v in whole.values() for m in METRICS)
    assert all(not math.isnan(v[m]) for v in whole.values() for m in METRICS)


def test_a_bad_grade_in_a_later_chunk_is_reported_before_a_nan_score(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(from_dicts, "_CHUNK_VALUES", 10)
    qrels, run = _data(3)
    run["q1"]["nan-doc"] = math.nan  # an early chunk
    with pytest.raises(InputFormatError, match="run score is NaN for query 'q1'"):
        _evaluate(qrels, run)
    qrels["q50"]["half"] = 1.5  # type: ignore[assignment]  # a later chunk
    with pytest.raises(InputFormatError, match=r"for query 'q50' is not an integer"):
        _evaluate(qrels, run)


def test_chunk_bounds_cover_every_query_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(from_dicts, "_CHUNK_VALUES", 10)
    width = np.array([3, 0, 25, 4, 4, 4, 0, 9, 1])
    bounds = from_dicts.chunk_bounds(width)
    assert bounds[0][0] == 0 and bounds[-1][1] == width.size
    assert all(hi == next_lo for (_, hi), (next_lo, _) in pairwise(bounds))
    assert all(hi > lo for lo, hi in bounds)
    assert from_dicts.chunk_bounds(np.empty(0, dtype=np.int64)) == []
