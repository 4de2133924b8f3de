"""The labels file: every record appended whole and synced, the latest of a person's
records for a row winning, and a line cut off by a kill reported and left out without
losing the lines before it or stopping the next writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.annotate.labels_file import LabelsWriter, read_labels_file
from judge.errors import InputFormatError


def label(row: int, value: int | None, annotator: str = "ana") -> dict:
    return {"id": f"r{row}", "label": value, "annotator": annotator}


def test_the_latest_record_of_a_person_for_a_row_wins(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    writer = LabelsWriter(path)
    for record in (label(0, 1), label(1, 0), label(0, 0), label(0, 1, "bob")):
        writer.append(record)
    writer.close()
    log = read_labels_file(path)
    assert log.problems == []
    latest = log.latest()
    assert latest[("ana", "r0")]["label"] == 0 and latest[("bob", "r0")]["label"] == 1
    assert set(log.latest("ana")) == {("ana", "r0"), ("ana", "r1")}
    assert log.annotators() == ["ana", "bob"]


def test_a_line_cut_off_mid_write_is_said_and_the_earlier_lines_kept(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    writer = LabelsWriter(path)
    writer.append(label(0, 1))
    writer.append(label(1, 0))
    writer.close()
    whole = json.dumps(label(2, 1))
    with open(path, "ab") as handle:
        handle.write(whole[: len(whole) // 2].encode())  # killed mid-write
    log = read_labels_file(path)
    assert [r["id"] for r in log.labels] == ["r0", "r1"]
    assert len(log.problems) == 1 and "line 3 was cut off mid-write" in log.problems[0]
    # The next server goes on: its first record starts on a line of its own.
    writer = LabelsWriter(path)
    writer.append(label(2, 1))
    writer.close()
    log = read_labels_file(path)
    assert [r["id"] for r in log.labels] == ["r0", "r1", "r2"]
    assert len(log.problems) == 1 and "line 3 cannot be read" in log.problems[0]


def test_a_damaged_line_in_the_middle_is_left_out_and_the_rest_read(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    lines = [json.dumps(label(0, 1)), "not json", json.dumps(label(1, 2)), json.dumps(label(2, 0))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    log = read_labels_file(path)
    assert [r["id"] for r in log.labels] == ["r0", "r2"]
    assert [p.split(" line ")[1][:1] for p in log.problems] == ["2", "3"]
    assert "label 2 is not 0, 1 or null" in log.problems[1]


def test_an_absent_file_is_empty_and_a_folder_is_refused(tmp_path: Path) -> None:
    assert read_labels_file(tmp_path / "none.jsonl").labels == []
    with pytest.raises(InputFormatError, match="is a folder"):
        read_labels_file(tmp_path)
