"""judge.evaluate over datasets, frames and files: columns, bad rows, resume, summaries."""

from __future__ import annotations

import json
import math

import datasets
import numpy as np
import pandas
import pytest

from judge import ir
from judge.errors import InputFormatError
from judge.run.evaluate import evaluate
from judge.stats import bootstrap_ci
from tests.helpers.judging import ANSWER, CONTEXTS, GOOD, QUESTION, TRUTH


def test_list_of_dicts_with_bad_rows_reported_by_number(fake_llm_server, models):
    rows = [
        GOOD,
        {"question": "", "answer": "x"},
        {**GOOD, "contexts": "not a list"},
        {**GOOD, "answer": 42},
        {"answer": "no question"},
        GOOD,
    ]
    result = evaluate(rows, **models, progress=False)
    assert [r.row for r in result.rows] == list(range(6))
    errors = {r.row: r.error for r in result.rows if r.error}
    assert set(errors) == {1, 2, 3, 4}
    assert "non-empty string" in errors[1] and "list of strings" in errors[2]
    assert "answer must be a string" in errors[3]
    summary = result.summary["faithfulness"]
    assert summary.scored == 2 and summary.errored == 4
    assert summary.mean == pytest.approx(2 / 3)
    assert result.rows_with_errors == 4
    assert result.rows[1].reasons["faithfulness"] == "row_error"


def test_ragas_column_names_in_a_datasets_dataset(models):
    data = datasets.Dataset.from_list(
        [
            {
                "user_input": QUESTION,
                "response": ANSWER,
                "retrieved_contexts": CONTEXTS,
                "reference": TRUTH,
            }
        ]
        * 3
    )
    result = evaluate(data, metrics=["faithfulness", "context_recall"], **models, progress=False)
    assert result.config["columns"]["question"] == "user_input"
    assert [r.scores["context_recall"] for r in result.rows] == [1.0, 1.0, 1.0]
    frame = result.to_pandas()
    assert list(frame["faithfulness"]) == pytest.approx([2 / 3] * 3)
    assert result.to_dataset().num_rows == 3


def test_dataframe_column_map_and_split_required(models):
    frame = pandas.DataFrame([{"q": QUESTION, "a": ANSWER, "ctx": CONTEXTS}])
    result = evaluate(
        frame,
        metrics=["faithfulness"],
        **models,
        progress=False,
        column_map={"question": "q", "answer": "a", "contexts": "ctx"},
    )
    assert result.rows[0].scores["faithfulness"] == pytest.approx(2 / 3)
    with pytest.raises(InputFormatError, match=r"pass one, e.g. data\['train'\]"):
        evaluate(datasets.DatasetDict({"train": datasets.Dataset.from_list([GOOD])}), **models)


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_files_of_every_supported_type(tmp_path, models, suffix):
    path = tmp_path / f"data{suffix}"
    rows = [GOOD, {**GOOD, "id": "second"}]
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        frame = pandas.DataFrame([{**r, "contexts": json.dumps(r["contexts"])} for r in rows])
        if suffix == ".csv":
            frame.to_csv(path, index=False)
        else:
            pandas.DataFrame(rows).to_parquet(path)
    result = evaluate(path, metrics=["context_precision"], **models, progress=False)
    assert [r.scores["context_precision"] for r in result.rows] == [1.0, 1.0]
    assert result.rows[1].id == "second"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "absent.jsonl", "no such file"),
        (
            lambda p: (p / "x.jsonl").write_text('{"question": 1}\n{oops\n') and p / "x.jsonl",
            "x.jsonl:2: not JSON",
        ),
        (lambda p: (p / "x.txt").write_text("hi") and p / "x.txt", "unsupported file type"),
        (lambda p: [{"text": "no question column"}], "no question column"),
        (lambda p: [], "no rows"),
    ],
)
def test_whole_input_problems_fail_before_any_call(
    tmp_path, fake_llm_server, models, make, message
):
    with pytest.raises(InputFormatError, match=message):
        evaluate(make(tmp_path), **models)
    assert fake_llm_server.count() == 0


def test_retrieval_columns_add_trec_eval_metrics(models):
    rows = [
        {**GOOD, "retrieved_ids": ["d3", "d1", "d2"], "relevance": {"d1": 2, "d9": 1}},
        {**GOOD, "retrieved_ids": ["d1"], "relevance": ["d1"]},
        {**GOOD, "retrieved_ids": ["d1"], "relevance": []},
    ]
    result = evaluate(
        rows, metrics=["mrr", "recall@2", "ndcg@3", "faithfulness"], **models, progress=False
    )
    first, second, third = (r.scores for r in result.rows)
    assert first["mrr"] == 0.5 and first["recall@2"] == 0.5
    assert second == {**second, "mrr": 1.0, "recall@2": 1.0, "ndcg@3": 1.0}
    assert math.isnan(third["mrr"]) and result.rows[2].reasons["mrr"] == "no_relevance_judgments"
    with pytest.raises(InputFormatError, match="need retrieval columns"):
        evaluate([GOOD], metrics=["mrr"], **models)


def test_retrieval_only_needs_no_model(fake_llm_server):
    result = evaluate(
        [{"question": "q", "retrieved_ids": ["a", "b"], "relevance": ["b"]}], progress=False
    )
    scores = result.rows[0].scores
    assert list(scores) == list(ir.DEFAULT_METRICS)  # the one default list of judge ir too
    assert scores["mrr"] == 0.5 and scores["recall@10"] == 1.0 and scores["P@5"] == 0.2
    assert scores["ndcg@10"] == pytest.approx(0.6309297535714575)


def test_checkpoint_resumes_without_new_requests(tmp_path, fake_llm_server, models):
    # Distinct rows, so no request is shared between rows: 6 per row (5 chat, 1 embedding).
    rows = [
        {**GOOD, "id": str(i), "question": f"{QUESTION} ({i})", "answer": f"{ANSWER} Row {i} ends."}
        for i in range(4)
    ]
    checkpoint = tmp_path / "checkpoint.jsonl"
    first = evaluate(rows, **models, checkpoint=checkpoint, progress=False)
    made = fake_llm_server.count()
    assert made == 4 * 6
    lines = checkpoint.read_text().splitlines()
    assert len(lines) == 4
    checkpoint.write_text("\n".join(lines[:2]) + '\n{"run": "torn li')  # killed mid-write
    second = evaluate(rows, **models, checkpoint=checkpoint, progress=False)
    assert second.config["resumed_rows"] == 2
    assert fake_llm_server.count() - made == 2 * 6  # only the two lost rows, no cache here
    assert [r.scores for r in second.rows] == [r.scores for r in first.rows]
    third = evaluate(
        rows, metrics=["faithfulness"], **models, checkpoint=checkpoint, progress=False
    )
    assert third.config["resumed_rows"] == 0  # other metrics: other run, nothing reused


def test_summary_counts_nan_by_reason(models):
    rows = [GOOD, {**GOOD, "ground_truth": None}, {**GOOD, "contexts": []}]
    result = evaluate(rows, metrics=["context_recall"], **models, progress=False)
    summary = result.summary["context_recall"]
    assert summary.scored == 1 and summary.errored == 0
    assert summary.nan == {"no_contexts": 1, "no_ground_truth": 1}
    assert "no_contexts 1, no_ground_truth 1" in result.table()


def test_bootstrap_interval_is_seeded_and_sane():
    values = np.random.default_rng(1).random(200)
    low, high = bootstrap_ci(values)
    assert low < values.mean() < high and high - low < 0.2
    assert bootstrap_ci(values) == (low, high)
    assert all(math.isnan(v) for v in bootstrap_ci(np.array([0.5])))  # one row: none
    assert all(math.isnan(v) for v in bootstrap_ci(np.array([])))


def test_writers(tmp_path, models):
    result = evaluate(
        [GOOD, {**GOOD, "contexts": []}], metrics=["faithfulness"], **models, progress=False
    )
    result.write_jsonl(tmp_path / "r.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert lines[1]["scores"]["faithfulness"] is None
    assert lines[1]["reasons"]["faithfulness"] == "no_contexts"
    result.write_csv(tmp_path / "r.csv")
    frame = pandas.read_csv(tmp_path / "r.csv")
    assert math.isnan(frame["faithfulness"][1]) and frame["faithfulness_reason"][1] == "no_contexts"
    result.write_parquet(tmp_path / "r.parquet")
    assert pandas.read_parquet(tmp_path / "r.parquet")["faithfulness"][0] == pytest.approx(2 / 3)
