"""A query judged `{}` (no judgments) is no judged query, on every path that reads qrels."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from judge import ir
from judge.errors import CoverageWarning

QRELS = {"q1": {"d1": 1}, "q2": {}}
RUN = {"q1": {"d1": 2.0}, "q2": {"d1": 1.0}}


def as_source(data: Any, kind: str, how: str, folder: Path) -> Any:
    """The dict itself, or the path of a TREC file holding it."""
    if how == "dict":
        return data
    path = folder / f"{kind}.txt"
    (ir.write_qrels if kind == "qrels" else ir.write_run)(data, path)
    return str(path)


@pytest.mark.parametrize("qrels_as", ["dict", "file"])
@pytest.mark.parametrize("run_as", ["dict", "file"])
def test_a_query_judged_empty_is_ignored_as_in_a_file(tmp_path, qrels_as, run_as):
    qrels = as_source(QRELS, "qrels", qrels_as, tmp_path)
    ranked = as_source(RUN, "run", run_as, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ir.evaluate(qrels, ranked, ["P@1", "map"])
    # Counted as a judged query scoring 0 it halved both means (0.5).
    assert dict(result) == {"P@1": 1.0, "map": 1.0}
    assert result.unjudged_queries == ("q2",) and result.missing_queries == ()
    said = [str(w.message) for w in caught if issubclass(w.category, CoverageWarning)]
    assert said == ["1 run query without judgments, ignored: 'q2'"]
    scores = ir.score_queries(qrels, ranked, ["P@1"])
    assert scores.qids == ["q1"]


def test_a_query_judged_empty_and_not_retrieved_is_nowhere():
    qrels = {"q0": {}, "q1": {"d1": 1, "d2": 0}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", CoverageWarning)  # nothing missing, nothing ignored
        run = {"q1": {"d2": 3.0, "d1": 2.0}}
        result = ir.evaluate(qrels, run, ["P@1", "bpref"], per_query=True)
    assert dict(result) == {"q1": {"P@1": 0.0, "bpref": 0.0}}
