"""Rows read from their JSON-lines file when used (`load_rows_lazily`): the same rows as
`load_rows`, the same refusals, and the same run when judged."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judge.aio import run_sync
from judge.errors import InputFormatError
from judge.run.data import load_rows, load_rows_lazily
from judge.run.evaluate import aevaluate_rows, evaluate
from judge.run.options import RunSpec

ROWS = [
    {
        "id": "a",
        "question": "Who?",
        "answer": "Ann",
        "contexts": ["Ann did."],
        "ground_truth": "Ann did it.",  # context_recall, a default metric, scores a row
        "retrieved_ids": ["d1", "d2"],
        "relevance": {"d2": 1},
    },
    {"question": "What?", "answer": "A pen\u2028ink", "contexts": ["pen"], "topic": "office"},
    {"question": "Where?", "answer": 3, "contexts": ["here"]},  # a bad row: its error kept
    {
        "id": "d",
        "question": "When?",
        "answer": "Now",
        "contexts": [],
        "retrieved_ids": ["d2"],
        "relevance": ["d2"],
        "app_error": {"type": "ValueError", "message": "no"},
    },
]


def write(path: Path, rows: list[dict], blank: bool = True) -> Path:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    text = ("\n\n" if blank else "\n").join(lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def test_lazy_rows_are_the_rows_load_rows_gives(tmp_path):
    path = write(tmp_path / "data.jsonl", ROWS)
    eager, columns, source = load_rows(path)
    lazy, lazy_columns, lazy_source = load_rows_lazily(path)
    assert (lazy_columns, lazy_source) == (columns, source)
    assert len(lazy) == 4 and list(lazy) == eager
    assert lazy[2] == eager[2] and lazy[-1] == eager[3] and lazy[1:3] == eager[1:3]
    assert eager[2].error is not None and eager[3].error.startswith("the app failed")


def test_a_line_that_is_not_an_object_is_refused_with_its_number(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "Who?"}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"data.jsonl:2: a list, not an object"):
        load_rows_lazily(path)
    path.write_text('{"question": "Who?"}\n{"question": \n', encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"data.jsonl:2: not JSON"):
        load_rows_lazily(path)
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match="no rows to evaluate"):
        load_rows_lazily(path)


def test_a_run_over_lazy_rows_writes_what_a_run_over_loaded_rows_writes(models, tmp_path):
    path = write(tmp_path / "data.jsonl", ROWS * 3, blank=False)
    eager = evaluate(path, progress=False, **models)
    eager.write(tmp_path / "eager")
    lazy = run_sync(aevaluate_rows(*load_rows_lazily(path), RunSpec(progress=False, **models)))
    lazy.write(tmp_path / "lazy")
    assert (tmp_path / "lazy" / "results.jsonl").read_bytes() == (
        tmp_path / "eager" / "results.jsonl"
    ).read_bytes()
    pages = [(tmp_path / k / "report.html").read_text() for k in ("eager", "lazy")]
    timeless = [re.sub(r"&quot;seconds&quot;: [0-9.]+", "", page) for page in pages]
    assert timeless[0] == timeless[1]
    summaries = [json.loads((tmp_path / k / "summary.json").read_text()) for k in ("eager", "lazy")]
    for summary in summaries:
        summary["config"].pop("seconds")
    assert summaries[0] == summaries[1]


def test_a_file_changed_after_it_was_read_is_refused_not_read_at_old_offsets(tmp_path):
    # found in review: a test set edited during judge experiment was read again at the
    # offsets of its old lines (wrong labels in silence, or "not JSON" with no reason)
    from judge.run.data import JsonlRecords

    path = tmp_path / "rows.jsonl"
    path.write_text('{"question": "a", "tag": 0}\n{"question": "b", "tag": 0}\n')
    records = JsonlRecords.scan(path)
    assert records[1]["question"] == "b"
    path.write_text('{"question": "a", "tag": 1}\n{"question": "b", "tag": 1}\n')  # same size
    with pytest.raises(InputFormatError, match=r"rows\.jsonl changed since it was read"):
        records[1]
    with pytest.raises(InputFormatError, match=r"changed since it was read"):
        list(records)


def test_lines_are_read_as_the_whole_file_reader_reads_them(tmp_path):
    # found in review: a line of only U+00A0 was "not JSON" (bytes.strip is ASCII only),
    # and a file with CR line endings failed with "Extra data"
    path = tmp_path / "rows.jsonl"
    path.write_text('{"question": "a"}\n\u00a0\n{"question": "b"}\n', encoding="utf-8")
    assert [r["question"] for r in load_rows_lazily(path)[0].records] == ["a", "b"]
    old_mac = tmp_path / "cr.jsonl"
    old_mac.write_bytes(b'{"question": "a"}\r{"question": "b"}\r')
    with pytest.raises(InputFormatError, match=r"cr\.jsonl:1: .*carriage returns? alone"):
        load_rows_lazily(old_mac)
