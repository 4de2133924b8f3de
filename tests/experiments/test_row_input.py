"""The whole test set row as the app's input: an app whose one parameter is named `row` is
given the row (a dict of the test set's columns), any other the question (a str)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from judge import experiment
from judge.experiments.app import AppError, as_app
from tests.helpers import apps
from tests.helpers.cli import run as run_cli

COLUMNS = ["category", "ground_truth", "id", "question", "relevance"]


def questions() -> list[dict[str, Any]]:
    return [{**q, "category": f"cat-{q['id']}"} for q in apps.QUESTIONS]


@pytest.mark.parametrize("app", [apps.by_row, apps.async_by_row, apps.RowPipeline()])
def test_an_app_with_a_row_parameter_is_given_the_row_sync_async_or_an_object(app, tmp_path):
    result = experiment(app, questions(), out=tmp_path / "out", metrics=["mrr"], progress=False)
    rows = [
        json.loads(line)
        for line in (tmp_path / "out" / "app_outputs.jsonl").read_text().splitlines()
    ]
    for row, item in zip(rows, questions(), strict=True):
        assert row["seen"] == COLUMNS  # every column of the test set, under judge's names
        assert row["expected"] == item["ground_truth"]
        # What the app did to its row stays out of the outputs.
        assert row["ground_truth"] == item["ground_truth"]
        assert row["relevance"] == item["relevance"]
        assert row["answer"] == apps.answer(item["question"])["answer"]
    assert result.config.app["input"] == "row"
    assert result.summary["mrr"].scored == 5


@pytest.mark.parametrize("app", [apps.answer, apps.async_answer, apps.Pipeline()])
def test_any_other_app_is_given_the_question_as_before(app, tmp_path):
    result = experiment(app, questions(), out=tmp_path / "out", metrics=["mrr"], progress=False)
    assert result.config.app["input"] == "question"


def test_a_renamed_column_reaches_the_row_under_judges_name(tmp_path):
    data = [
        {
            "query": q["question"],
            "qid": q["id"],
            "reference": q["ground_truth"],
            "relevance": q["relevance"],
        }
        for q in apps.QUESTIONS
    ]
    experiment(
        apps.by_row,
        data,
        out=tmp_path / "out",
        metrics=["mrr"],
        column_map={"question": "query", "id": "qid"},
        progress=False,
    )
    first = json.loads((tmp_path / "out" / "app_outputs.jsonl").open().readline())
    assert first["seen"] == ["ground_truth", "id", "question", "relevance"]
    assert first["expected"] == apps.QUESTIONS[0]["ground_truth"]


def test_an_argument_typed_as_the_other_form_says_what_to_change():
    def typed_mapping(example: dict[str, Any]) -> dict[str, Any]:
        return apps.answer(example["question"])

    def typed_str(row: str) -> dict[str, Any]:
        return apps.answer(row)

    with pytest.raises(AppError, match=r"name it 'row' to be given the test set's row"):
        as_app(typed_mapping)
    with pytest.raises(AppError, match=r"annotated str: rename it \(e.g. question\)"):
        as_app(typed_str)
    assert as_app(apps.by_row).takes_row and not as_app(apps.answer).takes_row

    def untyped(row):
        return apps.answer(row["question"])

    assert as_app(untyped).takes_row


def test_the_cli_gives_a_row_app_its_rows(tmp_path):
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in questions()), encoding="utf-8")
    shown = run_cli(
        "experiment",
        str(data),
        "--app",
        "tests.helpers.apps:by_row",
        "--out",
        str(tmp_path / "out"),
        "--no-progress",
    )
    assert shown.returncode == 0, shown.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["config"]["app"]["input"] == "row"
    rows = [
        json.loads(line)
        for line in (tmp_path / "out" / "app_outputs.jsonl").read_text().splitlines()
    ]
    assert [r["seen"] for r in rows] == [COLUMNS] * 5


def test_answers_made_from_the_question_are_not_resumed_as_a_row_apps():
    # found in review: an app renamed to take `row` (same target and source hash) would
    # have resumed the answers it made from the question
    from judge.experiments.calls import app_key

    by_question, by_row = as_app(apps.answer), as_app(apps.by_row)
    assert not by_question.takes_row and by_row.takes_row
    same_source = dataclasses.replace(by_row, target=by_question.target)
    assert app_key(same_source) != app_key(by_question)
