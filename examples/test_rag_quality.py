"""RAG quality as ordinary tests: the shop app of rag_app.py, judged by judge's pytest plugin.

Record the judgments once, with a model (the cache is .judge/cache.sqlite):

    pytest examples/test_rag_quality.py --judge-model openai/gpt-4o-mini

and pin a baseline run to hold the whole set to (`judge runs baseline ID`; see the last
test); then replay them in CI, for free and with the same verdicts (a judgment missing
from the cache fails its test, nothing is sent):

    pytest examples/test_rag_quality.py --judge-model openai/gpt-4o-mini --judge-replay
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import judge
from judge.pytest_plugin import cases

HERE = Path(__file__).parent
QUESTIONS = HERE / "questions.jsonl"  # id, question, ground_truth (and relevance labels)


def ask(question: str) -> dict:
    """The app under test (examples/rag_app.py's baseline pipeline)."""
    import sys

    sys.path.insert(0, str(HERE))
    from rag_app import baseline

    return baseline(question)


@pytest.mark.parametrize("case", cases(QUESTIONS))
def test_the_answer_is_grounded_in_what_was_retrieved(rag_judge, case):
    reply = ask(case["question"])
    result = rag_judge.score(
        case["question"],
        reply["answer"],
        reply["contexts"],
        case["ground_truth"],
        metrics=["faithfulness", "hallucination_rate"],
        sample_id=case["id"],
    )
    # A number is a minimum where higher is better, a maximum where lower is (rates);
    # judge.at_least / judge.at_most say it explicitly. On failure the message lists the
    # claims the contexts do not support, with the judge's reasons.
    judge.assert_scores(result, faithfulness=0.8, hallucination_rate=judge.at_most(0.0))


def test_the_whole_set_does_not_regress(rag_judge):
    rows = [{**case.values[0], **ask(case.values[0]["question"])} for case in cases(QUESTIONS)]
    result = rag_judge.evaluate(rows, metrics=["faithfulness", "context_recall"])
    judge.assert_evaluation(result, fail_under={"faithfulness": 0.5})
    # Held to a baseline run: JUDGE_BASELINE (a run id or name of the run store, or an
    # output folder), else the run pinned with `judge runs baseline ID`. It fails only on
    # a significant drop (paired test over the shared questions, Holm across metrics).
    # Six questions can show a drop of one metric at alpha 0.05 (six are needed), not of
    # two under Holm's adjustment (seven): a gate that could not fail is refused.
    judge.assert_no_regression(
        result, os.environ.get("JUDGE_BASELINE"), alpha=0.05, metrics=["faithfulness"]
    )
