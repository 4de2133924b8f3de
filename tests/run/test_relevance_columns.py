"""Graded relevance as a {doc_id: grade} mapping survives columnar formats: Arrow stores
every row's mapping in one struct, so a row reads back the other rows' documents with a
None grade, which means "not judged here", not a bad row."""

import math

import pandas as pd
import pytest

from judge.errors import InputFormatError
from judge.ir import evaluate as ir_evaluate
from judge.run.data import parse_relevance
from judge.run.evaluate import evaluate

ROWS = [
    {"question": "q1", "retrieved_ids": ["d3", "d1", "d7"], "relevance": {"d1": 2, "d9": 1}},
    {"question": "q2", "retrieved_ids": ["d4", "d2"], "relevance": {"d4": 1}},
]


def test_a_none_grade_is_no_judgment():
    assert parse_relevance({"d1": 2, "d4": None}) == {"d1": 2}


def test_graded_relevance_in_parquet_scores_as_in_jsonl(tmp_path):
    pd.DataFrame(ROWS).to_parquet(tmp_path / "rows.parquet")
    pd.DataFrame(ROWS).to_json(tmp_path / "rows.jsonl", orient="records", lines=True)
    metrics = ["ndcg@10", "recall@10"]
    from_parquet = evaluate(str(tmp_path / "rows.parquet"), metrics=metrics, progress=False)
    from_jsonl = evaluate(str(tmp_path / "rows.jsonl"), metrics=metrics, progress=False)
    assert from_parquet.rows_with_errors == 0
    expected = ir_evaluate(
        {"0": {"d1": 2, "d9": 1}, "1": {"d4": 1}},
        {"0": {"d3": 3.0, "d1": 2.0, "d7": 1.0}, "1": {"d4": 2.0, "d2": 1.0}},
        metrics,
    )
    for metric in metrics:
        mean = sum(from_parquet.scores(metric)) / 2
        assert math.isclose(mean, expected[metric])
        assert from_parquet.scores(metric) == from_jsonl.scores(metric)


def test_a_map_column_of_grades_scores_as_a_mapping(tmp_path):
    # An Arrow map<string, int64> column (Parquet, datasets) reads back as (doc, grade)
    # pairs: each row was an error row ("relevance item 0 is a tuple").
    import pyarrow as pa
    import pyarrow.parquet as pq

    kind = pa.map_(pa.string(), pa.int64())
    table = pa.table(
        {
            "question": [r["question"] for r in ROWS],
            "retrieved_ids": [r["retrieved_ids"] for r in ROWS],
            "relevance": pa.array([list(r["relevance"].items()) for r in ROWS], kind),
        }
    )
    pq.write_table(table, tmp_path / "rows.parquet")
    pd.DataFrame(ROWS).to_json(tmp_path / "rows.jsonl", orient="records", lines=True)
    metrics = ["ndcg@10", "recall@10"]
    from_map = evaluate(str(tmp_path / "rows.parquet"), metrics=metrics, progress=False)
    from_jsonl = evaluate(str(tmp_path / "rows.jsonl"), metrics=metrics, progress=False)
    assert from_map.rows_with_errors == 0
    for metric in metrics:
        assert from_map.scores(metric) == from_jsonl.scores(metric)


def test_a_doc_graded_twice_is_an_error_row(tmp_path):
    # JSON text keeps the last of two grades of one key without a word (mrr 0 here).
    (tmp_path / "rows.csv").write_text(
        'question,retrieved_ids,relevance\nq,"[""d1""]","{""d1"": 1, ""d1"": 0}"\n'
        'r,"[""d1""]","{""d1"": 1}"\n'
    )
    result = evaluate(str(tmp_path / "rows.csv"), metrics=["mrr"], progress=False)
    assert result.rows_with_errors == 1
    assert "relevance grades 'd1' twice" in str(result.rows[0].error)
    assert result.scores("mrr") == [1.0]  # (the judged rows')
    with_ints = [{"question": "q", "retrieved_ids": ["1"], "relevance": {1: 1, "1": 0}}]
    with pytest.raises(InputFormatError, match="relevance grades '1' twice"):
        evaluate(with_ints, metrics=["mrr"], progress=False)  # (its only row)


def test_numpy_whole_grades_are_grades():
    import numpy as np

    assert parse_relevance({"d1": np.int64(2), "d2": np.float64(1.0)}) == {"d1": 2, "d2": 1}
    rows = [{"question": "q", "retrieved_ids": ["d1"], "relevance": {"d1": np.int64(1)}}]
    assert evaluate(rows, metrics=["mrr"], progress=False).scores("mrr") == [1.0]


def test_numpy_integer_grades_are_integers():
    # Rows built from pandas or numpy hold numpy ints: np.int64(1) was "not an integer".
    import numpy as np

    rows = [{**ROWS[0], "relevance": {"d1": np.int64(2), "d9": np.int32(1)}}, ROWS[1]]
    assert parse_relevance(rows[0]["relevance"]) == {"d1": 2, "d9": 1}
    result = evaluate(rows, metrics=["ndcg@10"], progress=False)
    assert result.rows_with_errors == 0
    assert result.scores("ndcg@10") == evaluate(ROWS, metrics=["ndcg@10"], progress=False).scores(
        "ndcg@10"
    )


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_doc_graded_twice_in_a_json_row_is_an_error_row(tmp_path, suffix):
    # A JSONL row's relevance object (not text in a cell) kept the last of two grades of
    # one doc without a word, as json.loads does: mrr 0 where the first grade gives 1.
    rows = [
        '{"question": "q", "retrieved_ids": ["d1"], "relevance": {"d1": 1, "d1": 0}}',
        '{"question": "r", "retrieved_ids": ["d1"], "relevance": {"d1": 1}}',
    ]
    text = "\n".join(rows) + "\n" if suffix == ".jsonl" else "[" + ",".join(rows) + "]"
    path = tmp_path / f"rows{suffix}"
    path.write_text(text)
    result = evaluate(str(path), metrics=["mrr"], progress=False)
    assert result.rows_with_errors == 1
    assert "relevance grades 'd1' twice" in str(result.rows[0].error)
    assert result.scores("mrr") == [1.0]


def test_an_object_inside_relevance_text_is_named_as_the_object_it_is():
    # Read as (key, value) pairs to find a doc graded twice, a nested object was named
    # as a list of tuples in the error ("grade [('g', 1)]", "item 0 is a list").
    with pytest.raises(ValueError, match=r"relevance grade \{'g': 1\} of 'd1' is not"):
        parse_relevance('{"d1": {"g": 1}}')
    with pytest.raises(ValueError, match="relevance item 0 is a dict"):
        parse_relevance('[{"a": 1}]')
    with pytest.raises(ValueError, match="relevance grades 'd1' twice"):
        parse_relevance('{"d1": 1, "d1": 0}')
    assert parse_relevance("{}") == {}
    assert parse_relevance('{"d1": 2, "d0": 0}') == {"d1": 2, "d0": 0}


def test_whole_decimal_grades_are_grades_and_other_decimals_are_refused_as_floats_are(tmp_path):
    # A decimal128 column reads back as decimal.Decimal, which judge.ir.evaluate takes as
    # a grade in dicts: each row was an error row ("relevance grade Decimal('2') ... is
    # not an integer").
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = sorted({d for r in ROWS for d in r["relevance"]})
    kind = pa.struct([(d, pa.decimal128(5, 2)) for d in docs])  # as pandas would store it
    grades = [{d: Decimal(g) for d, g in r["relevance"].items()} for r in ROWS]
    table = pa.table(
        {
            "question": [r["question"] for r in ROWS],
            "retrieved_ids": [r["retrieved_ids"] for r in ROWS],
            "relevance": pa.array(grades, kind),
        }
    )
    pq.write_table(table, tmp_path / "rows.parquet")
    metrics = ["ndcg@10", "recall@10"]
    from_decimals = evaluate(str(tmp_path / "rows.parquet"), metrics=metrics, progress=False)
    assert from_decimals.rows_with_errors == 0
    from_ints = evaluate(ROWS, metrics=metrics, progress=False)
    for metric in metrics:
        assert from_decimals.scores(metric) == from_ints.scores(metric)
    assert parse_relevance({"d1": Decimal("2.00"), "d2": Decimal("-0"), "d3": Decimal("1E+1")}) == {
        "d1": 2,
        "d2": 0,
        "d3": 10,
    }
    # A Python row, and a DataFrame of an Arrow map column ((doc, grade) pairs).
    rows = [{**ROWS[0], "relevance": grades[0]}, ROWS[1]]
    assert evaluate(rows, metrics=metrics, progress=False).scores("ndcg@10") == (
        from_ints.scores("ndcg@10")
    )
    pairs = pa.array([list(g.items()) for g in grades], pa.map_(pa.string(), pa.decimal128(4)))
    frame = table.set_column(2, "relevance", pairs).to_pandas()
    assert evaluate(frame, metrics=metrics, progress=False).scores("ndcg@10") == (
        from_ints.scores("ndcg@10")
    )
    # Not a whole number, NaN or infinite: refused as a float that is not a whole number is.
    for bad in ("1.5", "2.000000000000000000001", "NaN", "sNaN", "Infinity", "-Infinity"):
        grade = Decimal(bad)
        with pytest.raises(ValueError, match="is not an integer") as caught:
            parse_relevance({"d1": grade})
        assert str(caught.value) == f"relevance grade {grade!r} of 'd1' is not an integer"
        result = evaluate(
            [{**ROWS[0], "relevance": {"d1": grade}}, ROWS[1]], progress=False, metrics=metrics
        )
        assert result.rows_with_errors == 1 and "is not an integer" in str(result.rows[0].error)
    float_said = "relevance grade 1.5 of 'd1' is not an integer"
    with pytest.raises(ValueError, match=float_said):
        parse_relevance({"d1": 1.5})


def test_a_grade_beyond_a_double_is_an_error_row_not_the_end_of_the_run(tmp_path):
    # judge.ir reads grades as doubles and refuses a larger one: the row's grade reached it
    # unchecked and stopped the whole run, in words of a qrels dict of a query 'q'.
    from decimal import Decimal

    huge = "1" + "0" * 400
    (tmp_path / "rows.csv").write_text(
        'question,retrieved_ids,relevance\nq,"[""d1""]","{""d1"": ' + huge + '}"\n'
        'r,"[""d1""]","{""d1"": 1}"\n'
    )
    for data in (
        str(tmp_path / "rows.csv"),
        [{**ROWS[0], "relevance": {"d1": Decimal(huge)}}, ROWS[1]],
    ):
        result = evaluate(data, metrics=["mrr"], progress=False)
        assert result.rows_with_errors == 1
        said = "relevance grade of 'd1' is too large for a double"
        assert str(result.rows[0].error).startswith(said)
        assert result.scores("mrr") == [1.0]
    # The largest a double holds is a grade, as in judge.ir.
    assert parse_relevance({"d1": int(1.7e308)}) == {"d1": int(1.7e308)}


def test_a_missing_cell_of_a_dataframe_is_read_as_a_missing_key():
    # pandas fills a column a row lacks with NaN: relevance, retrieved_ids and contexts
    # made that row an error row ("relevance must be a list of strings, got float") where
    # the same row as a dict without the key is read (its relevance: no judgments).
    rows = [
        {"question": "q1", "retrieved_ids": ["d3", "d1"], "relevance": {"d1": 2}},
        {"question": "q2", "retrieved_ids": ["d4", "d2"]},
        {"question": "q3", "relevance": {"d4": 1}, "contexts": ["c"]},
    ]
    frame = pd.DataFrame(rows)
    assert frame["relevance"].isna().sum() == 1 and frame["contexts"].isna().sum() == 2
    metrics = ["ndcg@10", "recall@10"]
    from_frame = evaluate(frame, metrics=metrics, progress=False)
    from_dicts = evaluate(rows, metrics=metrics, progress=False)
    assert from_frame.rows_with_errors == from_dicts.rows_with_errors == 0
    for metric in metrics:
        assert str(from_frame.scores(metric)) == str(from_dicts.scores(metric))
