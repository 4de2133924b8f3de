"""`judge.ir.evaluate` on dicts reads ids and values exactly as a TREC file would give them,
or refuses them: an id that is not a string never matches the same id as text, and a score
or grade that is not a number is never parsed or compared as something else."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from judge import ir
from judge.errors import InputFormatError

METRICS = ["P@1", "map", "mrr", "ndcg@3"]


@pytest.fixture
def files(tmp_path):
    """A qrels file and a run file with string ids: q1 judges "1" relevant, ranked first."""
    ir.write_qrels({"q1": {"1": 1}}, tmp_path / "qrels.txt")
    ir.write_run({"q1": {"1": 3.0, "d2": 2.0}}, tmp_path / "run.txt")
    return str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt")


def _sides(files, qrels, run, said=""):
    """The dicts, and the bad dict (named first in `said`) with the other side a TREC file."""
    qrels_file, run_file = files
    yield qrels, run
    if not said.startswith("run:"):
        yield qrels, run_file
    if not said.startswith("qrels:"):
        yield qrels_file, run


@pytest.mark.parametrize(
    ("qrels", "run", "said"),
    [
        ({"q1": {1: 1}}, {"q1": {"1": 3.0, "d2": 2.0}}, "qrels: doc id 1 of query 'q1' is an int"),
        ({"q1": {"1": 1}}, {"q1": {1: 3.0, "d2": 2.0}}, "run: doc id 1 of query 'q1' is an int"),
        ({"q1": {1: 1}}, {"q1": {1: 3.0, "d2": 2.0}}, "qrels: doc id 1 of query 'q1' is an int"),
        (
            {"q1": {np.int64(1): 1}},
            {"q1": {"1": 3.0}},
            "qrels: doc id np.int64(1) of query 'q1' is an int64",
        ),
        ({"q1": {None: 1}}, {"q1": {"1": 3.0}}, "qrels: doc id None of query 'q1' is a NoneType"),
        ({"q1": {"1": 1}}, {"q1": {b"1": 3.0}}, "run: doc id b'1' of query 'q1' is a bytes"),
    ],
)
def test_a_doc_id_that_is_not_a_string_is_refused_naming_query_and_id(files, qrels, run, said):
    # Before: 0.0 everywhere without a word (an int never equals the string of its digits).
    for q, r in _sides(files, qrels, run, said):
        with pytest.raises(InputFormatError) as caught:
            ir.evaluate(q, r, METRICS)
        assert said in str(caught.value)
        assert "str(doc_id)" in str(caught.value)
        with pytest.raises(InputFormatError, match="not a string"):
            ir.score_queries(q, r, METRICS)


@pytest.mark.parametrize(
    ("qrels", "run", "said"),
    [
        ({1: {"1": 1}}, {"q1": {"1": 3.0}}, "qrels: query id 1 is an int"),
        ({"1": {"1": 1}}, {1: {"1": 3.0}}, "run: query id 1 is an int"),
        ({np.int64(7): {"1": 1}}, {"7": {"1": 3.0}}, "qrels: query id np.int64(7) is an int64"),
    ],
)
def test_a_query_id_that_is_not_a_string_is_refused(files, qrels, run, said):
    # Before: a CoverageWarning that the (string) query is missing, or an unjudged one.
    for q, r in _sides(files, qrels, run, said):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a coverage warning instead would fail here
            with pytest.raises(InputFormatError) as caught:
                ir.evaluate(q, r, METRICS)
        assert said in str(caught.value) and "str(query_id)" in str(caught.value)


def test_numpy_strings_are_strings(files):
    qrels = {np.str_("q1"): {np.str_("1"): 1}}
    run = {np.str_("q1"): {np.str_("1"): 3.0, np.str_("d2"): 2.0}}
    expected = {m: 1.0 for m in METRICS}
    for q, r in _sides(files, qrels, run):
        assert ir.evaluate(q, r, METRICS) == expected


@pytest.mark.parametrize(
    "scores",
    [
        {"d1": "1", "d2": "1.0", "d0": 1},  # was P@1 1.0 from dicts, 0.0 with a qrels file
        {"d1": "1.0", "d2": "1.0", "d0": "1.0"},  # was KeyError: 1.0
        {"d1": " 1", "d2": "1", "d0": "1e0"},
        {"d1": b"1", "d2": 1.0},
        {"d1": None, "d2": 1.0},
    ],
)
def test_a_run_score_that_is_not_a_number_is_refused(tmp_path, scores):
    ir.write_qrels({"q1": {"d1": 1}}, tmp_path / "qrels.txt")
    for qrels in ({"q1": {"d1": 1}}, str(tmp_path / "qrels.txt")):
        with pytest.raises(InputFormatError) as caught:
            ir.evaluate(qrels, {"q1": scores}, ["P@1", "mrr"])
        bad = next(v for v in scores.values() if not isinstance(v, int | float))
        said = f"run: score {bad!r} of doc "
        assert said in str(caught.value) and "of query 'q1' is not a number" in str(caught.value)


@pytest.mark.parametrize("grade", ["1", " 1", "2.0", b"1", None, "inf"])
def test_a_grade_that_is_not_a_number_is_refused(tmp_path, grade):
    # Before: "1", "2.0" and b"1" were parsed as grades, "inf" raised OverflowError.
    ir.write_run({"q1": {"d1": 3.0, "d2": 2.0}}, tmp_path / "run.txt")
    for run in ({"q1": {"d1": 3.0, "d2": 2.0}}, str(tmp_path / "run.txt")):
        with pytest.raises(InputFormatError) as caught:
            ir.evaluate({"q1": {"d1": 0, "d2": grade}}, run, METRICS)
        assert f"qrels: grade {grade!r} of doc 'd2' of query 'q1' is not a number" in str(
            caught.value
        )


@pytest.mark.parametrize("grade", [float("inf"), float("-inf"), np.float64("inf")])
def test_an_infinite_grade_is_refused(tmp_path, grade):
    # Before: OverflowError: cannot convert float infinity to integer.
    ir.write_run({"q1": {"d1": 3.0, "d2": 2.0}}, tmp_path / "run.txt")
    for run in ({"q1": {"d1": 3.0, "d2": 2.0}}, str(tmp_path / "run.txt")):
        with pytest.raises(InputFormatError, match="for query 'q1' is not an integer"):
            ir.evaluate({"q1": {"d1": 0, "d2": grade}}, run, METRICS)


@pytest.mark.parametrize(
    ("qrels", "run", "said"),
    [
        ({"q1": ["d1"]}, {"q1": {"d1": 2.0}}, "qrels: query 'q1' holds a list, not a dict"),
        ({"q1": {"d1"}}, {"q1": {"d1": 2.0}}, "qrels: query 'q1' holds a set, not a dict"),
        ({"q1": "d1"}, {"q1": {"d1": 2.0}}, "qrels: query 'q1' holds a str, not a dict"),
        ({"q1": {"d1": 1}}, {"q1": ["d1", "d2"]}, "run: query 'q1' holds a list, not a dict"),
    ],
)
def test_a_query_whose_docs_are_not_a_dict_is_refused(files, qrels, run, said):
    # Before: AttributeError: 'list' object has no attribute 'values'.
    for q, r in _sides(files, qrels, run, said):
        with pytest.raises(InputFormatError) as caught:
            ir.evaluate(q, r, METRICS)
        assert said in str(caught.value)


def test_numpy_numbers_and_bools_are_the_numbers_they_are(tmp_path):
    qrels = {"q1": {"d1": 0, "d2": 1, "d3": 2}}
    run = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0, "d4": 1.0}}
    expected = ir.evaluate(qrels, run, METRICS, relevance_level=2)
    numpy_qrels = {"q1": {d: np.int64(g) for d, g in qrels["q1"].items()}}
    numpy_run = {"q1": {d: np.float32(s) for d, s in run["q1"].items()}}
    assert ir.evaluate(numpy_qrels, numpy_run, METRICS, relevance_level=np.int64(2)) == expected
    numpy_level = ir.score_queries(numpy_qrels, run, METRICS, relevance_level=np.int32(2))
    int_level = ir.score_queries(qrels, run, METRICS, relevance_level=2)
    assert {m: v.tolist() for m, v in numpy_level.values.items()} == {
        m: v.tolist() for m, v in int_level.values.items()
    }
    # A bool is a Python int: True is grade 1, as write_qrels writes it to a file.
    bools = {"q1": {"d1": False, "d2": True, "d3": 2}}
    assert ir.evaluate(bools, run, METRICS) == ir.evaluate(qrels, run, METRICS)
    ir.write_qrels(bools, tmp_path / "qrels.txt")
    assert ir.evaluate(str(tmp_path / "qrels.txt"), run, METRICS) == ir.evaluate(
        qrels, run, METRICS
    )


def test_int_scores_beyond_doubles_tie_as_the_doubles_they_are(tmp_path):
    # 2**53 + 1 and 2**53 are one double: trec_eval (and a run file) ties them, by doc id.
    run = {"q1": {"a": 2**53 + 1, "c": 2**53 + 1, "b": 2**53, "d": 5}}
    ir.write_run(run, tmp_path / "run.txt")
    for relevant, rank in (("a", 3), ("b", 2), ("c", 1)):
        qrels = {"q1": {relevant: 1}}
        assert ir.evaluate(qrels, run, ["mrr"])["mrr"] == 1 / rank
        assert ir.evaluate(qrels, str(tmp_path / "run.txt"), ["mrr"])["mrr"] == 1 / rank


def test_a_number_too_large_for_a_double_is_refused():
    with pytest.raises(InputFormatError, match=r"run: score 1000\d+ of doc 'd1' .* too large"):
        ir.evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 10**400}}, METRICS)
