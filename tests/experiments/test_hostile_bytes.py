"""Apps whose output cannot be written as it is: text that is no Unicode (a lone
surrogate), ids a TREC line cannot hold, replies nested past any depth or longer than a
line judge reads back. Each is that question's error, written (escaped) so the user sees
it; the experiment finishes, and its TREC files read back with `judge ir` as the summary
scored them."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge import experiment, ir
from tests.helpers import apps
from tests.helpers.cli import run as run_cli

METRICS = ["mrr", "ndcg@3", "recall@2"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def on_bananas(change: Any):
    """The baseline app, its reply to the banana question changed by change(reply)."""

    def app(question: str) -> dict[str, Any]:
        reply = apps.answer(question)
        if "bananas" in question:
            change(reply)
        return reply

    return app


def banana_row(out: Path) -> dict:
    rows = read_jsonl(out / "app_outputs.jsonl")
    assert [r["app_error"] is not None for r in rows] == [False, False, True, False, False]
    return rows[2]


def assert_rows_score_as_judge_ir_on_the_files(result, out: Path, answered: int = 4) -> None:
    """judge ir reads the run folder's qrels.txt and run.trec, and scores each answered
    question as the experiment did."""
    shown = run_cli(
        "ir", "qrels.txt", "run.trec", "-q", "--format", "json", "-m", ",".join(METRICS), cwd=out
    )
    assert shown.returncode == 0, shown.stderr
    by_ir = json.loads(shown.stdout)["per_query"]
    rows = [row for row in result.rows if row.error is None]
    assert len(rows) == answered
    for row in rows:
        for metric in METRICS:
            assert row.scores[metric] == by_ir[str(row.id)][metric], (row.id, metric)


def test_an_app_error_with_a_lone_surrogate_is_recorded_escaped(tmp_path):
    def app(question: str) -> dict[str, Any]:
        if "bananas" in question:
            raise ValueError("no banana \ud800 index")
        return apps.answer(question)

    out = tmp_path / "out"
    for _ in range(2):  # a rerun finishes too: nothing half written stands in its way
        result = experiment(app, apps.QUESTIONS, out=out, metrics=METRICS, progress=False)
        error = banana_row(out)["app_error"]
        assert error["type"] == "ValueError" and error["message"] == "no banana \\ud800 index"
        assert result.config.app["errors"] == {"ValueError": 1}
        assert "\\ud800" in result.rows[2].error
    assert_rows_score_as_judge_ir_on_the_files(result, out)


@pytest.mark.parametrize(
    ("change", "column"),
    [
        (lambda reply: reply.update(answer="yellow \udfff"), "'answer'"),
        (lambda reply: reply["contexts"].append("\ud83d"), "'contexts'"),
        (lambda reply: reply.update(note={"k\ud800": 1}), "'note'"),
    ],
)
def test_text_that_is_no_unicode_is_that_questions_error(tmp_path, change, column):
    out = tmp_path / "out"
    result = experiment(
        on_bananas(change), apps.QUESTIONS, out=out, metrics=METRICS, progress=False
    )
    row = banana_row(out)
    assert row["app_error"]["type"] == "NotUnicode"
    assert column in row["app_error"]["message"] and "lone surrogate" in row["app_error"]["message"]
    assert "answer" not in row and row["question"] == apps.QUESTIONS[2]["question"]
    assert result.config.app["errors"] == {"NotUnicode": 1}
    assert_rows_score_as_judge_ir_on_the_files(result, out)


def test_a_question_with_a_lone_surrogate_is_that_questions_error(tmp_path):
    questions = [dict(q) for q in apps.QUESTIONS]
    questions[2]["question"] = "What colour are ripe bananas\udfff?"
    out = tmp_path / "out"
    result = experiment(apps.answer, questions, out=out, metrics=METRICS, progress=False)
    row = banana_row(out)
    assert row["app_error"]["type"] == "NotUnicode" and "'question'" in row["app_error"]["message"]
    assert row["question"] == "What colour are ripe bananas\\udfff?"  # escaped, shown
    assert_rows_score_as_judge_ir_on_the_files(result, out)


@pytest.mark.parametrize("doc", ["c3\nq1 Q0 c1 1 99 app", "c 3", "", "c\x1b[2J", "c\u2028"])
def test_a_retrieved_id_trec_cannot_hold_is_that_questions_error(tmp_path, doc):
    out = tmp_path / "out"
    app = on_bananas(
        lambda reply: reply["retrieved_ids"].insert(0, doc) or reply.pop("retrieved_scores")
    )
    result = experiment(app, apps.QUESTIONS, out=out, metrics=METRICS, progress=False)
    error = banana_row(out)["app_error"]
    assert error["type"] == "UnfitId" and f"retrieved_ids[0] {doc!r}" in error["message"]
    run = ir.read_run(out / "run.trec")
    assert sorted(run) == ["q1", "q2", "q4", "q5"]  # no forged line, no q3
    assert_rows_score_as_judge_ir_on_the_files(result, out)


def test_a_question_id_trec_cannot_hold_is_that_rows_error(tmp_path):
    questions = [dict(q) for q in apps.QUESTIONS]
    questions[2]["id"] = "q 3"
    out = tmp_path / "out"
    result = experiment(apps.answer, questions, out=out, metrics=METRICS, progress=False)
    error = banana_row(out)["app_error"]
    assert error["type"] == "UnfitId" and "the question id 'q 3'" in error["message"]
    assert sorted(ir.read_qrels(out / "qrels.txt")) == ["q1", "q2", "q4", "q5"]
    assert_rows_score_as_judge_ir_on_the_files(result, out)


def test_a_reply_nested_too_deeply_is_that_questions_error(tmp_path):
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    out = tmp_path / "out"
    app = on_bananas(lambda reply: reply.update(trace=deep))
    result = experiment(app, apps.QUESTIONS, out=out, metrics=METRICS, progress=False)
    error = banana_row(out)["app_error"]
    assert error["type"] == "MalformedReply" and "nested too deeply" in error["message"]
    assert_rows_score_as_judge_ir_on_the_files(result, out)


def test_a_reply_longer_than_a_line_judge_reads_is_that_questions_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_MAX_LINE_MB", "0.01")  # 10485 bytes
    out = tmp_path / "out"
    app = on_bananas(lambda reply: reply.update(answer="yellow " * 3000))
    result = experiment(app, apps.QUESTIONS, out=out, metrics=METRICS, progress=False)
    error = banana_row(out)["app_error"]
    assert error["type"] == "ReplyTooLong"
    assert "10485 bytes" in error["message"] and "JUDGE_MAX_LINE_MB" in error["message"]
    assert_rows_score_as_judge_ir_on_the_files(result, out)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.text(st.characters() | st.sampled_from(["\n", " ", "\x00", "\ud800"]), max_size=4),
        min_size=1,
        max_size=3,
        unique=True,
    )
)
def test_every_run_written_reads_back_as_the_apps_rankings(ids):
    def app(question: str) -> dict[str, Any]:
        reply = apps.answer(question)
        if "bananas" in question:
            reply["retrieved_ids"] = list(ids)
            reply.pop("retrieved_scores")
        return reply

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out"
        result = experiment(app, apps.QUESTIONS, out=out, metrics=METRICS, progress=False)
        rows = read_jsonl(out / "app_outputs.jsonl")
        run = ir.read_run(out / "run.trec")
        ranked = {q: sorted(d, key=d.get, reverse=True) for q, d in run.items()}
        assert ranked == {r["id"]: r["retrieved_ids"] for r in rows if r["app_error"] is None}
        if rows[2]["app_error"] is not None:  # refused, naming an id
            assert rows[2]["app_error"]["type"] in ("UnfitId", "NotUnicode")
        assert_rows_score_as_judge_ir_on_the_files(
            result, out, answered=4 + (not rows[2]["app_error"])
        )
