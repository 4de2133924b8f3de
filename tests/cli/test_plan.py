"""`judge plan` as a user runs it: the questions a comparison needs and the labels a PPI
interval needs, from pilot runs and a labels file, in text and JSON, and its errors in the
command line's words."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import judge
from judge.cli.words import cli_words
from judge.run.rows import ResultRow
from tests.helpers.cli import run


def write_run(path: Path, scores: list[float], conversations: list[int] | None = None) -> Path:
    lines = []
    for i, score in enumerate(scores):
        turn = {} if conversations is None else {"conversation_id": f"c{conversations[i]}"}
        row = ResultRow(row=i, id=f"q{i}", scores={"faithfulness": score}, turn=2, **turn)
        lines.append(row.json_line() + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def pilot(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Runs A and B of 200 questions (B a little better) and 60 random labels of A's rows."""
    rng = random.Random(3)
    a = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(200)]
    b = [min(1.0, s + rng.choice([0.0, 0.0, 0.25, -0.25, 0.25])) for s in a]
    chosen = sorted(random.Random(7).sample(range(200), 60))
    sample = {"method": "random", "seed": 7, "of": 200}
    labels = [
        {"id": f"q{i}", "ok": int(a[i] + rng.uniform(-0.3, 0.3) >= 0.5), "sample": sample}
        for i in chosen
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in labels), encoding="utf-8")
    return write_run(tmp_path / "a.jsonl", a), write_run(tmp_path / "b.jsonl", b), path


def test_plan_prints_the_questions_and_the_labels_as_the_python_api_gives_them(pilot):
    a, b, labels = pilot
    args = ["--metric", "faithfulness", "--difference", "0.05", "--half-width", "0.09"]
    done = run("plan", a, b, *args, "--labels", labels, "--label", "ok")
    assert done.returncode == 0, done.stderr
    questions = judge.plan_questions(a, b, metric="faithfulness", difference=0.05)
    needed = judge.plan_labels(a, metric="faithfulness", half_width=0.09, labels=labels, label="ok")
    # the CLI's words: a note's keyword argument (tests=) is its flag (--tests)
    assert done.stdout.strip() == cli_words(f"{questions.text()}\n\n{needed.text()}")
    assert f"faithfulness: {questions.needed} questions to detect a difference of 0.05" in (
        done.stdout
    )
    assert needed.needed is not None and 60 < needed.needed < needed.labels_only
    assert f"{needed.needed} labels of 200 judged rows" in done.stdout
    as_json = run("plan", a, b, *args, "--labels", labels, "--label", "ok", "--format", "json")
    data = json.loads(as_json.stdout)
    assert data["questions"]["needed"] == questions.needed
    assert data["questions"]["paired"] is True and data["questions"]["unit"] == "question"
    assert data["labels"]["needed"] == needed.needed and data["labels"]["source"] == "labels"
    assert data["labels"]["pilot"]["labels"] == 60


def test_one_run_and_assumptions_say_so_in_flags(pilot):
    a, _, _ = pilot
    done = run(
        "plan", a, "--metric", "faithfulness", "--difference", "0.05", "--power", "0.9",
        "--half-width", "0.08", "--judge-correlation", "0.6", "--format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["questions"]["paired"] is False and data["questions"]["power"] == 0.9
    assert any("--pair-correlation 0" in note for note in data["questions"]["notes"])
    assert data["labels"]["source"] == "assumed" and data["labels"]["correlation"] == 0.6
    assert any("(--labels)" in note for note in data["labels"]["notes"])
    assert "pair_correlation=" not in done.stdout and "labels=" not in done.stdout


def test_turns_of_conversations_are_planned_by_conversation(tmp_path):
    rng = random.Random(5)
    owners = [c for c in range(40) for _ in range(3)]
    a = [rng.uniform(0.3, 0.7) for _ in owners]
    shift = [rng.gauss(0.05, 0.1) for _ in range(40)]
    b = [s + shift[c] + rng.gauss(0, 0.05) for s, c in zip(a, owners, strict=True)]
    done = run(
        "plan",
        write_run(tmp_path / "a.jsonl", a, owners),
        write_run(tmp_path / "b.jsonl", b, owners),
        "--metric",
        "faithfulness",
        "--difference",
        "0.05",
    )
    assert done.returncode == 0, done.stderr
    assert " conversations to detect a difference of 0.05" in done.stdout
    assert "120 turns in 40 conversations" in done.stdout and "design effect" in done.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "nothing to plan: give --difference D"),
        (["--half-width", "0.05"], "give --labels (a labels file of a random pilot, with --label)"),
        (
            ["--labels", "x.jsonl", "--difference", "0.05"],
            "--labels plans labels: give --half-width",
        ),
        (["--half-width", "0.05", "--power", "0.9"], "--power plans questions: give --difference"),
        (
            ["--difference", "0.05", "--label", "ok", "--confidence", "0.9"],
            "--label, --confidence plan labels: give --half-width W too",
        ),
        (
            ["--half-width", "0.05", "--judge-correlation", "0.5", "--label", "ok"],
            "--label is for --labels (a labels file); without one the plan assumes --judge-corr",
        ),
        (["--difference", "0.05", "--power", "1.5"], "argument --power: '1.5' is not strictly"),
        (["--difference", "0", "--alpha", "0.1"], "--difference must be a nonzero number"),
        (["--half-width", "0.05", "--judge-correlation", "2"], "--judge-correlation must lie"),
        (["--difference", "0.05", "--metric", "nope"], "no row scored on 'nope'"),
    ],
)
def test_errors_name_the_flags(pilot, extra, message):
    a, _, _ = pilot
    metric = [] if "--metric" in extra else ["--metric", "faithfulness"]
    done = run("plan", a, *metric, *extra)
    assert done.returncode == 2
    assert message in done.stderr
    for keyword in ("difference=", "half_width=", "judge_correlation=", "labels=", "metric="):
        assert keyword not in done.stderr


def test_three_runs_are_refused(pilot):
    a, b, _ = pilot
    done = run("plan", a, b, a, "--metric", "faithfulness", "--difference", "0.05")
    assert done.returncode == 2 and "give one RUN, or two (RUN RUN_B), not 3" in done.stderr
