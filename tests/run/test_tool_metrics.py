"""The tool-call metrics in `judge eval`: computed from each row's `tools_called` and
`expected_tools` columns, as retrieval metrics are from its ids, with no judge model."""

from __future__ import annotations

import json
import math

import pytest

import judge
from judge.errors import InputFormatError
from tests.helpers.cli import run

TOOLS = ["tool_call_precision", "tool_call_recall", "tool_argument_match", "tool_call_order"]
ROWS = [
    {
        "id": "right",
        "question": "Weather in Lyon?",
        "answer": "Sunny.",
        "tools_called": [{"name": "weather", "input_parameters": {"city": "Lyon"}}],
        "expected_tools": [{"name": "weather", "arguments": {"city": "Lyon"}}],
    },
    {
        "id": "reversed",
        "question": "Book a table for two",
        "answer": "Done.",
        "tools_called": json.dumps(  # JSON text, as a CSV cell holds it
            [{"name": "search", "arguments": {"q": "x"}}, {"name": "book", "arguments": {"n": 2.0}}]
        ),
        "expected_tools": [
            {"name": "book", "arguments": {"n": 2}},
            {"name": "search", "arguments": {"q": "y"}},
        ],
    },
    {"id": "unlabelled", "question": "Hi", "answer": "Hello.", "tools_called": []},
    {
        "id": "broken",
        "question": "Hi again",
        "answer": "Hello.",
        "tools_called": "not a list",
        "expected_tools": [],
    },
]


def test_tool_metrics_score_rows_without_a_judge_model():
    result = judge.evaluate(ROWS, metrics=TOOLS, progress=False)
    rows = {r.id: r for r in result.rows}
    assert rows["right"].scores == dict.fromkeys(TOOLS, 1.0)
    assert rows["reversed"].scores == {
        "tool_call_precision": 1.0,
        "tool_call_recall": 1.0,
        "tool_argument_match": 0.5,  # n=2.0 is n=2; q=x is not q=y
        "tool_call_order": 0.5,
    }
    assert all(math.isnan(v) for v in rows["unlabelled"].scores.values())
    assert rows["unlabelled"].reasons == dict.fromkeys(TOOLS, "no_expected_tools")
    assert rows["broken"].reasons == dict.fromkeys(TOOLS, "invalid_tool_calls")
    assert result.summary["tool_call_order"].mean == pytest.approx(0.75)


def test_tool_metrics_beside_retrieval_metrics():
    rows = [{**ROWS[0], "retrieved_ids": ["a", "b"], "relevance": ["b"]}]
    result = judge.evaluate(rows, metrics=["mrr", "tool_call_recall"], progress=False)
    assert result.rows[0].scores == {"mrr": 0.5, "tool_call_recall": 1.0}


def test_a_run_no_row_of_which_gives_expected_tools_is_refused_with_the_column_to_add():
    rows = [{k: v for k, v in ROWS[0].items() if k != "expected_tools"}]
    with pytest.raises(InputFormatError, match="no expected_tools column"):
        judge.evaluate(rows, metrics=["tool_call_recall"], progress=False)


def test_a_misspelt_tool_metric_is_named(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    done = run("eval", data, "--metrics", "tool_call_precison", "--out", tmp_path / "out")
    assert done.returncode == 2
    assert "did you mean 'tool_call_precision'?" in done.stderr
