"""`judge.run.gates.Gates`: gate strings parsed with their direction, errors in the
caller's words, --fail-under floors refused on a metric where lower is better, and the
bounds applied to means."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import pytest

import judge
from judge.errors import JudgeError
from judge.pytest_plugin.assertions import ScoreAssertionError
from judge.run.gates import CLI_WORDS, Bound, Gates, good_side, parse_gate
from judge.run.results import EvaluationResult
from judge.run.rows import ResultRow
from tests.helpers.cli import run

CONFIG = {
    "source": "test", "columns": {}, "metrics": ["faithfulness", "hallucination_rate"],
    "model": None, "embeddings": None, "structured_output": None, "prompts": {},
    "cache": None, "cache_mode": None, "run": "x", "data_rows": 4, "data_sha256": "y",
}  # fmt: skip


def evaluation(faithfulness: float, hallucination: float) -> EvaluationResult:
    rows = [
        ResultRow(
            i, f"q{i}", "q", "a", ["c"],
            scores={"faithfulness": faithfulness, "hallucination_rate": hallucination},
        )
        for i in range(4)
    ]  # fmt: skip
    return EvaluationResult(rows, ["faithfulness", "hallucination_rate"], CONFIG, {})


def test_gate_strings_carry_their_direction() -> None:
    assert parse_gate("faithfulness>=0.8") == Bound("faithfulness", 0.8)
    assert parse_gate(" hallucination_rate <= 0.05 ") == Bound("hallucination_rate", 0.05, True)
    assert parse_gate("ndcg@10>=0.5") == Bound("ndcg@10", 0.5)
    assert str(parse_gate("hallucination_rate<=0.05")) == "hallucination_rate<=0.05"
    cap = parse_gate("hallucination_rate<=0.05")
    assert cap.passes(0.02) and cap.passes(0.05) and not cap.passes(0.2)
    assert not cap.passes(math.nan) and not Bound("faithfulness", 0.5).passes(math.nan)


@pytest.mark.parametrize("text", ["faithfulness=0.8", "faithfulness>0.8", ">=0.8", "f>=high"])
def test_a_malformed_gate_says_how_to_write_one_in_the_callers_words(text: str) -> None:
    with pytest.raises(JudgeError, match=r"gates=\['.*'\]: write a gate as METRIC>=VALUE") as py:
        Gates.of([text])
    assert "gates=['hallucination_rate<=0.05']" in str(py.value)
    with pytest.raises(JudgeError, match=r"--gate '.*': write a gate as METRIC>=VALUE") as cli:
        Gates.of([text], words=CLI_WORDS)
    assert "--gate 'hallucination_rate<=0.05'" in str(cli.value)


def test_a_floor_on_a_lower_is_better_metric_is_refused_naming_the_cap() -> None:
    with pytest.raises(JudgeError) as cli:
        Gates.of(fail_under={"hallucination_rate": 0.1}, words=CLI_WORDS)
    assert str(cli.value) == (
        "--fail-under hallucination_rate=0.1: lower is better for hallucination_rate, so a "
        "floor would fail the runs that are good; cap it with --gate 'hallucination_rate<=0.1'"
    )
    with pytest.raises(JudgeError, match=r"cap it with gates=\['hallucination_rate<=0.1'\]"):
        evaluation(1.0, 0.0).write("never", fail_under={"hallucination_rate": 0.1})
    assert Gates.of(fail_under={"faithfulness": 0.8}).bounds == (Bound("faithfulness", 0.8),)


def test_the_gates_are_one_frozen_value() -> None:
    gates = Gates.of(["faithfulness>=0.8"], max_error_rate=0.1)
    assert gates == Gates((Bound("faithfulness", 0.8),), 0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        gates.max_error_rate = 0.5  # type: ignore[misc]
    with pytest.raises(JudgeError, match="--max-error-rate 2: give a share from 0 to 1"):
        Gates(max_error_rate=2, words=CLI_WORDS)
    with pytest.raises(JudgeError, match="give a list of gates"):
        Gates.of("faithfulness>=0.8")  # type: ignore[arg-type]


def test_a_number_is_on_the_metrics_good_side() -> None:
    assert good_side("faithfulness", 0.8) == Bound("faithfulness", 0.8)
    assert good_side("hallucination_rate", 0.1) == Bound("hallucination_rate", 0.1, True)


@pytest.mark.parametrize(
    ("faithfulness", "hallucination", "passes"),
    [(1.0, 0.02, True), (1.0, 0.5, False), (0.5, 0.0, False)],
)
def test_assert_evaluation_and_write_give_one_verdict(
    tmp_path, faithfulness: float, hallucination: float, passes: bool
) -> None:
    result = evaluation(faithfulness, hallucination)
    gates = ["faithfulness>=0.8", "hallucination_rate<=0.1"]
    outcome = result.write(tmp_path / "out", gates=gates)
    assert outcome.passed is passes
    try:
        judge.assert_evaluation(result, gates=gates)
        asserted = True
    except ScoreAssertionError:
        asserted = False
    assert asserted is passes
    # the mapping form, a number on each metric's good side, agrees
    mapping = {"faithfulness": 0.8, "hallucination_rate": 0.1}
    try:
        judge.assert_evaluation(result, fail_under=mapping)
        mapped = True
    except ScoreAssertionError:
        mapped = False
    assert mapped is passes


def test_a_missed_cap_is_said_with_its_direction(tmp_path) -> None:
    outcome = evaluation(1.0, 0.5).write(tmp_path / "out", gates=["hallucination_rate<=0.1"])
    assert outcome.code == 1
    assert outcome.missed == ("hallucination_rate = 0.5000 > 0.1",)
    assert outcome.summary["thresholds"] == {
        "required": {},
        "gates": ["hallucination_rate<=0.1"],
        "missed": ["hallucination_rate = 0.5000 > 0.1"],
    }
    with pytest.raises(ScoreAssertionError, match=r"hallucination_rate: mean 0.500 .* <= 0.1"):
        judge.assert_evaluation(evaluation(1.0, 0.5), gates=["hallucination_rate<=0.1"])


@pytest.mark.parametrize(
    "text", ["faithfulness>=-inf", "hallucination_rate<=inf", "faithfulness>=1e999", "f>=Infinity"]
)
def test_a_gate_that_cannot_fail_or_pass_is_refused(text: str) -> None:
    """A bound of ±inf passes or fails every run whatever its scores, and summary.json
    would record it as -Infinity, which is not JSON."""
    with pytest.raises(JudgeError, match="write a gate as METRIC>=VALUE"):
        Gates.of([text], words=CLI_WORDS)
    with pytest.raises(JudgeError, match="fail_under faithfulness: give a finite number"):
        Gates.of(fail_under={"faithfulness": -math.inf})
    with pytest.raises(JudgeError, match=r"faithfulness>=-inf'\]: give a finite number"):
        Gates.of([Bound("faithfulness", -math.inf)])


WORDS_MODULE = """
from judge.metrics.registry import Metric, MetricScore


async def words(judgments):
    return MetricScore(min(1.0, len(judgments.sample.answer.split()) / 10))


answer_words = Metric("answer_words", "answer length", words, higher_is_better=False)
"""
LONG_ANSWER = {"question": "Q?", "answer": "one two three four five six seven eight nine"}


def test_a_custom_metric_where_lower_is_better_takes_no_floor(tmp_path, fake_llm_server):
    """A metric of the user's own where lower is better (answer_words: 0.9 is bad) passed
    `fail_under={'answer_words': 0.5}` and a plain number of assert_evaluation as a floor:
    a green run on the bad side, while assert_scores capped the same metric."""
    module = tmp_path / "words_metric.py"
    module.write_text(WORDS_MODULE)
    namespace: dict = {"__name__": "words_metric"}
    exec(compile(WORDS_MODULE, str(module), "exec"), namespace)
    llm = judge.LLM("openai/m", api_base=fake_llm_server.base_url, api_key="k")
    rows = [{**LONG_ANSWER, "contexts": ["c"]}]
    result = judge.evaluate(
        rows, metrics=[namespace["answer_words"]], llm=llm, cache=None, progress=False
    )
    assert result.summary["answer_words"].mean == pytest.approx(0.9)
    with pytest.raises(JudgeError, match="lower is better for answer_words"):
        result.write(tmp_path / "out", fail_under={"answer_words": 0.5}, record=False)
    with pytest.raises(ScoreAssertionError, match=r"threshold <= 0\.5"):
        judge.assert_evaluation(result, fail_under={"answer_words": 0.5})
    assert result.write(tmp_path / "out", gates=["answer_words<=0.5"], record=False).code == 1
    loaded = judge.load_run(tmp_path / "out")  # the direction is read back with the run
    with pytest.raises(ScoreAssertionError, match=r"threshold <= 0\.5"):
        judge.assert_evaluation(loaded, fail_under={"answer_words": 0.5})

    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({**LONG_ANSWER, "contexts": ["c"]}) + "\n")
    args = ["--model", "openai/m", "--api-base", fake_llm_server.base_url, "--no-cache"]
    done = run(
        "eval", data, *args, "--metrics-module", module, "--metrics", "answer_words",
        "--out", tmp_path / "cli", "--no-progress", "--no-record",
        "--fail-under", "answer_words=0.5",
        env={**os.environ, "OPENAI_API_KEY": "x"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "judge: error: --fail-under answer_words=0.5: lower is better" in done.stderr
    assert not (tmp_path / "cli").exists()


def test_summary_json_requires_the_highest_of_two_floors_on_a_metric(tmp_path) -> None:
    """Two floors on one metric: the run is held to both, so the one that binds is the
    higher; summary.json's "required" recorded the last given (0.1) while the run failed
    for missing 0.9."""
    gates = Gates.of(["faithfulness>=0.9", "faithfulness>=0.1", "hallucination_rate<=0.5"])
    assert gates.summary([])["required"] == {"faithfulness": 0.9}
    outcome = evaluation(0.5, 0.2).write(tmp_path / "out", gates=gates, record=False)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert outcome.code == 1 and summary["thresholds"]["required"] == {"faithfulness": 0.9}


def test_the_trace_export_labels_a_custom_lower_is_better_metric_on_its_good_side(
    tmp_path, fake_llm_server
):
    """`judge traces export --threshold answer_words=0.5` labelled a row of 0.9 (bad: lower
    is better) "pass", reading the threshold as a floor, where the gates cap it."""
    namespace: dict = {"__name__": "words_metric"}
    exec(compile(WORDS_MODULE, "words_metric.py", "exec"), namespace)
    llm = judge.LLM("openai/m", api_base=fake_llm_server.base_url, api_key="k")
    rows = [{**LONG_ANSWER, "contexts": ["c"], "trace_id": "1" * 32, "span_id": "2" * 16}]
    result = judge.evaluate(
        rows, metrics=[namespace["answer_words"]], llm=llm, cache=None, progress=False
    )
    result.write(tmp_path / "out", record=False)
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text(json.dumps(rows[0]) + "\n")
    events = tmp_path / "events.jsonl"
    done = run(
        "traces", "export", tmp_path / "out", "--rows", rows_file, "--otlp-json", events,
        "--threshold", "answer_words=0.5",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = events.read_text()
    assert '"fail"' in text and '"pass"' not in text


def test_judge_compare_reads_a_custom_metric_where_lower_is_better_as_such(
    tmp_path, fake_llm_server
):
    """B's answers are longer (answer_words up from 0.2 to 0.9: worse, lower is better):
    `judge compare --fail-on-regression` exited 0, counting it as an improvement."""
    namespace: dict = {"__name__": "words_metric"}
    exec(compile(WORDS_MODULE, "words_metric.py", "exec"), namespace)
    llm = judge.LLM("openai/m", api_base=fake_llm_server.base_url, api_key="k")
    for name, answer in (("a", "two words"), ("b", LONG_ANSWER["answer"])):
        rows = [
            {"id": f"q{i}", "question": f"Q{i}?", "answer": answer, "contexts": ["c"]}
            for i in range(12)
        ]
        result = judge.evaluate(
            rows, metrics=[namespace["answer_words"]], llm=llm, cache=None, progress=False
        )
        result.write(tmp_path / name, record=False)
    done = run("compare", tmp_path / "a", tmp_path / "b", "--fail-on-regression")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REGRESSION" in done.stdout + done.stderr
    many = run("compare", tmp_path / "a", tmp_path / "b", tmp_path / "b", "--fail-on-regression")
    assert many.returncode == 1, many.stdout + many.stderr
    better = run("compare", tmp_path / "b", tmp_path / "a", "--fail-on-regression")
    assert better.returncode == 0, better.stdout + better.stderr


def test_a_mean_equal_to_the_bound_passes_whatever_the_float_rounding(tmp_path) -> None:
    """Three rows of faithfulness 0.7 have the mean 0.6999999999999998 in floats: the gate
    faithfulness>=0.7 failed, saying "faithfulness = 0.7000 < 0.7"."""
    result = evaluation(0.7, 0.7)
    rows = [dataclasses.replace(r, scores={"faithfulness": 0.7}) for r in result.rows[:3]]
    three = EvaluationResult(rows, ["faithfulness"], {**CONFIG, "metrics": ["faithfulness"]}, {})
    assert three.summary["faithfulness"].mean != 0.7  # the rounding this is about
    gates = ["faithfulness>=0.7", "faithfulness<=0.7"]
    assert Gates.of(gates).verdict(three).code == 0
    judge.assert_evaluation(three, gates=gates)
    assert three.write(tmp_path / "out", gates=gates, record=False).code == 0
    assert not Bound("faithfulness", 0.7).passes(0.6999)  # a real miss still misses


def test_a_miss_rounded_onto_the_bound_is_shown_with_the_digits_that_miss() -> None:
    assert Bound("faithfulness", 0.7).missed(0.69996) == "faithfulness = 0.69996 < 0.7"
    assert Bound("faithfulness", 0.7).missed(0.5) == "faithfulness = 0.5000 < 0.7"
    assert Bound("h", 0.05, True).missed(math.nan) == "h = n/a > 0.05"


IR_ROWS = [{"id": "q1", "question": "Q?", "retrieved_ids": ["d1", "d2"], "relevance": ["d1"]}]


def test_evaluate_and_experiment_take_gates_as_strings_like_every_python_front_end(tmp_path):
    """`result.write(gates=[...])` and `assert_evaluation(gates=[...])` take strings;
    `judge.evaluate(gates=[...])` and `judge.experiment(gates=[...])` failed with
    AttributeError: 'list' object has no attribute 'check_metrics'."""
    with pytest.raises(JudgeError, match="a gate names ndcg@10, which the run does not"):
        judge.evaluate(IR_ROWS, metrics=["mrr"], gates=["ndcg@10>=0.1"], progress=False)
    with pytest.raises(JudgeError, match="give a list of gates"):
        judge.evaluate(IR_ROWS, metrics=["mrr"], gates="mrr>=0.1", progress=False)
    assert judge.evaluate(IR_ROWS, metrics=["mrr"], gates=["mrr>=0.5"], progress=False)

    testset = tmp_path / "testset.jsonl"
    testset.write_text(json.dumps({"id": "q1", "question": "Q?", "relevance": ["d1"]}) + "\n")
    asked: list[str] = []

    def app(question: str) -> dict:
        asked.append(question)
        return {"answer": "A.", "contexts": ["c"], "retrieved_ids": ["d1"]}

    with pytest.raises(JudgeError, match="a gate names ndcg@10, which the run does not"):
        judge.experiment(
            app, testset, out=tmp_path / "exp", metrics=["mrr"], gates=["ndcg@10>=0.1"],
            progress=False, record=False,
        )  # fmt: skip
    assert asked == []  # refused before the app was asked
    result = judge.experiment(
        app, testset, out=tmp_path / "exp", metrics=["mrr"], gates=["mrr>=0.5"],
        progress=False, record=False,
    )  # fmt: skip
    assert result.summary["mrr"].mean == 1.0


@pytest.mark.parametrize("item", ["faithfulness>=0.8", "hallucination_rate<=0.1"])
def test_a_gate_given_to_fail_under_is_pointed_to_gate(item: str) -> None:
    """--fail-under 'faithfulness>=0.8' was read as a floor on a metric named
    'faithfulness>', refused as a metric the run does not compute."""
    import argparse

    from judge.cli.options import gates_of

    args = argparse.Namespace(gate=[], fail_under=[item], max_error_rate=0.05)
    with pytest.raises(JudgeError, match=rf"--fail-under '{item}': .* --gate '{item}'"):
        gates_of(args)


def test_a_bound_is_recorded_and_said_with_every_digit_it_was_given() -> None:
    """gate faithfulness>=0.8500001 was recorded in summary.json as faithfulness>=0.85 and
    a mean of 0.85 missed it as "faithfulness = 0.8500 < 0.85"."""
    bound = parse_gate("faithfulness>=0.8500001")
    assert str(bound) == "faithfulness>=0.8500001"
    assert bound.missed(0.85) == "faithfulness = 0.8500 < 0.8500001"
    assert Gates.of([bound]).summary([])["gates"] == ["faithfulness>=0.8500001"]
    assert str(parse_gate("faithfulness>=0.8")) == "faithfulness>=0.8"
    assert str(parse_gate("answer_words<=10")) == "answer_words<=10"


@pytest.mark.parametrize("fail_under", [[("faithfulness", 0.5)], 0.5])
def test_fail_under_not_a_mapping_is_refused_in_python_words(tmp_path, fail_under) -> None:
    """fail_under=[('faithfulness', 0.5)] or 0.5: AttributeError: ... no attribute 'items'."""
    result = evaluation(0.9, 0.1)
    with pytest.raises(JudgeError, match=r"fail_under=.*: give a mapping of metric to"):
        result.write(tmp_path / "out", fail_under=fail_under, record=False)
    with pytest.raises(JudgeError, match=r"fail_under=.*: give a mapping of metric to"):
        judge.assert_evaluation(result, fail_under=fail_under)


def test_assert_evaluation_takes_gates_none_as_write_does(tmp_path) -> None:
    """gates=None: TypeError: 'NoneType' object is not iterable (write takes it)."""
    result = evaluation(0.9, 0.1)
    judge.assert_evaluation(result, gates=None, fail_under={"faithfulness": 0.5})
    assert result.write(tmp_path / "out", gates=None, record=False).code == 0
