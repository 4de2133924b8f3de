"""Trace files cut short, damaged, empty or in the wrong encoding: an input error naming
the file and what to do (exit 2), never a traceback; an empty file is no traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from judge.errors import InputFormatError
from judge.traces.extract import ExtractSummary, read_rows
from tests.helpers.cli import run
from tests.helpers.rag_spans import scenarios
from tests.helpers.traces import (
    bad_crc_gzip,
    cut_gzip,
    export,
    langfuse_observations,
    write_json_lines,
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("damaged")
    bodies = export(scenarios, batch=4)
    plain = write_json_lines(bodies, folder / "traces.jsonl")
    observations = folder / "observations.jsonl"
    observations.write_text(
        "".join(json.dumps(o) + "\n" for o in langfuse_observations(bodies)), encoding="utf-8"
    )
    return {
        "plain": plain,
        "cut": cut_gzip(plain, folder / "cut.jsonl.gz"),
        "cut_early": cut_gzip(plain, folder / "cut_early.jsonl.gz", keep=0.05),
        "crc": bad_crc_gzip(plain, folder / "crc.jsonl.gz"),
        "observations": observations,
    }


@pytest.mark.parametrize("which", ["cut", "cut_early", "crc"])
def test_a_damaged_gzip_is_an_input_error_naming_the_file(files, which):
    with pytest.raises(InputFormatError) as caught:
        list(read_rows(files[which]))
    message = str(caught.value)
    assert str(files[which]) in message and "gzip" in message
    assert "the collector is still writing" in message


@pytest.mark.parametrize("which", ["cut", "crc"])
def test_extract_and_eval_say_so_with_exit_2(files, which, tmp_path):
    done = run("traces", "extract", files[which], "-o", tmp_path / "rows.jsonl")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and str(files[which]) in done.stderr
    done = run("eval", files[which], "--from", "otlp", "--out", tmp_path / "out", "--dry-run")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and str(files[which]) in done.stderr


def test_langfuse_gzip_is_read(files, tmp_path):
    packed = tmp_path / "observations.jsonl.gz"
    packed.write_bytes(gzip.compress(files["observations"].read_bytes()))
    plain = list(read_rows(files["observations"], source="langfuse"))
    assert plain and list(read_rows(packed, source="langfuse")) == plain
    assert list(read_rows(packed)) == plain  # told from the content


def test_langfuse_not_utf8_is_an_input_error(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        '{"id": "o1", "traceId": "t1", "type": "SPAN", "name": "caf\xe9"}\n'.encode("latin-1")
    )
    with pytest.raises(InputFormatError) as caught:
        list(read_rows(path, source="langfuse"))
    assert str(path) in str(caught.value) and "UTF-8" in str(caught.value)
    done = run("traces", "extract", path, "--from", "langfuse", "-o", tmp_path / "rows.jsonl")
    assert done.returncode == 2 and "Traceback" not in done.stderr


@pytest.mark.parametrize("source", [None, "otlp", "langfuse"])
@pytest.mark.parametrize(
    "content", [b"", b"\n", gzip.compress(b"", mtime=0)], ids=["empty", "newline", "gzip"]
)
def test_an_empty_trace_file_is_no_traces(tmp_path, source, content):
    path = tmp_path / "rotated.jsonl"
    path.write_bytes(content)
    summary = ExtractSummary()
    assert list(read_rows(path, source=source, summary=summary)) == []
    assert summary.traces == 0


def test_extract_of_an_empty_file_writes_no_rows(tmp_path):
    path = tmp_path / "rotated.jsonl"
    path.write_bytes(b"")
    done = run("traces", "extract", path, "-o", tmp_path / "rows.jsonl")
    assert done.returncode == 0, done.stderr
    assert "0 traces" in done.stdout and (tmp_path / "rows.jsonl").read_text() == ""
