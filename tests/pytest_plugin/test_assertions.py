"""judge.assert_scores and judge.assert_evaluation on results made by hand: which
thresholds pass, and what a failure says."""

from __future__ import annotations

import math

import pytest

import judge
from judge.errors import JudgeError
from judge.pytest_plugin.assertions import ScoreAssertionError
from judge.run.rows import ResultRow
from judge.run.score import SampleResult
from judge.samples import Sample

EVIDENCE = {
    "answer_claims": ["Paris is in France.", "It has 9 million people."],
    "answer_verdicts": [
        {"claim": 0, "reason": "context 1 says so", "verdict": "supported", "context": 0},
        {"claim": 1, "reason": "no context gives a population", "verdict": "not_found"},
    ],
    "context_grades": [
        {"context": 0, "reason": "answers it", "grade": 3},
        {"context": 1, "reason": "about bananas", "grade": 0},
    ],
    "reverse_questions": {
        "questions": ["Where is Paris?", "How big is Paris?"],
        "noncommittal": False,
        "similarities": [0.91, 0.42],
    },
}


def result(**scores: float) -> SampleResult:
    sample = Sample.create(
        "Where is Paris?", "Paris is in France.", ["Paris is in France.", "Bananas."], None, "p1"
    )
    reasons = {m: "no_ground_truth" for m, v in scores.items() if math.isnan(v)}
    return SampleResult(sample, scores, reasons=reasons, evidence=EVIDENCE)


def failure(res: object, **thresholds: object) -> str:
    with pytest.raises(ScoreAssertionError) as caught:
        judge.assert_scores(res, **thresholds)
    return str(caught.value)


def test_thresholds_met_pass() -> None:
    judge.assert_scores(result(faithfulness=0.5, hallucination_rate=0.0), faithfulness=0.5)


def test_a_failing_score_lists_the_unsupported_claims_with_reasons() -> None:
    text = failure(result(faithfulness=0.5), faithfulness=0.8)
    assert text.splitlines() == [
        "1 of 1 judged score failed for 'p1'",
        "  faithfulness: 0.500, threshold >= 0.8",
        "    answer claim 2 not found: 'It has 9 million people.' (no context gives a population)",
    ]


def test_context_metrics_list_the_contexts_graded_irrelevant() -> None:
    text = failure(result(context_precision=0.5), context_precision=0.9)
    assert "context 2 graded 0 of 3: 'Bananas.' (about bananas)" in text
    assert "context 1" not in text


def test_answer_relevancy_lists_the_reverse_questions() -> None:
    text = failure(result(answer_relevancy=0.66), answer_relevancy=0.8)
    assert "reverse question 2 has similarity 0.420: 'How big is Paris?'" in text


def test_a_rate_where_lower_is_better_is_a_maximum() -> None:
    judge.assert_scores(result(hallucination_rate=0.0), hallucination_rate=0.0)
    text = failure(result(hallucination_rate=1.0), hallucination_rate=0.0)
    assert "hallucination_rate: 1.000, threshold <= 0" in text
    # explicit directions win over the metric's own
    judge.assert_scores(result(faithfulness=0.2), faithfulness=judge.at_most(0.3))
    failure(result(hallucination_rate=0.0), hallucination_rate=judge.at_least(0.5))


def test_names_that_are_not_identifiers_go_in_a_mapping() -> None:
    row = ResultRow(0, "q1", scores={"ndcg@10": 0.4})
    judge.assert_scores(row, {"ndcg@10": 0.3})
    assert "ndcg@10: 0.400, threshold >= 0.5" in failure(row, thresholds={"ndcg@10": 0.5})


def test_a_nan_fails_with_its_reason_unless_allowed() -> None:
    text = failure(result(context_recall=math.nan), context_recall=0.5)
    assert "context_recall: undefined (no_ground_truth), threshold >= 0.5; pass allow_nan" in text
    judge.assert_scores(result(context_recall=math.nan), context_recall=0.5, allow_nan=True)


def test_a_failed_judge_fails_even_when_nan_is_allowed() -> None:
    res = result(faithfulness=math.nan)
    res.reasons["faithfulness"] = "judge_error"
    res.errors["faithfulness"] = "LLMOutputError: the reply was not JSON"
    with pytest.raises(ScoreAssertionError, match="the judge failed: LLMOutputError"):
        judge.assert_scores(res, faithfulness=0.5, allow_nan=True)


def test_a_metric_not_scored_and_a_bad_threshold_say_what_to_do() -> None:
    assert "context_recall: not scored (scored: faithfulness)" in failure(
        result(faithfulness=1.0), context_recall=0.5
    )
    with pytest.raises(JudgeError, match="the threshold of faithfulness is 'high'"):
        judge.assert_scores(result(faithfulness=1.0), faithfulness="high")
    with pytest.raises(JudgeError, match="no thresholds given"):
        judge.assert_scores(result(faithfulness=1.0))
    with pytest.raises(JudgeError, match=r"for a whole evaluation use judge\.assert_evaluation"):
        judge.assert_scores({"faithfulness": 1.0}, faithfulness=0.5)


def test_assert_evaluation_names_each_mean_that_missed_with_its_interval() -> None:
    from judge.run.results import EvaluationResult

    rows = [
        ResultRow(i, f"q{i}", "q", "a", ["c"], scores={"faithfulness": v})
        for i, v in enumerate([1.0, 0.0, 0.5, 0.5])
    ]
    config = {
        "source": "test", "columns": {}, "metrics": ["faithfulness"], "model": None,
        "embeddings": None, "structured_output": None, "prompts": {}, "cache": None,
        "cache_mode": None, "run": "x", "data_rows": 4, "data_sha256": "y",
    }  # fmt: skip
    evaluation = EvaluationResult(rows, ["faithfulness"], config, {})
    judge.assert_evaluation(evaluation, fail_under={"faithfulness": 0.5})
    with pytest.raises(ScoreAssertionError) as caught:
        judge.assert_evaluation(evaluation, fail_under={"faithfulness": 0.6})
    assert "faithfulness: mean 0.500 [" in str(caught.value)
    assert "over 4 rows, threshold >= 0.6" in str(caught.value)


def test_the_regression_gate_without_a_run_store_says_how_runs_get_there(tmp_path) -> None:
    absent = tmp_path / "none.sqlite"
    with pytest.raises(JudgeError) as caught:
        judge.assert_no_regression(tmp_path / "results.jsonl", None, runs=absent)
    assert str(caught.value) == (
        "baseline=None names the run store's pinned baseline, but there is no run store at "
        f"{absent}: judge eval, judge merge and judge experiment record every finished run "
        "there (runs= or JUDGE_RUNS choose the store; --no-record skips it)"
    )
    assert not absent.exists()


def test_a_custom_metric_where_lower_is_better_takes_a_plain_number_as_a_maximum() -> None:
    # found in review: the direction came from the registry, which knows no custom metric
    res = result(leak_rate=0.9)
    res.higher_is_better["leak_rate"] = False
    assert "leak_rate: 0.900, threshold <= 0.2" in failure(res, leak_rate=0.2)


def test_allow_nan_takes_true_or_metric_names_not_a_string() -> None:
    # found in review: a string matched by substring ("faithfulness" in "faithfulness_strict")
    with pytest.raises(JudgeError, match="allow_nan takes True or a collection of metric"):
        judge.assert_scores(
            result(faithfulness=math.nan), faithfulness=0.5, allow_nan="faithfulness_strict"
        )


def test_assert_evaluation_fails_on_undefined_rows_unless_allowed() -> None:
    # found in review: 11 of 12 rows NaN, the mean over the one scored row passed
    from judge.run.results import EvaluationResult

    rows = [ResultRow(0, "q0", "q", "a", ["c"], scores={"faithfulness": 1.0})] + [
        ResultRow(i, f"q{i}", "q", "", ["c"], scores={"faithfulness": math.nan},
                  reasons={"faithfulness": "empty_answer"})
        for i in range(1, 12)
    ]  # fmt: skip
    config = {
        "source": "test", "columns": {}, "metrics": ["faithfulness"], "model": None,
        "embeddings": None, "structured_output": None, "prompts": {}, "cache": None,
        "cache_mode": None, "run": "x", "data_rows": 12, "data_sha256": "y",
    }  # fmt: skip
    evaluation = EvaluationResult(rows, ["faithfulness"], config, {})
    with pytest.raises(ScoreAssertionError) as caught:
        judge.assert_evaluation(evaluation, fail_under={"faithfulness": 0.9})
    assert "faithfulness: mean 1.000" in str(caught.value)
    assert "11 rows undefined (11 empty_answer); pass allow_nan=True" in str(caught.value)
    judge.assert_evaluation(evaluation, fail_under={"faithfulness": 0.9}, allow_nan=True)


def results_file(path, scores: list[dict]) -> str:
    import json

    path.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"q{i}", "scores": s}) + "\n"
            for i, s in enumerate(scores)
        )
    )
    return str(path)


def test_the_regression_gate_fails_when_nothing_could_be_compared(tmp_path) -> None:
    # found in review: NaN p-values (no pairs) passed the gate
    base = results_file(tmp_path / "a.jsonl", [{"faithfulness": 1.0}] * 6)
    undefined = results_file(tmp_path / "b.jsonl", [{"faithfulness": None}] * 6)
    with pytest.raises(ScoreAssertionError, match="faithfulness: no paired scores"):
        judge.assert_no_regression(undefined, base)
    other = results_file(tmp_path / "c.jsonl", [{"context_recall": 1.0}] * 6)
    with pytest.raises(ScoreAssertionError, match="no metric scored in both"):
        judge.assert_no_regression(other, base)
    same = results_file(tmp_path / "d.jsonl", [{"faithfulness": 1.0}] * 6)
    with pytest.raises(ScoreAssertionError, match="context_recall: no paired scores"):
        judge.assert_no_regression(same, base, metrics=["context_recall"])
    judge.assert_no_regression(same, base)
