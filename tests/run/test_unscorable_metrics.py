"""A metric no row can score for want of its fields is refused before any request, naming
the columns found and the mapping to make, as `judge.dry_run` calls such data unusable; a
metric some rows can score keeps today's NaN with reasons in the others."""

from __future__ import annotations

import math
import re

import pytest

import judge
from judge.errors import InputFormatError, JudgeError
from judge.run.dry_run import dry_run
from judge.testing import FakeLLMServer

ROWS = [
    {
        "query": "Who created Python?",
        "response": "Guido van Rossum created Python.",
        "docs": ["Python was created by Guido van Rossum."],
        "reference": "Guido van Rossum.",
    },
    {
        "query": "What colour are ripe bananas?",
        "response": "Ripe bananas are yellow.",
        "docs": ["Ripe bananas turn yellow."],
        "reference": "Yellow.",
    },
]


@pytest.fixture
def server(models, fake_llm_server: FakeLLMServer) -> FakeLLMServer:
    return fake_llm_server


def test_unknown_columns_are_refused_in_keyword_argument_words(models, server):
    with pytest.raises(InputFormatError) as raised:
        judge.evaluate(ROWS, llm=models["llm"], progress=False)
    message = str(raised.value)
    for metric in ("faithfulness", "context_precision", "context_recall"):
        assert metric in message
    assert "2 no_contexts" in message
    assert "columns: query, response, reference, docs" in message
    assert "column_map={'contexts': 'docs'}" in message and "--column" not in message
    assert server.count() == 0
    mapped = judge.evaluate(
        ROWS, llm=models["llm"], column_map={"contexts": "docs"}, progress=False
    )
    assert all(m.scored == 2 for m in mapped.summary.values())


def test_some_metrics_scorable_and_one_not_refuses_naming_only_that_one(models, server):
    rows = [{k: v for k, v in r.items() if k != "reference"} for r in ROWS]
    with pytest.raises(InputFormatError) as raised:
        judge.evaluate(
            rows,
            metrics=["faithfulness", "context_recall"],
            llm=models["llm"],
            column_map={"contexts": "docs"},
            progress=False,
        )
    message = str(raised.value)
    assert "context_recall would score no row (2 no_ground_truth)" in message
    assert "faithfulness" not in message.partition(" would score no row")[0]  # it scores
    assert "no ground_truth column (looked for ground_truth, reference" in message
    assert message.endswith("or leave it out (metrics='faithfulness')")
    assert server.count() == 0
    # The dry run says the same of the same data.
    dry = dry_run(rows, metrics=["faithfulness", "context_recall"], column_map={"contexts": "docs"})
    assert not dry.usable and dry.problems[0] in message


def test_a_column_present_but_empty_everywhere_says_so(models, server):
    rows = [{**r, "docs": []} for r in ROWS]
    with pytest.raises(InputFormatError, match=re.escape("contexts (column 'docs') is empty")):
        judge.evaluate(rows, llm=models["llm"], column_map={"contexts": "docs"}, progress=False)
    assert server.count() == 0


def test_a_metric_scorable_on_some_rows_keeps_its_nan_with_reasons(models, server):
    rows = [ROWS[0], {k: v for k, v in ROWS[1].items() if k != "reference"}]
    result = judge.evaluate(
        rows,
        metrics=["context_recall"],
        llm=models["llm"],
        column_map={"contexts": "docs"},
        progress=False,
    )
    first, second = list(result.rows)
    assert not math.isnan(first.scores["context_recall"])
    assert second.reasons["context_recall"] == "no_ground_truth"


def test_only_unreadable_rows_are_refused_as_such_not_as_a_field_problem(models, server):
    # Every row unreadable: no metric can score one, whatever max_error_rate allows.
    rows = [{"question": "Q?", "answer": "A.", "contexts": "not a list"}]
    with pytest.raises(InputFormatError) as raised:
        judge.evaluate(rows, metrics=["faithfulness"], llm=models["llm"], progress=False)
    assert "no row can be read" in str(raised.value) and "row 0: contexts" in str(raised.value)
    assert "would score no row" not in str(raised.value)
    assert server.count() == 0


def test_retrieval_metrics_without_relevance_are_refused(server):
    rows = [{"question": "Q?", "retrieved_ids": ["d1", "d2"]}]
    with pytest.raises(JudgeError, match=r"mrr would score no row \(1 no_relevance_judgments\)"):
        judge.evaluate(rows, metrics=["mrr"], progress=False)
    assert server.count() == 0
