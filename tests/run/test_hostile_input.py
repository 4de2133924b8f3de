"""Input files built to break the readers: JSON nested past Python's limit, a line longer
than any record, an integer of thousands of digits. Each is an input error naming the
file and line (exit 2), for `judge eval` (and its --dry-run) and `judge experiment`'s
streamed test set: never exit 70, never a whole line of gigabytes in memory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from judge.errors import InputFormatError
from judge.experiments.experiment import load_testset
from judge.run.data import load_rows, load_rows_lazily
from tests.helpers.cli import run

ROW = {"question": "Who wrote it?", "answer": "Ann did.", "contexts": ["Ann wrote it."]}


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def deep(depth: int) -> str:
    return json.dumps(ROW)[:-1] + ', "trace": ' + "[" * depth + "]" * depth + "}"


def huge_int() -> str:
    return json.dumps(ROW)[:-1] + ', "tokens": ' + "7" * 5000 + "}"


def dry_run(data: Path, tmp_path: Path, **options) -> object:
    return run(
        "eval", data, "--dry-run", "--metrics", "faithfulness", "--model", "openai/judge-model",
        "--out", tmp_path / "out", **options,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("line", "why"), [(deep(5000), "JSON nested too deeply"), (huge_int(), "not JSON")]
)
def test_a_hostile_jsonl_line_is_an_input_error_naming_file_and_line(tmp_path, line, why):
    data = write_lines(tmp_path / "rows.jsonl", json.dumps(ROW), line)
    done = dry_run(data, tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{data}:2: {why}" in done.stderr and "Traceback" not in done.stderr
    for read in (load_rows, load_rows_lazily, load_testset):
        with pytest.raises(InputFormatError, match=f"{data}:2: {why}"):
            read(data)


def test_a_json_document_nested_too_deeply_is_an_input_error(tmp_path):
    data = tmp_path / "rows.json"
    data.write_text("[" + deep(5000) + "]", encoding="utf-8")
    done = dry_run(data, tmp_path)
    assert done.returncode == 2 and "nested too deeply" in done.stderr, done.stderr


def test_a_line_over_the_limit_is_refused_naming_file_line_limit_and_setting(tmp_path, monkeypatch):
    long_row = json.dumps({**ROW, "answer": "Ann " * 3000})  # 12 kB
    data = write_lines(tmp_path / "rows.jsonl", json.dumps(ROW), json.dumps(ROW), long_row)
    env = {**os.environ, "JUDGE_MAX_LINE_MB": "0.01"}  # 10485 bytes
    done = dry_run(data, tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert f"{data}:3: the line is longer than 10485 bytes" in done.stderr
    assert "JUDGE_MAX_LINE_MB" in done.stderr
    monkeypatch.setenv("JUDGE_MAX_LINE_MB", "0.01")
    for read in (load_rows, load_rows_lazily, load_testset):
        with pytest.raises(InputFormatError, match=f"{data}:3: the line is longer"):
            read(data)
    monkeypatch.setenv("JUDGE_MAX_LINE_MB", "1")
    assert len(load_rows(data)[0]) == 3


@pytest.mark.parametrize("value", ["0", "-1", "lots", "nan", "inf"])
def test_a_limit_that_is_no_size_is_a_usage_error(tmp_path, value):
    data = write_lines(tmp_path / "rows.jsonl", json.dumps(ROW))
    done = dry_run(data, tmp_path, env={**os.environ, "JUDGE_MAX_LINE_MB": value})
    assert done.returncode == 2 and "JUDGE_MAX_LINE_MB" in done.stderr, done.stderr


def test_lines_split_as_before_on_carriage_returns(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_bytes(b"\r\n".join(json.dumps({**ROW, "id": i}).encode() for i in range(3)))
    assert [r.sample.id for r in load_rows(data)[0]] == ["0", "1", "2"]
    data.write_bytes(b"\r".join(json.dumps({**ROW, "id": i}).encode() for i in range(3)))
    assert [r.sample.id for r in load_rows(data)[0]] == ["0", "1", "2"]


@pytest.mark.parametrize(
    "torn",
    [
        '{"run": "fp", "row": 1, "input": "h", "result": {"answer": "caf\u00e9'.encode()[:-1],
        b'{"run": "fp", "row": 1, "input": "h", "result": ' + b"[" * 5000,
        b'{"run": "fp", "row": 1, "input": "h", "n": ' + b"7" * 5000,
    ],
)
def test_a_checkpoint_torn_anywhere_is_resumed_without_its_last_line(tmp_path, torn):
    from judge.run.checkpoint import Checkpoint

    path = tmp_path / ".checkpoint.jsonl"
    path.write_bytes(b'{"run": "fp", "row": 0, "input": "h", "result": {}}\n' + torn)
    done = Checkpoint(path, "fp").load()
    assert (len(done), done.offset(0), done.offset(1)) == (1, 0, None)
