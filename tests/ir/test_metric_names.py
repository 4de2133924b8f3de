"""Misspelt and malformed metric names get the error that fits them, with and without a
judge model, through the CLI (`judge eval`, `judge ir`) and through Python: a retrieval
family with a bad cutoff says so, a misspelling gets a did-you-mean that is never the name
typed, and only a real LLM-judged metric asks for --model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import judge
from judge.errors import UnknownMetricError
from judge.ir import measure_names as measures
from judge.ir.measure_names import parse_measure
from judge.llm.config import LLM
from judge.metrics.resolve import named_metric
from tests.helpers.cli import run as run_judge

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HUGE = "ndcg@1000000000000000000000"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_judge(*args, timeout=180)


def rows(n: int = 2) -> list[dict]:
    return [
        {
            "id": f"s{i}",
            "question": f"Who created Python? ({i})",
            "answer": "Guido van Rossum created Python.",
            "contexts": ["Python was created by Guido van Rossum."],
            "ground_truth": "Guido van Rossum created Python.",
            "retrieved_ids": ["d1", "d2", "d3"],
            "relevance": ["d2"],
        }
        for i in range(n)
    ]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows()), encoding="utf-8")
    return path


def eval_args(data: Path, tmp: Path, metrics: str, *extra: str) -> list[str]:
    out = tmp / f"out-{abs(hash((metrics, extra)))}"
    return ["eval", str(data), "--out", str(out), "--no-progress", "--metrics", metrics, *extra]


# Python: parse_measure's form errors are their own class, with a precise message.


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ndcg@0", "metric 'ndcg@0': the cutoff k must be at least 1"),
        ("mrr@0", "metric 'mrr@0': the cutoff k must be at least 1"),
        ("recall", "metric 'recall': write it as 'recall@k', e.g. 'recall@10'"),
        ("r_precision@5", "metric 'r_precision@5': write it as 'r_precision', without @k"),
        (HUGE, f"metric '{HUGE}': the cutoff k must be at most 1000000000"),
    ],
)
def test_a_known_family_with_a_bad_cutoff_is_a_form_error(name, message):
    with pytest.raises(measures.MeasureFormError) as caught:
        parse_measure(name)
    assert str(caught.value) == message
    assert isinstance(caught.value, UnknownMetricError)  # callers catching that still do
    assert "did you mean" not in str(caught.value)


def test_precision_at_k_suggests_P_at_k_and_misspellings_keep_their_did_you_mean():
    for name, meant in [
        ("precision@10", "P@10"),
        ("prec@5", "P@5"),
        ("precision", "P@10"),
        ("recal@10", "recall@10"),
        ("ndcg@1O", "ndcg@10"),
    ]:
        with pytest.raises(UnknownMetricError) as caught:
            parse_measure(name)
        assert not isinstance(caught.value, getattr(measures, "MeasureFormError", ())), name
        assert f"did you mean '{meant}'?" in str(caught.value), (name, str(caught.value))
    with pytest.raises(UnknownMetricError, match=r"did you mean 'faithfulness'\?"):
        named_metric("faithfulnes")
    with pytest.raises(UnknownMetricError, match=r"did you mean 'P@10'\?"):
        named_metric("precision@10")


def test_a_name_is_never_suggested_as_its_own_correction():
    for name in [HUGE, "ndcg@0", "recall", "mrr@0"]:
        with pytest.raises(UnknownMetricError) as caught:
            named_metric(name)
        assert f"did you mean {name!r}" not in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ndcg@0", "the cutoff k must be at least 1"),
        ("mrr@0", "the cutoff k must be at least 1"),
        ("recall", "write it as 'recall@k'"),
        (HUGE, "the cutoff k must be at most 1000000000"),
        ("precision@10", "did you mean 'P@10'?"),
        ("faithfulnes", "did you mean 'faithfulness'?"),
    ],
)
def test_python_evaluate_with_a_model_gives_the_precise_message(name, message, fake_llm_server):
    llm = LLM(model="openai/judge", api_base=fake_llm_server.base_url, api_key="sk-names-1")
    with pytest.raises(UnknownMetricError) as caught:
        judge.evaluate(rows(), metrics=[name], llm=llm, progress=False)
    assert message in str(caught.value)
    assert "did you mean 'ndcg@20'" not in str(caught.value)
    assert "did you mean 'recall@5'" not in str(caught.value)
    assert "r_precision" not in str(caught.value)


def test_python_evaluate_without_a_model_reports_a_form_error_not_a_missing_llm():
    with pytest.raises(measures.MeasureFormError, match="the cutoff k must be at least 1"):
        judge.evaluate(rows(), metrics=["ndcg@0"], progress=False)


# The CLI: judge eval without --model, with --model, and judge ir.


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("recal@10", "unknown metric 'recal@10'; did you mean 'recall@10'?"),
        ("precision@10", "unknown metric 'precision@10'; did you mean 'P@10'?"),
        ("faithfulnes", "unknown metric 'faithfulnes'; did you mean 'faithfulness'?"),
        ("ndcg@0", "metric 'ndcg@0': the cutoff k must be at least 1"),
        ("recall", "metric 'recall': write it as 'recall@k'"),
    ],
)
def test_cli_eval_without_model_names_the_misspelling_not_a_missing_model(
    name, message, data, tmp_path
):
    done = run(*eval_args(data, tmp_path, f"ndcg@10,{name}"))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr, done.stderr
    assert "--model is required" not in done.stderr


def test_cli_eval_without_model_still_asks_for_it_for_judged_metrics(data, tmp_path):
    done = run(*eval_args(data, tmp_path, "ndcg@10,faithfulness"))
    assert done.returncode == 2
    assert "--model is required: faithfulness is LLM-judged" in done.stderr, done.stderr
    module = str(EXAMPLES / "domain_accuracy.py")
    custom = run(*eval_args(data, tmp_path, "domain_accuracy", "--metrics-module", module))
    assert custom.returncode == 2
    assert "--model is required: domain_accuracy is LLM-judged" in custom.stderr, custom.stderr
    retrieval_only = run(*eval_args(data, tmp_path, "ndcg@10,P@1"))
    assert retrieval_only.returncode == 0, retrieval_only.stderr


def test_cli_eval_with_model_gives_the_precise_message(data, tmp_path, fake_llm_server):
    model = ["--model", "openai/judge", "--api-base", fake_llm_server.base_url]
    model += ["--cache", str(tmp_path / "c.sqlite")]
    for name, message in [
        ("ndcg@0", "metric 'ndcg@0': the cutoff k must be at least 1"),
        ("recall", "metric 'recall': write it as 'recall@k'"),
        ("precision@10", "did you mean 'P@10'?"),
    ]:
        done = run(*eval_args(data, tmp_path, name, *model))
        assert done.returncode == 2, done.stderr
        assert message in done.stderr, done.stderr
        assert "did you mean 'ndcg@20'" not in done.stderr


def test_cli_ir_reports_bad_names_as_errors(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d2 1\n", encoding="utf-8")
    ranking = tmp_path / "run.txt"
    ranking.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n", encoding="utf-8")
    for name, message in [
        (HUGE, "the cutoff k must be at most 1000000000"),
        ("precision@10", "did you mean 'P@10'?"),
        ("ndcg@0", "the cutoff k must be at least 1"),
    ]:
        done = run("ir", qrels, ranking, "-m", name)
        assert done.returncode == 2, done.stderr
        assert "judge: error:" in done.stderr and message in done.stderr, done.stderr
        assert "internal error" not in done.stderr
    fine = run("ir", qrels, ranking, "-m", "ndcg@1000000000")
    assert fine.returncode == 0, fine.stderr
