"""`judge annotate` used as its worst user uses it: a labels file begun by hand or by
another tool, flags out of range, the server's API sent what the page never sends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge.annotate import Annotation, Choice
from judge.errors import InputFormatError, OutputError
from judge.run.folder import RunFolder
from judge.run.rows import ResultRow
from tests.helpers.cli import run as run_cli


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run of 12 rows with faithfulness scores, no judge needed."""
    folder = tmp_path / "run"
    folder.mkdir()
    lines = [
        ResultRow(row=i, id=f"r{i}", scores={"faithfulness": (i % 4) / 3}).json_line()
        for i in range(12)
    ]
    (folder / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


def begun(run: Path, labels: Path, sample: Any) -> Path:
    """A labels file whose one record has the run's sha256 and the `sample` given."""
    record = {
        "id": "r0",
        "label": 1,
        "annotator": "ana",
        "sample": sample,
        "metric": "faithfulness",
        "results_sha256": RunFolder.of(run).results_sha256(),
    }
    labels.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return labels


@pytest.mark.parametrize(
    "sample",
    [
        {"method": "random"},  # no seed, no n: written by hand
        {"method": "random", "seed": "7", "n": "3", "of": 12},  # numbers as text
        {"method": "random", "seed": True, "n": 3, "of": 12},
        {"method": "random", "seed": 1.5, "n": 3, "of": 12},
        {"method": "stratified", "seed": 7, "n": 3, "of": 12},
    ],
)
def test_a_labels_file_begun_with_a_draw_judge_cannot_repeat_is_refused(
    run: Path, tmp_path: Path, sample: dict[str, Any]
) -> None:
    labels = begun(run, tmp_path / "labels.jsonl", sample)
    refused = r"labels\.jsonl: the draw its first label records .* cannot be drawn again"
    with pytest.raises(InputFormatError, match=refused):
        Annotation(run, labels, annotator="bob")
    done = run_cli("annotate", run, "--labels", labels, "--annotator", "bob", "--agreement")
    assert done.returncode == 2, done.stderr
    assert "internal error" not in done.stderr


def test_a_begun_draw_with_n_absent_means_every_row(run: Path, tmp_path: Path) -> None:
    labels = begun(run, tmp_path / "labels.jsonl", {"method": "random", "seed": 7, "n": None})
    assert len(Annotation(run, labels, annotator="bob").draw.rows) == 12


@pytest.mark.parametrize("port", ["-1", "65536", "70000"])
def test_a_port_out_of_range_is_a_usage_error(run: Path, tmp_path: Path, port: str) -> None:
    labels = tmp_path / "labels.jsonl"
    done = run_cli("annotate", run, "--labels", labels, "--annotator", "a", "--port", port)
    assert done.returncode == 2, done.stderr
    assert f"--port {port}: give a port from 0 to 65535" in done.stderr
    assert "internal error" not in done.stderr


def test_the_runs_own_files_are_never_taken_for_a_labels_file(run: Path, tmp_path: Path) -> None:
    # Tab completion gives --labels run/results.jsonl: the first key pressed would append
    # a label to the run's results (and summary.json is no labels file either).
    results = run / "results.jsonl"
    before = results.read_bytes()
    with pytest.raises(InputFormatError, match=r"is the run's results file"):
        Annotation(run, results, annotator="ana")
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"rows": 12, "means": {"faithfulness": 0.5}}, indent=2))
    with pytest.raises(InputFormatError, match=r"summary\.json holds no label record"):
        Annotation(run, summary, annotator="ana")
    done = run_cli("annotate", run, "--labels", results, "--annotator", "ana", "--port", "0")
    assert done.returncode == 2 and "is the run's results file" in done.stderr
    assert results.read_bytes() == before


def test_a_labels_file_whose_only_line_was_cut_off_is_resumed(run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"annotator": "ana", "claims": [], "id": "r', encoding="utf-8")
    annotation = Annotation(run, labels, annotator="ana")
    assert len(annotation.log.problems) == 1 and annotation.next_open(-1) == 0


def test_a_label_written_to_a_labels_file_deleted_meanwhile_is_not_said_saved(
    run: Path, tmp_path: Path
) -> None:
    # `rm labels.jsonl` (or a new file moved over it) while the server runs: its open file
    # is no longer the file on disk, and every label "saved" after that is lost at exit.
    labels = tmp_path / "labels.jsonl"
    annotation = Annotation(run, labels, annotator="ana")
    annotation.open()
    try:
        annotation.record(0, label=1, claims=[])
        labels.unlink()
        with pytest.raises(OutputError, match=r"labels\.jsonl was deleted or replaced"):
            annotation.record(1, label=0, claims=[])
        labels.write_text("")  # a new file of the same name
        with pytest.raises(OutputError, match=r"deleted or replaced"):
            annotation.record(1, label=0, claims=[])
    finally:
        annotation.close()


def test_the_same_command_resumes_when_sample_was_more_than_the_rows(
    run: Path, tmp_path: Path
) -> None:
    # --sample 50 of 12 rows draws 12 (and records n 12): the same command again resumes.
    labels = tmp_path / "labels.jsonl"
    first = Annotation(run, labels, annotator="ana", choice=Choice(sample=50, seed=3))
    first.open()
    first.record(0, label=1, claims=[])
    first.close()
    again = Annotation(run, labels, annotator="ana", choice=Choice(sample=50, seed=3))
    assert again.draw.rows == first.draw.rows and again.next_open(-1) == 1
    with pytest.raises(InputFormatError, match=r"begun with --sample 12"):
        Annotation(run, labels, annotator="ana", choice=Choice(sample=5))


def test_two_annotators_who_begin_one_file_at_once_with_two_draws_are_told(
    run: Path, tmp_path: Path
) -> None:
    # Both open the empty file before either labels: each draws its own rows. The first
    # label fixes the file's draw; the other's labels would be of rows of another draw.
    labels = tmp_path / "labels.jsonl"
    ana = Annotation(run, labels, annotator="ana", choice=Choice(seed=1, sample=5))
    bob = Annotation(run, labels, annotator="bob", choice=Choice(seed=2, sample=5))
    same = Annotation(run, labels, annotator="cy", choice=Choice(seed=1, sample=5))
    for annotation in (ana, bob, same):
        annotation.open()
    try:
        ana.record(0, label=1, claims=[])
        with pytest.raises(InputFormatError, match=r"begun meanwhile .* --seed 1"):
            bob.record(0, label=0, claims=[])
        same.record(0, label=0, claims=[])  # the same draw: labels go on
    finally:
        for annotation in (ana, bob, same):
            annotation.close()
    written = [json.loads(line) for line in labels.read_text().splitlines()]
    assert [r["annotator"] for r in written] == ["ana", "cy"]


def test_the_help_says_the_draw_is_of_every_row_as_it_is(run: Path, tmp_path: Path) -> None:
    # The draw is of the run's rows, those the judge could not score among them (the draw
    # must stay the same for a labels file begun before); the help said "scored rows".
    folder = tmp_path / "nan"
    folder.mkdir()
    lines = [
        ResultRow(
            row=i, id=f"r{i}", scores={"faithfulness": float("nan") if i else 1.0}
        ).json_line()
        for i in range(3)
    ]
    (folder / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    annotation = Annotation(folder, tmp_path / "labels.jsonl", annotator="ana")
    assert sorted(annotation.draw.rows) == [0, 1, 2]
    shown = " ".join(run_cli("annotate", "--help").stdout.split())
    assert "scored row" not in shown and "rows the judge scored" not in shown
    assert "judge estimate leaves out the labels of rows the judge could not score" in shown
