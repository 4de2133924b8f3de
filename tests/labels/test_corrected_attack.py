"""Attacks on `judge eval --labels` and its gates (issue 42)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.testing import heuristic_judge
from tests.helpers.cli import run
from tests.helpers.corrected_runs import (
    CHOSEN,
    SAMPLE,
    data_file,
    eval_command,
    labels_file,
    write_jsonl,
)
from tests.helpers.labels import row


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return data_file(tmp_path)


def test_labels_of_no_row_of_the_run_never_pass_a_gate(tmp_path, data, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": f"other{i}", "faithful": i % 2, "sample": SAMPLE} for i in CHOSEN],
    )
    done = run(
        *eval_command(data, fake_llm_server, tmp_path / "out", "--gate", "faithfulness>=0.1"),
        "--labels",
        labels,
        "--label",
        "faithful",
    )
    assert done.returncode == 2, (done.stdout, done.stderr)


def test_labels_all_one_grade_without_an_interval_miss_the_gate(tmp_path, data, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": f"r{i}", "faithful": 0.5, "sample": SAMPLE} for i in CHOSEN],
    )
    done = run(
        *eval_command(data, fake_llm_server, tmp_path / "out", "--gate", "faithfulness>=0.1"),
        "--labels",
        labels,
        "--label",
        "faithful",
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["label_corrected"]["ppi"]["low"] is None
    assert summary["thresholds"]["missed"] == [
        "faithfulness: the label-corrected (PPI) interval's lower end n/a < 0.1"
    ]


def test_labels_edited_mid_run_are_the_labels_checked_before_it(tmp_path, data, fake_llm_server):
    """The labels are read and checked before any request; an edit while the rows are
    judged (another metric's labels, here) must not change what corrects the run."""
    labels = labels_file(tmp_path / "labels.jsonl")
    edited = []

    def chat(body):
        if not edited:
            edited.append(True)
            labels_file(tmp_path / "labels.jsonl", metric="answer_relevancy")
        return heuristic_judge(body)

    fake_llm_server.chat = chat
    done = run(
        *eval_command(data, fake_llm_server, tmp_path / "out", "--gate", "faithfulness>=0.1"),
        "--labels",
        labels,
        "--label",
        "faithful",
        "--require-random",
    )
    assert edited and done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["label_corrected"]["metric"] == "faithfulness"
    assert summary["label_corrected"]["n_labelled"] == 30


@pytest.mark.parametrize("extra", [(), ("--processes", "2")], ids=["one process", "processes"])
def test_labels_of_no_row_are_refused_before_any_request(tmp_path, data, fake_llm_server, extra):
    """The ids were matched to the rows only when the run was written: labels of no row
    of the data cost a whole judged run, then exit 2 with no results.jsonl."""
    fake_llm_server.chat = heuristic_judge
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": f"other{i}", "faithful": i % 2, "sample": SAMPLE} for i in CHOSEN],
    )
    done = run(
        *eval_command(data, fake_llm_server, tmp_path / "out", *extra),
        "--labels",
        labels,
        "--label",
        "faithful",
    )
    assert done.returncode == 2 and fake_llm_server.requests == [], done.stderr
    assert f"no labelled id is a row of {data} (labels for ids 'other0'" in done.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_a_dry_run_says_a_run_would_refuse_labels_of_no_row(tmp_path, data, fake_llm_server):
    """--dry-run checks the data as a run would: labels a run would refuse are said, exit 2."""
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": f"other{i}", "faithful": i % 2, "sample": SAMPLE} for i in CHOSEN],
    )
    flags = ("--labels", labels, "--label", "faithful", "--dry-run")
    done = run(*eval_command(data, fake_llm_server, tmp_path / "out"), *flags)
    assert done.returncode == 2 and fake_llm_server.requests == [], done.stderr
    assert "--dry-run: a run would refuse the labels: no labelled id is a row of" in done.stderr
    assert not (tmp_path / "out").exists()
    good = labels_file(tmp_path / "good.jsonl")
    passed = run(
        *eval_command(data, fake_llm_server, tmp_path / "out"), *flags[:1], good, *flags[2:]
    )
    assert passed.returncode == 0 and fake_llm_server.requests == [], passed.stderr


def test_labels_of_an_id_of_several_rows_are_refused_before_any_request(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    rows = [row(i, 2, i % 2) for i in range(6)]
    rows[4]["id"] = "r1"  # r1 twice: its label cannot be joined to one row
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": f"r{i}", "faithful": 1, "sample": SAMPLE} for i in (0, 1)],
    )
    done = run(
        *eval_command(data, fake_llm_server, tmp_path / "out"),
        "--labels",
        labels,
        "--label",
        "faithful",
    )
    assert done.returncode == 2 and fake_llm_server.requests == [], done.stderr
    assert "ids 'r1' name several rows" in done.stderr


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        # labels of a metric the run does not compute
        ({"metric": "answer_relevancy"}, "no metric 'answer_relevancy' in the run"),
        # labels that name no metric, of a run of two (and no gate to tell)
        ({"metric": None}, "which metric are the labels of?"),
    ],
    ids=["another metric", "no metric named"],
)
def test_labels_of_no_metric_of_the_run_are_refused_before_any_request(
    tmp_path, data, fake_llm_server, fields, said
):
    fake_llm_server.chat = heuristic_judge
    labels = labels_file(tmp_path / "labels.jsonl", **fields)
    command = eval_command(data, fake_llm_server, tmp_path / "out")
    command[command.index("faithfulness")] = "faithfulness,hallucination_rate"
    done = run(*command, "--labels", labels, "--label", "faithful")
    assert done.returncode == 2 and fake_llm_server.requests == [], done.stderr
    assert said in done.stderr and "--label-metric" in done.stderr


def test_compare_fails_on_a_regression_the_labels_show_and_the_judge_hides(tmp_path):
    """B's judge calls every row faithful, people call none of B's labelled rows so: the
    judge's difference is a gain, the corrected one a loss whose whole interval is below
    0; --fail-on-regression must fail."""
    from tests.helpers.corrected_runs import PEOPLE, SCORES, write_run

    a = write_run(tmp_path / "a", SCORES)
    b = write_run(tmp_path / "b", [1.0] * len(SCORES))
    labels_a = labels_file(tmp_path / "a.jsonl")
    labels_b = labels_file(tmp_path / "b.jsonl", [0] * len(PEOPLE))
    args = ["compare", a, b, "--labels-a", labels_a, "--labels-b", labels_b, "--label", "faithful"]
    shown = run(*args, "--format", "json")
    corrected = json.loads(shown.stdout)["label_corrected"]
    assert corrected["judge_only"]["mean"] > 0 > corrected["ppi"]["high"]
    done = run(*args, "--fail-on-regression")
    assert done.returncode == 1, done.stderr
    assert "REGRESSION: faithfulness got worse by the labels" in done.stderr
    assert run(*args).returncode == 0  # without the flag, said only


def test_graded_labels_of_a_lower_is_better_metric_are_refused_not_a_negative_rate(tmp_path):
    """hallucination_rate is read as 1 - score against labels on [0, 1]: 1-5 grades gave a
    corrected rate of -1.42 that met the cap hallucination_rate<=0.2."""
    import judge
    from judge.errors import InputFormatError
    from judge.labels.estimate import Labels
    from judge.run.rows import ResultRow
    from tests.helpers.corrected_runs import PEOPLE, SCORES

    view = type("View", (), {})()
    view.rows = [
        ResultRow(row=i, id=f"r{i}", scores={"hallucination_rate": 1 - s})
        for i, s in enumerate(SCORES)
    ]
    view.summary = {}
    view.config = type("Config", (), {"source": "data.jsonl", "lower_is_better": []})()
    graded = [1 + 4 * p for p in PEOPLE]
    labels = labels_file(tmp_path / "labels.jsonl", graded, metric="hallucination_rate")
    gates = judge.Gates.of(["hallucination_rate<=0.2"])
    with pytest.raises(InputFormatError, match=r"labels in 'faithful' run from 1\.000 to 5\.000"):
        Labels(labels, label="faithful").correct(view, gates)
