"""The test set is the app's input and the only source of gold labels: an app's reply
cannot overwrite a column of it, a resumed experiment builds its rows from the test set as
it is now, and every question keeps a row of its own (ids unique). In each case the
summary's retrieval metrics are those `judge ir` computes on the folder's files."""

from __future__ import annotations

import asyncio
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from judge import InputFormatError, experiment
from judge.experiments.app import as_app
from judge.experiments.calls import ProgressFile, ask_all
from judge.experiments.experiment import PROGRESS_FILE, load_testset
from tests.helpers import apps
from tests.helpers.cli import run as run_cli
from tests.helpers.experiments import assert_summary_is_judge_ir


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def questions() -> list[dict[str, Any]]:
    return [{**q, "category": "plain"} for q in apps.QUESTIONS]


def nothing_relevant(question: str) -> dict[str, Any]:
    """Retrieves no relevant chunk, and says (but for one question) that its own ranking
    is relevant."""
    reply = {"answer": "no idea", "contexts": ["unrelated"], "retrieved_ids": ["c9"]}
    return reply if "France" in question else {**reply, "relevance": {"c9": 2}}


def test_an_app_cannot_grade_itself_with_a_relevance_key(tmp_path):
    # The reproduction: summary MRR 1.000, judge ir on the folder's files 0.000.
    out = tmp_path / "out"
    result = experiment(nothing_relevant, questions(), out=out, metrics=["mrr"], progress=False)
    rows = read_jsonl(out / "app_outputs.jsonl")
    assert [r["relevance"] for r in rows] == [q["relevance"] for q in apps.QUESTIONS]
    failed = [r["app_error"] for r in rows[:4]]
    assert {e["type"] for e in failed} == {"MalformedReply"}
    assert all("'relevance'" in e["message"] for e in failed)
    assert result.config.app["errors"] == {"MalformedReply": 4}
    assert result.summary["mrr"].scored == 1
    assert result.summary["mrr"].mean == 0.0  # not the 1.000 the app gave itself
    assert_summary_is_judge_ir(out)


def overwriting(key: str):
    def app(question: str) -> dict[str, Any]:
        reply = apps.answer(question)
        if "bananas" in question:  # one question: its reply names an input column
            reply = {**reply, "retrieved_ids": ["c9"], "retrieved_scores": [1.0], key: {"c9": 2}}
        return reply

    return app


@pytest.mark.parametrize(
    "key",
    [
        "id",
        "question",
        "ground_truth",
        "relevance",
        "category",  # a column of this test set
        "reference",  # a name judge eval reads as ground_truth
        "relevant_ids",  # ... as relevance
        "retrieved_context_ids",  # ... as retrieved_ids
        "app_error",
    ],
)
def test_a_reply_naming_an_input_column_is_that_questions_app_error(key, tmp_path):
    out = tmp_path / "out"
    result = experiment(overwriting(key), questions(), out=out, metrics=["mrr"], progress=False)
    rows = read_jsonl(out / "app_outputs.jsonl")
    for row, item in zip(rows, questions(), strict=True):
        for column, value in item.items():  # the test set's values, all of them
            assert row[column] == value, (column, row)
    failed = [r for r in rows if r["app_error"] is not None]
    assert [r["id"] for r in failed] == ["q3"]
    assert failed[0]["app_error"]["type"] == "MalformedReply"
    assert repr(key) in failed[0]["app_error"]["message"]
    assert "answer" not in failed[0] and "retrieved_ids" not in failed[0]
    assert result.summary["mrr"].scored == 4
    assert_summary_is_judge_ir(out)


def test_the_summary_and_judge_ir_average_over_the_same_questions(tmp_path):
    """By definition: every question with labels the app answered, one without retrieved
    ids scoring 0; an app error is no answer (its labels stay out of qrels.txt), and
    labels of ids the test set does not have are not the experiment's."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(
        "".join(
            f"{q['id']} 0 {doc} {grade}\n"
            for q in [*apps.QUESTIONS, {"id": "q99", "relevance": {"c1": 1}}]
            for doc, grade in q["relevance"].items()
        )
    )

    def app(question: str) -> dict[str, Any]:
        if "bananas" in question:
            raise ValueError("no banana index")
        reply = apps.answer(question)
        if "France" in question:
            reply["retrieved_ids"], reply["retrieved_scores"] = [], []
        return reply

    data = [{"id": q["id"], "question": q["question"]} for q in apps.QUESTIONS]
    out = tmp_path / "out"
    result = experiment(app, data, out=out, qrels=qrels, metrics=["mrr", "P@1"], progress=False)
    assert result.summary["mrr"].scored == 4  # q1, q2, q4, and q5 (no ids: 0)
    assert [r.scores["mrr"] for r in result.rows][4] == 0.0
    shown = run_cli("ir", "qrels.txt", "run.trec", "--format", "json", "-m", "mrr,P@1", cwd=out)
    assert shown.returncode == 0, shown.stderr
    by_ir = json.loads(shown.stdout)
    assert by_ir["num_queries"] == 4
    assert by_ir["metrics"]["mrr"] == pytest.approx(result.summary["mrr"].mean, abs=1e-12)
    assert by_ir["metrics"]["P@1"] == pytest.approx(result.summary["P@1"].mean, abs=1e-12)


def test_the_invariant_check_fails_on_a_summary_that_is_not_judge_irs(tmp_path_factory):
    out = tmp_path_factory.mktemp("doctored") / "out"  # outside tmp_path: not checked after
    experiment(apps.reversed_ranking, questions(), out=out, metrics=["mrr"], progress=False)
    assert_summary_is_judge_ir(out)
    summary = json.loads((out / "summary.json").read_text())
    summary["metrics"]["mrr"]["mean"] += 0.125
    (out / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(AssertionError, match="mrr is"):
        assert_summary_is_judge_ir(out)


# ---- a resumed experiment: answers reused, the rows built from the test set as it is now


CALLS: list[str] = []


def by_category(row: dict[str, Any]) -> dict[str, Any]:
    """A row app whose ranking follows the row's category: the relevant chunks first for
    a 'good' one, else only an unrelated chunk."""
    CALLS.append(row["id"])
    reply = apps.answer(row["question"])
    if row["category"] != "good":
        reply["retrieved_ids"], reply["retrieved_scores"] = ["c9"], [1.0]
    return reply


def by_question(question: str) -> dict[str, Any]:
    CALLS.append(question)
    return apps.answer(question)


def answered_before(app, data: list[dict[str, Any]], out: Path) -> None:
    """What a stopped experiment leaves: every question answered in the progress file, no
    output written yet."""
    out.mkdir()
    loaded = as_app(app)
    progress = ProgressFile(out / PROGRESS_FILE, loaded)
    testset = load_testset(data)
    asyncio.run(ask_all(loaded, testset.questions, progress, concurrency=2, timeout=10))


def test_a_resumed_row_app_is_asked_again_where_its_row_changed(tmp_path):
    out = tmp_path / "out"
    before = questions()
    answered_before(by_category, before, out)
    CALLS.clear()
    after = questions()
    after[1]["category"] = "good"  # q2's input changed
    after[3]["relevance"] = {"c4": 1}  # q4's labels: also in the row the app is given
    result = experiment(by_category, after, out=out, metrics=["mrr"], progress=False)
    assert sorted(CALLS) == ["q2", "q4"]  # asked again: the others are reused
    assert result.config.app["asked"] == 2 and result.config.app["reused"] == 3
    rows = read_jsonl(out / "app_outputs.jsonl")
    assert [r["category"] for r in rows] == [q["category"] for q in after]
    assert [r["relevance"] for r in rows] == [q["relevance"] for q in after]
    assert rows[1]["retrieved_ids"][0] == "c2"  # the answer to the row as it is now
    assert [r.scores["mrr"] for r in result.rows] == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert_summary_is_judge_ir(out)


def test_a_resumed_question_app_is_scored_on_the_labels_as_they_are_now(tmp_path):
    out = tmp_path / "out"
    before = questions()
    answered_before(by_question, before, out)
    CALLS.clear()
    after = questions()
    for item in after:  # every label moved to a chunk the app does not rank first
        item["relevance"] = {"c9": 1}
    after[0]["ground_truth"] = "Guido."
    result = experiment(by_question, after, out=out, metrics=["mrr"], progress=False)
    assert CALLS == []  # a question app was given the same questions: nothing to ask
    rows = read_jsonl(out / "app_outputs.jsonl")
    assert [r["relevance"] for r in rows] == [{"c9": 1}] * 5
    assert rows[0]["ground_truth"] == "Guido."
    assert result.summary["mrr"].mean == 0.0
    assert_summary_is_judge_ir(out)


def test_the_progress_file_keeps_the_apps_answers_and_no_labels(tmp_path):
    out = tmp_path / "out"
    answered_before(by_category, questions(), out)
    for line in read_jsonl(out / PROGRESS_FILE):
        assert not {"relevance", "ground_truth", "category", "question"} & set(line["row"])
        assert {"answer", "contexts", "app_latency_s", "app_error"} <= set(line["row"])


# ---- ids: unique after normalisation, a row without one never takes another's


@pytest.mark.parametrize(
    ("ids", "rows", "shown"),
    [
        (["q1", "q2", "q3", "q1", "q5"], "rows 0 and 3", "'q1'"),
        ([1, "2", "1", 4, 5], "rows 0 and 2", "'1'"),  # the same id once normalised
        (["3", "q2", "q3", None, "q5"], "rows 0 and 3", "'3'"),  # row 3 gets its number
    ],
)
def test_ids_that_are_not_unique_are_refused_naming_both_rows(ids, rows, shown, tmp_path):
    data = [{**q, "id": ident} for q, ident in zip(apps.QUESTIONS, ids, strict=True)]
    for item in data:
        if item["id"] is None:
            del item["id"]
    with pytest.raises(InputFormatError, match=rf"{rows} .*{shown}") as raised:
        experiment(apps.answer, data, out=tmp_path / "out", metrics=["mrr"], progress=False)
    assert "unique" in str(raised.value)
    assert not (tmp_path / "out").exists()  # refused before any question is asked
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in data))
    shown_cli = run_cli("experiment", str(path), "--app", "tests.helpers.apps:answer")
    assert shown_cli.returncode == 2, shown_cli.stderr
    assert rows in shown_cli.stderr and "Traceback" not in shown_cli.stderr


def test_rows_without_ids_keep_their_numbers_and_all_are_scored(tmp_path):
    data = [{k: v for k, v in q.items() if k != "id"} for q in apps.QUESTIONS]
    out = tmp_path / "out"
    result = experiment(apps.answer, data, out=out, metrics=["mrr"], progress=False)
    assert [r["id"] for r in read_jsonl(out / "app_outputs.jsonl")] == [0, 1, 2, 3, 4]
    assert result.summary["mrr"].scored == 5 and not math.isnan(result.summary["mrr"].mean)
    assert_summary_is_judge_ir(out)


# ---- the progress file: what the app (or damage) writes in it never grades the app


PAD = "P" * 40
FORGED: list[str] = []


def forging(question: str) -> dict[str, Any]:
    """Retrieves nothing relevant, and rewrites the progress file's earlier lines in
    place so that they say its ranking is relevant (the tester's forge.py)."""
    path = Path(os.environ["JUDGE_TEST_PROGRESS"])
    old = ('"contexts": ["' + PAD + '"]').encode()
    new = b'"relevance": {"c9": 3}, "contexts": []'
    data = path.read_bytes()
    if old in data:
        FORGED.append(question)
    with path.open("r+b") as file:
        file.write(data.replace(old, new + b" " * (len(old) - len(new))))
    return {"answer": "no idea", "contexts": [PAD], "retrieved_ids": ["c9", "c8"]}


def test_an_app_cannot_grade_itself_by_rewriting_the_progress_file(tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv("JUDGE_TEST_PROGRESS", str(out / PROGRESS_FILE))
    FORGED.clear()
    result = experiment(
        forging, questions(), out=out, metrics=["mrr"], progress=False, app_concurrency=1
    )
    assert len(FORGED) == 4  # every earlier line forged, before each later question
    rows = read_jsonl(out / "app_outputs.jsonl")
    assert [r["relevance"] for r in rows] == [q["relevance"] for q in apps.QUESTIONS]
    assert "c9" not in (out / "qrels.txt").read_text()
    assert result.summary["mrr"].mean == 0.0  # not the 0.8 of the forged labels
    assert_summary_is_judge_ir(out)


def rewritten(out: Path, change) -> None:
    """The progress file with each line as `change` makes it (None: the line dropped)."""
    path = out / PROGRESS_FILE
    lines = [change(i, json.loads(line)) for i, line in enumerate(path.read_text().splitlines())]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines if line is not None))


def test_labels_in_a_progress_line_are_not_reused(tmp_path):
    out = tmp_path / "out"
    answered_before(by_question, questions(), out)

    def forged(i: int, line: dict[str, Any]) -> dict[str, Any]:
        line["row"]["retrieved_ids"] = ["c9"]
        line["row"]["relevance"] = {"c9": 2}
        return line

    rewritten(out, forged)
    CALLS.clear()
    result = experiment(by_question, questions(), out=out, metrics=["mrr"], progress=False)
    assert sorted(CALLS) == sorted(q["question"] for q in apps.QUESTIONS)  # asked again
    rows = read_jsonl(out / "app_outputs.jsonl")
    assert [r["relevance"] for r in rows] == [q["relevance"] for q in apps.QUESTIONS]
    assert result.summary["mrr"].mean == 1.0
    assert_summary_is_judge_ir(out)


def _damaged_row(line: dict[str, Any]) -> None:
    line["row"] = "x"


def _damaged_question(line: dict[str, Any]) -> None:
    line["question"] = ["a"]


def _no_latency(line: dict[str, Any]) -> None:
    del line["row"]["app_latency_s"]


def _surrogate(line: dict[str, Any]) -> None:
    line["row"]["answer"] = "x\ud800"  # written as the escape \ud800


def _input_column(line: dict[str, Any]) -> None:
    line["row"]["category"] = "forged"  # a column of the test set


def _bad_error(line: dict[str, Any]) -> None:
    line["row"]["app_error"] = "x"


def _bad_ids(line: dict[str, Any]) -> None:
    line["row"]["retrieved_ids"] = [["c1"]]


@pytest.mark.parametrize(
    "damage",
    [_damaged_row, _damaged_question, _no_latency, _surrogate, _input_column, _bad_error, _bad_ids],
)
def test_a_damaged_progress_line_is_asked_again(damage, tmp_path):
    out = tmp_path / "out"
    answered_before(by_question, questions(), out)

    def first_damaged(i: int, line: dict[str, Any]) -> dict[str, Any]:
        if i == 0:
            damage(line)
        return line

    rewritten(out, first_damaged)
    CALLS.clear()
    result = experiment(by_question, questions(), out=out, metrics=["mrr"], progress=False)
    assert len(CALLS) == 1  # the damaged line's question, asked again; the others reused
    assert result.config.app["asked"] == 1 and result.config.app["reused"] == 4
    rows = read_jsonl(out / "app_outputs.jsonl")
    assert [r["category"] for r in rows] == ["plain"] * 5
    assert all(r["app_error"] is None for r in rows)
    assert_summary_is_judge_ir(out)


def breaking(replacements: list[tuple[bytes, bytes]]):
    """An app that rewrites the progress file's earlier lines, in place, into lines that
    are not rows judge writes."""

    def app(question: str) -> dict[str, Any]:
        path = Path(os.environ["JUDGE_TEST_PROGRESS"])
        data = path.read_bytes()
        for old, new in replacements:
            data = data.replace(old, new)
        with path.open("r+b") as file:
            file.write(data)
        return apps.answer(question)

    return app


@pytest.mark.parametrize(
    "replacements",
    [
        [(b'"app_latency_s"', b'"app_latency_x"')],
        [(b'"row": {', b'"row": [{'), (b"null}}", b"null}]}")],
        [(b'"contexts": [', b'"contexts": 7, "x": [')],
    ],
    ids=["no latency", "a row that is a list", "contexts not a list"],
)
def test_progress_lines_the_app_broke_are_its_errors(replacements, tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv("JUDGE_TEST_PROGRESS", str(out / PROGRESS_FILE))
    result = experiment(
        breaking(replacements),
        questions(),
        out=out,
        metrics=["mrr"],
        progress=False,
        app_concurrency=1,
    )
    rows = read_jsonl(out / "app_outputs.jsonl")
    kinds = [(r["app_error"] or {}).get("type") for r in rows]
    # The last line is never rewritten, but a longer rewrite moves it from where judge
    # wrote it: what is read there is not a row either.
    assert kinds[:4] == ["ProgressLineChanged"] * 4 and kinds[4] in (None, kinds[0])
    assert result.config.app["errors"] == {"ProgressLineChanged": kinds.count(kinds[0])}
    assert [r["relevance"] for r in rows] == [q["relevance"] for q in apps.QUESTIONS]
    assert_summary_is_judge_ir(out)


# ---- NaN and infinities in a test set: a NaN cell is a missing one, an infinity refused


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_nan_cell_is_written_as_null_as_judge_eval_reads_it(tmp_path):
    lines = [json.dumps(q) for q in apps.QUESTIONS]
    lines[1] = lines[1][:-1] + ', "weight": NaN, "notes": {"score": NaN}}'  # as json.dumps wrote it
    data = write_lines(tmp_path / "data.jsonl", lines)
    out = tmp_path / "out"
    done = run_cli(
        "experiment", str(data), "--app", "tests.helpers.apps:answer", "--out", str(out),
        "--metrics", "mrr", "--no-progress", "--no-record",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out / "app_outputs.jsonl")
    assert rows[1]["weight"] is None and rows[1]["notes"] == {"score": None}
    assert [r["app_error"] for r in rows] == [None] * len(apps.QUESTIONS)
    assert_summary_is_judge_ir(out)


@pytest.mark.parametrize(
    ("cell", "shown"),
    [
        ('"weight": Infinity', "'weight'"),
        ('"weight": -1e400', "'weight'"),  # json.loads reads it as -inf
        ('"notes": {"score": Infinity}', "'notes'"),
        ('"id": NaN', "'id'"),  # ids are compared as text: every NaN is 'nan'
        ('"id": 1e400', "'id'"),
    ],
)
def test_an_infinity_or_a_nan_id_is_refused_before_the_app_is_asked(cell, shown, tmp_path):
    lines = [json.dumps(q) for q in apps.QUESTIONS]
    row = {k: v for k, v in apps.QUESTIONS[2].items() if not cell.startswith('"id"') or k != "id"}
    lines[2] = json.dumps(row)[:-1] + ", " + cell + "}"
    data = write_lines(tmp_path / "data.jsonl", lines)
    done = run_cli(
        "experiment", str(data), "--app", "tests.helpers.apps:answer", "--out",
        str(tmp_path / "out"), "--metrics", "mrr", "--no-progress", "--no-record",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "row 2" in last and shown in last, last
    assert not (tmp_path / "out").exists()  # refused before any question is asked
