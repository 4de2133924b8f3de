"""`judge ir`'s plain-Python path for small files: the numpy path's values, bit for bit."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge.errors import CoverageWarning, InputFormatError
from judge.ir.evaluate import score_queries
from judge.ir.small import score_small
from judge.ir.trec import read_qrels_by_line, read_run_by_line

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ir-conformance"
METRICS = [
    *("P@1", "P@5", "recall@3", "hit_rate@2", "mrr", "mrr@3", "map", "map@4"),
    *("ndcg", "ndcg@3", "ndcg_exp", "ndcg_exp@5", "r_precision", "bpref", "judged@1", "judged@5"),
]


def both(qrels: Any, run: Any, level: int = 1) -> tuple[Any, Any]:
    """(plain Python, numpy) scores as comparable tuples."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)
        vectorised = score_queries(qrels, run, METRICS, relevance_level=level)
    plain = score_small(qrels, run, METRICS, relevance_level=level)

    def key(s: Any) -> Any:
        values = {n: [float(v) for v in a] for n, a in s.values.items()}
        return s.qids, values, s.missing_queries, s.unjudged_queries

    return key(plain), key(vectorised)


docs = st.sampled_from([f"d{i}" for i in range(12)])
queries = st.sampled_from(["q1", "q2", "q10", "Q"])
scores = st.sampled_from([0.0, -0.0, 0.5, 1.0, 1.0 / 3, -2.0, float("inf"), 7.25])


@settings(max_examples=300, deadline=None)
@given(
    qrels=st.dictionaries(queries, st.dictionaries(docs, st.integers(-1, 4)), min_size=1),
    run=st.dictionaries(queries, st.dictionaries(docs, scores)),
    level=st.integers(1, 3),  # below 1 is refused
)
def test_same_values_as_the_numpy_path(qrels: Any, run: Any, level: int) -> None:
    if not any(qrels.values()):  # queries judged `{}` only: no judged query on either path
        for score in (score_queries, score_small):
            with pytest.raises(InputFormatError, match="no queries"):
                score(qrels, run, METRICS, relevance_level=level)
        return
    plain, vectorised = both(qrels, run, level)
    assert plain == vectorised  # == on floats: bit for bit


@pytest.mark.parametrize(
    ("qrels", "run"),
    [
        ("trec_eval_test/qrels.test", "trec_eval_test/results.test"),
        ("trec_eval_test/qrels.rel_level", "trec_eval_test/results.test"),
    ],
)
def test_conformance_files_score_alike(qrels: str, run: str) -> None:
    judged = read_qrels_by_line(FIXTURES / qrels)
    ranked = read_run_by_line(FIXTURES / run)
    for level in (1, 2):
        plain, vectorised = both(judged, ranked, level)
        assert plain == vectorised


def test_deep_ranks_use_the_c_librarys_log2() -> None:
    # numpy's own log2(1621) differs from the C library's (trec_eval's) in the last bit.
    run = {"q": {f"d{i:05}": float(-i) for i in range(2000)}}
    qrels = {"q": {"d01619": 1, "d00000": 0}}
    plain, vectorised = both(qrels, run)
    assert plain == vectorised
    assert plain[1]["ndcg"] == [1.0 / __import__("math").log2(1621.0)]


def test_no_judged_query_is_an_error() -> None:
    with pytest.raises(InputFormatError, match="no queries"):
        score_small({}, {"q": {"d": 1.0}}, ["map"])
