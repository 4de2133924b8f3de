"""`judge annotate` used as its worst user uses it: a labels file begun by hand or by
another tool, flags out of range, the server's API sent what the page never sends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge.annotate import Annotation
from judge.errors import InputFormatError
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
