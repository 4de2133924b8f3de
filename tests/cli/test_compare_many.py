"""`judge compare` of many runs as a user runs it: four real `judge eval` runs against the
fake server (a baseline, one equal to it, one worse, one better), then compare with and
without --baseline, the exit codes of --fail-on-regression, comparison.json and
compare.html."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import eval_args, rows, run

N = 10
# The heuristic judge supports a sentence whose words are all in a context: the baseline's
# answers hold one supported sentence of two, the better ones only that one, the worse
# ones none.
ANSWERS = {
    "base": "Guido van Rossum created Python. Row {i} is here.",
    "same": "Guido van Rossum created Python. Row {i} is here.",
    "worse": "Bananas are purple. Row {i} is here.",
    "better": "Python was created by Guido van Rossum.",
}


@pytest.fixture(scope="module")
def evaluations(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("runs")
    out = {}
    with FakeLLMServer(chat=heuristic_judge) as server:
        for name, answer in ANSWERS.items():
            data = tmp / f"{name}.jsonl"
            samples = [{**r, "answer": answer.format(i=i)} for i, r in enumerate(rows(N))]
            data.write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
            folder = tmp / name
            done = run(
                *eval_args(data, server, tmp, "--metrics", "faithfulness,context_recall"),
                "--out",
                str(folder),
            )
            assert done.returncode == 0, done.stderr
            out[name] = folder
    return out


def test_three_runs_against_an_extra_baseline(evaluations, tmp_path):
    e = evaluations
    done = run(
        "compare",
        e["same"],
        e["worse"],
        e["better"] / "results.jsonl",
        "--baseline",
        e["base"],
        "--out",
        tmp_path / "cmp",
    )
    assert done.returncode == 0, done.stderr  # no --fail-on-regression: a report, not a gate
    assert "REGRESSION: worse: faithfulness got worse than base" in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "mean [95% CI] over each run's own rows"
    assert any(line.startswith("base (baseline)") for line in lines)
    assert "worse vs base: 10 paired samples (by id)" in done.stdout
    assert "Holm-Bonferroni across all 6 (run, metric) tests together" in done.stdout

    doc = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert set(doc) == {"baseline", "metrics", "alpha", "adjustment", "runs", "versus_baseline"}
    assert doc["baseline"] == "base" and doc["metrics"] == ["context_recall", "faithfulness"]
    assert [r["label"] for r in doc["runs"]] == ["base", "same", "worse", "better"]
    assert [r["baseline"] for r in doc["runs"]] == [True, False, False, False]
    assert set(doc["runs"][0]["metrics"]["faithfulness"]) == {
        "mean",
        "ci_low",
        "ci_high",
        "scored",
    }
    means = {r["label"]: r["metrics"]["faithfulness"]["mean"] for r in doc["runs"]}
    assert means == {"base": 0.5, "same": 0.5, "worse": 0.0, "better": 1.0}
    versus = {v["run"]: v for v in doc["versus_baseline"]}
    assert set(versus) == {"same", "worse", "better"}
    assert set(versus["worse"]) == {
        "run",
        "matched_by",
        "matched",
        "unmatched_baseline",
        "unmatched_run",
        "metrics",
        "regressions",
        "improvements",
        "worse",
        "better",
    }
    assert versus["worse"]["regressions"] == ["faithfulness"]
    assert versus["better"]["improvements"] == ["faithfulness"]
    assert versus["same"]["regressions"] == versus["same"]["improvements"] == []
    # per question: the judge's evidence and both answers
    first = versus["worse"]["worse"][0]
    assert first["baseline"]["answer"] == "Guido van Rossum created Python. Row 0 is here."
    assert first["run"]["answer"] == "Bananas are purple. Row 0 is here."
    verdicts = first["run"]["evidence"]["answer_verdicts"]
    assert [v["verdict"] for v in verdicts] == ["not_found", "not_found"]
    assert len(versus["worse"]["worse"]) == N and versus["worse"]["better"] == []

    html = (tmp_path / "cmp" / "compare.html").read_text()
    assert "<h2>worse vs base</h2>" in html and "<h2>better vs base</h2>" in html
    assert "faithfulness: worse, Δ -0.500" in html
    assert "Bananas are purple. Row 0 is here." in html and "not in any context" in html


def test_the_first_run_is_the_baseline_by_default(evaluations):
    e = evaluations
    done = run("compare", e["base"], e["same"], e["better"], "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["baseline"] == "base" and [v["run"] for v in doc["versus_baseline"]] == [
        "same",
        "better",
    ]
    # --baseline naming one of the RUNs takes it out of the others
    named = run(
        "compare",
        e["better"],
        e["base"],
        e["same"],
        "--baseline",
        e["base"],
        "-m",
        "faithfulness",
        "--format",
        "json",
    )
    doc = json.loads(named.stdout)
    assert doc["baseline"] == "base" and doc["metrics"] == ["faithfulness"]
    assert [v["run"] for v in doc["versus_baseline"]] == ["better", "same"]


def test_fail_on_regression_exit_codes(evaluations):
    e = evaluations
    worse = run("compare", e["base"], e["same"], e["worse"], e["better"], "--fail-on-regression")
    assert worse.returncode == 1, worse.stderr
    assert worse.stderr.count("REGRESSION") == 1
    fine = run("compare", e["base"], e["same"], e["better"], "--fail-on-regression")
    assert fine.returncode == 0, fine.stderr
    # the worse run as the baseline: every other run is better, none regressed
    flipped = run(
        "compare", e["same"], e["better"], "--baseline", e["worse"], "--fail-on-regression"
    )
    assert flipped.returncode == 0, flipped.stderr


def test_two_runs_keep_the_two_run_output(evaluations, tmp_path):
    e = evaluations
    plain = run("compare", e["base"], e["worse"], "--format", "json")
    via_baseline = run("compare", e["worse"], "--baseline", e["base"], "--format", "json")
    assert plain.returncode == via_baseline.returncode == 0
    doc = json.loads(plain.stdout)
    assert "diagnosis_b" in doc and doc["a"].endswith("base/results.jsonl")
    assert json.loads(via_baseline.stdout) == doc
    assert run("compare", e["base"], e["worse"], "--fail-on-regression").returncode == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--qrels", "q.txt"], "--qrels compares two run files A B, not 3"),
        (["--columns", "a,b"], "--columns takes COL_A,COL_B and one dataset"),
        (["--top-k", "3"], "--top-k applies to run files or --columns"),
    ],
)
def test_two_run_forms_refuse_many_runs(evaluations, args, message):
    e = evaluations
    done = run("compare", e["base"], e["same"], e["worse"], *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_one_evaluation_is_a_usage_error(evaluations):
    done = run("compare", evaluations["base"])
    assert done.returncode == 2 and "give two or more evaluations" in done.stderr
    same = run("compare", evaluations["base"], "--baseline", evaluations["base"] / "results.jsonl")
    assert same.returncode == 2 and "give two or more evaluations" in same.stderr
    qrels = run("compare", "a.txt", "b.txt", "--qrels", "q.txt", "--baseline", "a.txt")
    assert qrels.returncode == 2 and "--baseline applies to judge eval outputs" in qrels.stderr


def test_a_run_that_is_no_folder_and_no_stored_run_is_one_line(tmp_path):
    absent = run("compare", "nosuch", "other", "--runs", tmp_path / "none.sqlite")
    assert absent.returncode == 2
    assert "RUN 'nosuch': no such file or folder, and no run store at" in absent.stderr
    assert not (tmp_path / "none.sqlite").exists()  # looking never makes a store
    from judge.runs.store import RunStore

    RunStore(tmp_path / "runs.sqlite").close()
    unknown = run("compare", "nosuch", "other", "--runs", tmp_path / "runs.sqlite")
    assert unknown.returncode == 2 and "nosuch" in unknown.stderr
    assert "judge runs list" in unknown.stderr
