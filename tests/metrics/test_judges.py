"""Judges and judge.score through the fake server: shared calls, mismatches, NaN reasons."""

from __future__ import annotations

import json
import math
import re

import pytest

import judge
from judge.errors import InputFormatError, JudgeError, UnknownMetricError
from judge.testing import FakeLLMServer
from tests.helpers.judging import ANSWER, CONTEXTS, QUESTION, TRUTH, judge_handler, which


def block(text: str, tag: str):
    return json.loads(re.search(rf"<{tag}>(.*?)</{tag}>", text, re.S).group(1))


def kinds(server: FakeLLMServer) -> list[str]:
    return sorted(which(r.body) for r in server.requests if r.path.endswith("/chat/completions"))


def test_four_core_metrics_share_calls(fake_llm_server, models):
    result = judge.score(QUESTION, ANSWER, CONTEXTS, ground_truth=TRUTH, **models)
    assert set(result.scores) == {
        "faithfulness",
        "answer_relevancy",
        "context_precision",
        "context_recall",
    }
    assert result["faithfulness"] == pytest.approx(2 / 3)  # "It runs on Mars." not found
    assert result["context_recall"] == 1.0
    assert result["context_precision"] == 1.0  # the relevant context comes first
    assert 0 < result["answer_relevancy"] <= 1
    # A claims call per text (answer, ground truth) and one verify call for both texts'
    # claims: 5 chat requests, 1 embedding.
    assert kinds(fake_llm_server) == ["claims", "claims", "grade", "reverse", "verify"]
    assert fake_llm_server.count("/v1/embeddings") == 1
    evidence = result.evidence
    assert evidence["answer_claims"][2] == "It runs on Mars."
    assert evidence["answer_verdicts"][2]["verdict"] == "not_found"
    assert [v["claim"] for v in evidence["truth_verdicts"]] == [0]  # numbered in its own list
    assert len(evidence["reverse_questions"]["similarities"]) == 3
    assert result.usage["total"]["requests"] == 6 and result.usage["total"]["cost"] is None
    assert result.usage["by_judge"]["verify"]["requests"] == 1


def test_grading_call_is_shared_by_three_metrics(fake_llm_server, models):
    result = judge.score(
        QUESTION,
        ANSWER,
        CONTEXTS,
        metrics=["context_precision", "context_relevance", "context_ndcg@2"],
        **models,
    )
    assert kinds(fake_llm_server) == ["grade"]
    assert result.scores == {
        "context_precision": 1.0,
        "context_relevance": 1 / 3,  # grades 2, 1, 0 by shared question words
        "context_ndcg@2": 1.0,
    }
    (request,) = fake_llm_server.requests
    assert block(request.body["messages"][1]["content"], "reference") == ANSWER  # no truth


def test_undefined_cases_are_nan_with_reasons_and_cost_nothing(fake_llm_server, models):
    result = judge.score(
        QUESTION,
        "",
        [],
        metrics=["faithfulness", "answer_relevancy", "context_precision", "context_recall"],
        **models,
    )
    assert all(math.isnan(v) for v in result.scores.values())
    assert result.reasons == {
        "faithfulness": "empty_answer",
        "answer_relevancy": "empty_answer",
        "context_precision": "no_contexts",
        "context_recall": "no_ground_truth",
    }
    assert fake_llm_server.count() == 0


def test_noncommittal_answer_scores_zero_relevancy(fake_llm_server, models):
    result = judge.score(
        QUESTION, "I don't know.", CONTEXTS, metrics=["answer_relevancy"], **models
    )
    assert result["answer_relevancy"] == 0.0 and "answer_relevancy" not in result.reasons
    assert fake_llm_server.count("/v1/embeddings") == 0  # nothing to compare


def test_verdict_count_mismatch_is_reasked_once(fake_llm_server, models):
    calls = []

    def short_once(body: dict) -> str:
        if which(body) == "verify":
            calls.append(body)
            return judge_handler(body, drop_verdict=len(calls) == 1)
        return judge_handler(body)

    fake_llm_server.chat = short_once
    result = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], **models)
    assert result["faithfulness"] == pytest.approx(2 / 3)
    assert len(calls) == 2
    assert "at least 3 items" in calls[1]["messages"][-1]["content"]


def test_persistent_mismatch_is_a_nan_with_the_error_not_a_crash(fake_llm_server, models):
    fake_llm_server.chat = lambda body: judge_handler(body, drop_verdict=True)
    result = judge.score(
        QUESTION,
        ANSWER,
        CONTEXTS,
        ground_truth=TRUTH,
        metrics=["faithfulness", "context_precision"],
        **models,
    )
    assert math.isnan(result["faithfulness"]) and result.reasons["faithfulness"] == "judge_error"
    assert "InvalidOutputError" in result.errors["faithfulness"]
    assert result["context_precision"] == 1.0  # the other judges still count


def test_claims_keep_the_language_and_skip_blank_items(fake_llm_server, models):
    fake_llm_server.chat = lambda body: json.dumps({"claims": ["RAG 是检索增强生成。", "  "]})
    result = judge.score(
        "什么是 RAG？",
        "RAG 是检索增强生成。",
        ["RAG 是检索增强生成。"],
        metrics=["faithfulness"],
        **{**models, "llm": models["llm"]},
    )
    assert result.evidence["answer_claims"] == ["RAG 是检索增强生成。"]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"contexts": "one string"}, InputFormatError, "list of strings"),
        ({"question": " "}, InputFormatError, "non-empty string"),
        ({"answer": 3}, InputFormatError, "answer must be a string"),
        ({"metrics": ["faithfulness", "bleu"]}, UnknownMetricError, "valid names: faithfulness"),
        ({"embeddings": None, "metrics": ["answer_relevancy"]}, JudgeError, "embedding model"),
        ({"llm": "gpt-4o"}, JudgeError, "there is no default"),
    ],
)
def test_bad_arguments_fail_before_any_call(fake_llm_server, models, kwargs, error, message):
    arguments = {"question": QUESTION, "answer": ANSWER, "contexts": CONTEXTS, **models, **kwargs}
    with pytest.raises(error, match=message):
        judge.score(**arguments)
    assert fake_llm_server.count() == 0


def test_default_metrics_without_embeddings_skip_answer_relevancy(fake_llm_server, models):
    result = judge.score(QUESTION, ANSWER, CONTEXTS, ground_truth=TRUTH, llm=models["llm"])
    assert set(result.scores) == {"faithfulness", "context_precision", "context_recall"}


END_TO_END = ["answer_correctness", "hallucination_rate", "citation_accuracy"]


def test_end_to_end_metrics(fake_llm_server, models):
    answer = (
        "Guido van Rossum created Python [1]. Python was released in 1991 [1]. "
        "It runs on Mars [3]. Bananas are yellow [7]."
    )
    result = judge.score(
        QUESTION, answer, CONTEXTS, ground_truth=TRUTH, metrics=END_TO_END, **models
    )
    # Claims vs ground truth: 1 of 4 answer claims is in it; its 1 claim is in the answer.
    assert result["answer_correctness"] == pytest.approx(2 * 0.25 * 1.0 / 1.25)
    assert result["hallucination_rate"] == 1.0  # "It runs on Mars." is in no context
    # Citations: [1] supports claim 1, not claim 2 (that is context 2); [3] does not
    # support Mars; [7] names no context. 1 of 4 citations is right.
    assert result["citation_accuracy"] == 0.25
    checks = result.evidence["citation_checks"]
    assert [c["supported"] for c in checks] == [True, False, False]  # [7] needs no call
    assert result.evidence["citations"][3] == {
        "statement": "Bananas are yellow.",
        "marker": 7,
        "context": None,
    }


def test_end_to_end_metrics_undefined_cases(fake_llm_server, models):
    faithful = "Guido van Rossum created Python. Python was released in 1991."
    result = judge.score(QUESTION, faithful, CONTEXTS, metrics=END_TO_END, **models)
    assert result["hallucination_rate"] == 0.0
    assert result.reasons == {
        "answer_correctness": "no_ground_truth",
        "citation_accuracy": "no_citations",
    }
    assert "citations" not in kinds(fake_llm_server)  # no citation: no call


def _copy_example_reason(body: dict, field: str, index: int) -> str:
    """heuristic_judge's reply with one item's reason replaced by the prompt example's, when
    the prompt shows an example."""
    reply = json.loads(judge_handler(body))
    system = body["messages"][0]["content"]
    example = [line for line in system.splitlines() if line.startswith(f'{{"{field}"')]
    if example:
        reply[field][index]["reason"] = json.loads(example[0])[field][0]["reason"].upper()
    return json.dumps(reply)


def test_a_reason_copied_from_the_example_is_asked_again_without_examples(fake_llm_server, models):
    verify_calls = []

    def copies(body: dict) -> str:
        if which(body) != "verify":
            return judge_handler(body)
        verify_calls.append(body)
        return _copy_example_reason(body, "verdicts", 1)

    fake_llm_server.chat = copies
    result = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], **models)
    assert result["faithfulness"] == pytest.approx(2 / 3)
    first, second = (call["messages"][0]["content"] for call in verify_calls)
    assert "\nExample\n" in first and "Example" not in second
    assert first[:500] == second[:500]  # the same instructions, the example left out
    assert first.splitlines()[-1] == second.splitlines()[-1]
    assert [v["reason"] for v in result.evidence["answer_verdicts"]] == [
        "all words found",
        "all words found",
        "not in any context",
    ]
    assert result.usage["by_judge"]["verify_no_examples"]["requests"] == 1


def test_a_reason_not_copied_costs_no_second_call(fake_llm_server, models):
    result = judge.score(
        QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness", "context_precision"], **models
    )
    assert kinds(fake_llm_server) == ["claims", "grade", "verify"]
    assert set(result.usage["by_judge"]) == {"claims", "context_relevance", "verify"}


def test_copied_grade_reasons_are_graded_again_without_examples(fake_llm_server, models):
    def copies(body: dict) -> str:
        return (
            _copy_example_reason(body, "contexts", 2)
            if which(body) == "grade"
            else (judge_handler(body))
        )

    fake_llm_server.chat = copies
    result = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["context_precision"], **models)
    assert result["context_precision"] == 1.0
    assert [g["reason"] for g in result.evidence["context_grades"]] == [
        "2 shared words",
        "1 shared words",
        "0 shared words",
    ]
    assert kinds(fake_llm_server) == ["grade", "grade"]


def test_a_recorded_reply_that_fails_todays_checks_is_asked_again(
    fake_llm_server, models, tmp_path
):
    import sqlite3

    from judge import Cache
    from judge.errors import CacheMiss

    path = tmp_path / "c.sqlite"
    judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], cache=path, **models)
    # As if recorded when the schema allowed it: one verdict short for three claims (with
    # its checksum, as judge wrote it: an edit without one is a damaged entry).
    from judge.cache.entries import checksum

    with sqlite3.connect(path) as db:
        where = "WHERE prompt = 'verify'"
        key, response = db.execute(f"SELECT key, response FROM judgments {where}").fetchone()
        old = json.loads(response)
        old["choices"][0]["verdicts"].pop()
        text = json.dumps(old)
        db.execute(
            f"UPDATE judgments SET response = ?, response_crc = ? {where}",
            (text, checksum(key, text.encode())),
        )
    with Cache(path, mode="replay") as cache:
        result = judge.score(
            QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], cache=cache, **models
        )
    assert math.isnan(result["faithfulness"])
    error = result.errors["faithfulness"]
    assert "fails the judge's current checks" in error and "at least 3 items" in error
    assert CacheMiss.__name__ in result.errors["faithfulness"]
    before = fake_llm_server.count()
    result = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], cache=path, **models)
    assert result["faithfulness"] == pytest.approx(2 / 3)
    assert fake_llm_server.count() == before + 1  # only the verify call, asked again
    again = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], cache=path, **models)
    assert again["faithfulness"] == result["faithfulness"] and fake_llm_server.count() == before + 1
