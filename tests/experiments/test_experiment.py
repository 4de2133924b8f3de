"""judge.experiments: the app asked every question, its outputs kept and judged."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from judge import experiment, ir
from tests.helpers import apps
from tests.helpers.cli import run as run_cli


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("app", [apps.answer, apps.async_answer, apps.Pipeline(k=3)])
def test_sync_async_and_callable_apps_give_the_same_outputs(app, models, tmp_path):
    result = experiment(app, apps.QUESTIONS, out=tmp_path / "out", progress=False, **models)
    rows = read_jsonl(tmp_path / "out" / "app_outputs.jsonl")
    assert [r["id"] for r in rows] == ["q1", "q2", "q3", "q4", "q5"]
    for row, item in zip(rows, apps.QUESTIONS, strict=True):
        expected = apps.answer(item["question"])
        assert row["answer"] == expected["answer"]
        assert row["contexts"] == expected["contexts"]
        assert row["retrieved_ids"] == expected["retrieved_ids"]
        assert row["pipeline"] == "baseline"  # an extra key kept as a column
        assert row["ground_truth"] == item["ground_truth"]
        assert row["app_error"] is None and row["app_latency_s"] >= 0
    assert result.config.app["questions"] == 5 and result.config.app["errors"] == {}
    assert {"faithfulness", "mrr", "ndcg@10"} <= set(result.summary)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["config"]["app"]["asked"] == 5
    assert not (tmp_path / "out" / ".app_outputs.jsonl").exists()


def test_retrieval_metrics_equal_judge_ir_on_the_written_trec_run(models, tmp_path):
    result = experiment(
        apps.reversed_ranking,
        apps.QUESTIONS,
        out=tmp_path / "out",
        metrics=["mrr", "ndcg@3", "P@1", "recall@2", "map"],
        progress=False,
    )
    out = tmp_path / "out"
    qrels = ir.read_qrels(out / "qrels.txt")
    run = ir.read_run(out / "run.trec")
    assert qrels == {q["id"]: q["relevance"] for q in apps.QUESTIONS}
    assert run.keys() == qrels.keys()
    for qid, docs in run.items():  # the ids in the app's order
        ranked = sorted(docs, key=docs.get, reverse=True)
        question = next(q["question"] for q in apps.QUESTIONS if q["id"] == qid)
        assert ranked == apps.reversed_ranking(question)["retrieved_ids"]
    metrics = ["mrr", "ndcg@3", "P@1", "recall@2", "map"]
    shown = run_cli(
        "ir", "qrels.txt", "run.trec", "-q", "--format", "json", "-m", ",".join(metrics), cwd=out
    )
    by_ir = json.loads(shown.stdout)["per_query"]
    for metric in metrics:
        per_row = [row.scores[metric] for row in result.rows]
        assert per_row == [by_ir[q["id"]][metric] for q in apps.QUESTIONS]  # exactly
    assert result.summary["mrr"].mean == json.loads(shown.stdout)["metrics"]["mrr"]


def test_app_errors_are_rows_never_a_crash(models, tmp_path):
    for app, kind in [
        (apps.fails_on_bananas, "ValueError"),
        (apps.malformed_on_bananas, "MalformedReply"),
        (apps.hangs_on_bananas, "Timeout"),
        (apps.async_hangs_on_bananas, "Timeout"),
    ]:
        out = tmp_path / app.__name__
        result = experiment(app, apps.QUESTIONS, out=out, app_timeout=0.5, progress=False, **models)
        rows = read_jsonl(out / "app_outputs.jsonl")
        failed = [r for r in rows if r["app_error"] is not None]
        assert [r["id"] for r in failed] == ["q3"], app
        assert failed[0]["app_error"]["type"] == kind
        assert "answer" not in failed[0]
        assert result.config.app["errors"] == {kind: 1}
        banana = result.rows[2]
        assert banana.error.startswith("the app failed on this question: " + kind)
        assert math.isnan(banana.scores["faithfulness"])
        assert not math.isnan(result.rows[0].scores["faithfulness"])
    raised = read_jsonl(tmp_path / "fails_on_bananas" / "app_outputs.jsonl")[2]["app_error"]
    assert raised["message"] == "no banana index"
    assert raised["where"].endswith("in fails_on_bananas") and "apps.py:" in raised["where"]
    malformed = read_jsonl(tmp_path / "malformed_on_bananas" / "app_outputs.jsonl")[2]
    assert malformed["app_error"]["message"] == "'answer' is a int, not a string"
