"""Rows a careless user or a damaged file gives `judge.evaluate`: blank contexts, empty
relevance cells, a user's own `app_error` column, runs in which no row can be scored, and
row errors that say which column was wrong."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

import judge
from judge.errors import InputFormatError
from judge.run.data import load_rows
from judge.run.dry_run import dry_run
from judge.testing import FakeLLMServer


@pytest.fixture
def server(models, fake_llm_server: FakeLLMServer) -> FakeLLMServer:
    return fake_llm_server


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("blank", ["", "  ", "\n\t"])
def test_contexts_all_blank_are_no_contexts(models, server, blank):
    rows = [
        {"question": "q1", "answer": "a b c.", "contexts": [blank], "ground_truth": "g h."},
        {"question": "q2", "answer": "a b c.", "contexts": ["Real text."], "ground_truth": "g."},
    ]
    result = judge.evaluate(
        rows, metrics=["faithfulness", "context_recall"], llm=models["llm"], progress=False
    )
    first = next(iter(result.rows))
    assert math.isnan(first.scores["faithfulness"])
    assert first.reasons == {"faithfulness": "no_contexts", "context_recall": "no_contexts"}


def test_every_row_with_blank_contexts_is_refused_before_any_request(models, server):
    rows = [{"question": "q1", "answer": "a.", "contexts": ["", " "], "ground_truth": "g."}]
    with pytest.raises(InputFormatError, match="would score no row"):
        judge.evaluate(rows, metrics=["faithfulness"], llm=models["llm"], progress=False)
    assert server.count() == 0
    assert not dry_run(rows, metrics=["faithfulness"]).usable


def test_blank_contexts_among_others_are_kept_in_their_ranks():
    (row,), _, _ = load_rows([{"question": "q", "contexts": ["", "x"]}])
    assert row.sample is not None and row.sample.contexts == ("", "x")


def test_an_empty_relevance_cell_is_no_judgments(tmp_path):
    data = write_csv(
        tmp_path / "c8.csv",
        'id,question,retrieved_ids,relevance\nq1,Q1,"[""d1""]","[""d1""]"\nq2,Q2,"[""d1""]",\n',
    )
    result = judge.evaluate(data, metrics=["mrr"], progress=False)
    first, second = list(result.rows)
    assert first.scores["mrr"] == 1.0
    assert second.error is None and second.reasons == {"mrr": "no_relevance_judgments"}


@pytest.mark.parametrize("value", [False, 0, "", None, "  ", {}])
def test_a_user_column_named_app_error_that_holds_no_failure_is_kept(value):
    record = {"id": "q1", "question": "Q1", "retrieved_ids": ["d1"], "relevance": ["d1"]}
    (row,), _, _ = load_rows([{**record, "app_error": value}])
    assert row.error is None and row.sample is not None


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"type": "TimeoutError", "message": "slow"}, "TimeoutError: slow"),
        ("it broke", "it broke"),
    ],
)
def test_an_app_failure_is_still_the_rows_error(value, said):
    (row,), _, _ = load_rows([{"id": "q1", "question": "Q1", "app_error": value}])
    assert row.error is not None and said in row.error and row.id == "q1"


def test_every_row_unreadable_is_refused_before_judging_whatever_the_error_rate(
    tmp_path, models, server
):
    data = write_csv(tmp_path / "c9.csv", 'question,retrieved_ids,relevance\nQ1,"[""d1""]",x\n')
    with pytest.raises(InputFormatError, match="no row can be read"):
        judge.evaluate(data, metrics=["mrr"], progress=False)
    rows = [{"question": "q", "answer": 5, "contexts": ["c"]}]
    with pytest.raises(InputFormatError, match="no row can be read"):
        judge.evaluate(rows, metrics=["faithfulness"], llm=models["llm"], progress=False)
    assert server.count() == 0
    assert not dry_run(rows, metrics=["faithfulness"], max_error_rate=1).usable


def test_a_metric_with_no_score_never_passes_the_gates(tmp_path, models, server):
    # Rows judged, none scored (all unreadable, past the refusal: judge.evaluate_rows
    # without refuse_unscorable, as an experiment whose app failed on every question).
    from judge.run.evaluate import aevaluate_rows
    from judge.run.options import RunSpec

    rows, columns, source = load_rows([{"question": "q", "answer": 5, "contexts": ["c"]}] * 2)
    result = asyncio.run(
        aevaluate_rows(
            rows,
            columns,
            source,
            RunSpec(metrics=["faithfulness"], llm=models["llm"], progress=False),
        )
    )
    outcome = result.write(tmp_path / "out", max_error_rate=1)
    assert outcome.code == 3 and not outcome.passed
    assert any("faithfulness" in why and "no row" in why for _, why in outcome.failures)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["no_scores"] == {"metrics": ["faithfulness"], "failed": True}


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("relevance", "d1", "relevance"),
        ("relevance", {"d2": 1e400}, "not an integer"),
        ("contexts", [None, "x"], "contexts item 0 is null"),
    ],
)
def test_a_row_error_names_the_column_and_keeps_id_and_question(field, value, said):
    record = {"id": "r1", "question": "Q1", "retrieved_ids": ["d1"], field: value}
    (row,), _, _ = load_rows([record])
    assert row.error is not None and said in row.error
    assert "Expecting value" not in row.error and "infinity" not in row.error
    assert (row.id, row.question) == ("r1", "Q1")
