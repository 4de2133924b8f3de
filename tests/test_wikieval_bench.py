"""bench/quality/wikieval.py's bookkeeping: pairs, outcomes, the sign test, the paired summary."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.quality.wikieval import outcome, pair, prior_records, summarise, table

ITEM = {
    "id": "wikieval-00",
    "question": "Question: Who?",
    "question_stripped": "Who?",
    "answer": "Answer: Ada.",
    "answer_stripped": "Ada.",
    "ungrounded_answer": "Bob, in 1901.",
    "poor_answer": "Someone.",
    "context_v1": ["Ada did it."],
    "context_v2": ["Ada did it.", "Unrelated text."],
}


def test_pairs_put_the_preferred_side_first_and_never_leak_the_prefixes():
    faith = pair(ITEM, "faithfulness")
    assert [s["answer"] for s in faith] == ["Ada.", "Bob, in 1901."]
    assert all(s["contexts"] == ["Ada did it."] for s in faith)
    assert [s["answer"] for s in pair(ITEM, "answer_relevance")] == ["Ada.", "Someone."]
    ctx = pair(ITEM, "context_relevance")
    assert [s["contexts"] for s in ctx] == [ITEM["context_v1"], ITEM["context_v2"]]
    for aspect in ("faithfulness", "answer_relevance", "context_relevance"):
        for sample in pair(ITEM, aspect):
            assert not sample["question"].startswith("Question:")
            assert not sample["answer"].startswith("Answer:")


def test_outcome_counts_a_tie_as_half_and_a_missing_side_as_unscored():
    assert outcome([0.9, 0.1]) == 1.0
    assert outcome([0.5, 0.5]) == 0.5
    assert outcome([0.1, 0.9]) == 0.0
    assert outcome([None, 0.9]) is None and outcome([0.9, None]) is None


def _record(tool: str, item: str, aspect: str, scores: list[Any]) -> dict[str, Any]:
    return {
        "tool": tool,
        "item": item,
        "aspect": aspect,
        "scores": scores,
        "errors": [None, None],
        "requests": 2,
        "embed_requests": 0,
        "seconds": 10.0,
        "model": "m",
    }


def test_summary_pairs_the_tools_on_items_both_scored():
    aspect = "faithfulness"
    records = [
        _record("judge", "a", aspect, [1.0, 0.0]),  # judge right
        _record("ragas", "a", aspect, [0.5, 0.5]),  # RAGAS tied
        _record("judge", "b", aspect, [0.2, 0.8]),  # judge wrong
        _record("ragas", "b", aspect, [0.9, 0.1]),  # RAGAS right
        _record("judge", "c", aspect, [1.0, 1.0]),  # judge tied
        _record("ragas", "c", aspect, [None, 0.3]),  # RAGAS failed: not paired
        _record("judge", "d", aspect, [1.0, 0.0]),  # outside the items asked for
    ]
    s = summarise(records, ["a", "b", "c"])
    row = s["aspects"][aspect]
    assert row["judge"]["accuracy"] == pytest.approx(1.5 / 3)
    assert row["judge"]["ties"] == 1 and row["judge"]["tie_rate"] == pytest.approx(1 / 3)
    assert row["ragas"]["accuracy"] == pytest.approx(1.5 / 2)
    assert row["ragas"]["failed"] == 1 and row["ragas"]["scored"] == 2
    assert row["paired"] == {
        "items": 2,
        "judge_better": 1,
        "ragas_better": 1,
        "same": 0,
        "sign_test_p": 1.0,
    }
    assert row["judge"]["requests"] == 6 and s["tools"]["judge"]["requests"] == 6
    assert s["aspects"]["answer_relevance"]["judge"]["run"] == 0
    low, high = row["judge"]["accuracy_95ci"]
    assert 0.0 <= low <= 0.5 <= high <= 1.0
    assert row["judge"]["sign_test_p_vs_chance"] == 1.0  # one win, one loss against people
    text = table(s, "m")
    assert "| 0.50 [" in text and "(1/3 tied) | 0.75 [" in text
    assert "(1/2 tied, 1 failed) | 0.95 | 1 / 1 / 0 (p=1.00) | 6 / 6 |" in text
    assert "not run" in text


def test_prior_outcomes_give_the_same_summary(tmp_path):
    """An earlier summary's outcomes, rebuilt as records, summarise to the same figures."""
    aspect = "faithfulness"
    records = [
        _record("judge", "a", aspect, [0.9, 0.1]),
        _record("judge", "b", aspect, [0.4, 0.4]),
        _record("judge", "c", aspect, [0.1, 0.7]),
        _record("ragas", "a", aspect, [None, 0.2]),
        _record("ragas", "b", aspect, [0.3, 0.1]),
    ]
    first = summarise(records, ["a", "b", "c"])
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(first), encoding="utf-8")
    again = summarise(prior_records(path, "m", ["judge", "ragas"]), ["a", "b", "c"])
    for tool in ("judge", "ragas"):
        for key in ("accuracy", "ties", "failed", "outcomes", "accuracy_95ci"):
            assert again["aspects"][aspect][tool][key] == first["aspects"][aspect][tool][key]
        requests = again["aspects"][aspect][tool]["requests"]
        assert requests == pytest.approx(first["aspects"][aspect][tool]["requests"])
    assert again["aspects"][aspect]["paired"] == first["aspects"][aspect]["paired"]
    only_ragas = prior_records(path, "m", ["ragas"])
    assert {r["tool"] for r in only_ragas} == {"ragas"}
