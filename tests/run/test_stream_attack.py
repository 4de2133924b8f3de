"""Attacks on inputs read as the run consumes them (`judge.run.inputs`): a file changed
between the pre-pass and the judging pass, odd line endings and characters, shards of
tiny inputs, and the dry run's view of the same files. The tests whose comment says what
was wrong hold the fix of a defect found so; the others hold what was found to work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import judge.run.local as local
from judge.errors import InputFormatError
from judge.run.data import load_rows
from judge.run.evaluate import evaluate
from judge.run.inputs import open_input
from judge.run.shard import Shard

RETRIEVAL = ["mrr", "ndcg@10"]  # scored without a judge: no server needed


def record(i: int, tag: str = "q") -> dict[str, Any]:
    """A row scored by retrieval metrics alone, padded so a file spans read buffers."""
    return {
        "id": f"{tag}{i:04d}",
        "question": f"What is {i}?" + " pad" * 50,
        "retrieved_ids": ["a", "b", f"d{i}"],
        "relevance": {"a": i % 2, f"d{i}": 1},
    }


def write_jsonl(path: Path, n: int, tag: str = "q") -> Path:
    path.write_text("".join(json.dumps(record(i, tag)) + "\n" for i in range(n)))
    return path


def write_csv(path: Path, n: int, *, start: int = 0, header: bool = True, mode: str = "w") -> Path:
    import pandas

    frame = pandas.DataFrame([record(i) for i in range(start, start + n)])
    for column in ("retrieved_ids", "relevance"):
        frame[column] = [json.dumps(v) for v in frame[column]]
    frame.to_csv(path, index=False, header=header, mode=mode)
    return path


def on_first_row(monkeypatch: Any, action: Any) -> None:
    """Run `action` once, when the first row is judged: after the pre-pass, while the
    judging pass reads the file."""
    judge_row = local.evaluate_row
    done: list[bool] = []

    async def hooked(row: Any, *args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(True)
            action()
        return await judge_row(row, *args, **kwargs)

    monkeypatch.setattr(local, "evaluate_row", hooked)


# Rows appended to the input while the run reads it were yielded past the count the
# pre-pass found, and the run died with "IndexError: array assignment index out of range"
# after judging the extra row (a paid request with an LLM judge): a row past the count is
# refused before it is judged, with the error every other change gets.
@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_rows_appended_during_the_run_are_refused_as_a_change(
    tmp_path: Path, monkeypatch: Any, kind: str
) -> None:
    if kind == "jsonl":
        path = write_jsonl(tmp_path / "d.jsonl", 40)

        def append() -> None:
            with path.open("a") as handle:
                handle.write(json.dumps(record(40)) + "\n")
    else:  # past pandas' first chunk of 1,024 rows, so the append is read
        path = write_csv(tmp_path / "d.csv", 1100)

        def append() -> None:
            write_csv(path, 1, start=1100, header=False, mode="a")

    on_first_row(monkeypatch, append)
    with pytest.raises(InputFormatError, match="changed"):
        evaluate(path, metrics=RETRIEVAL, progress=False, concurrency=1)


# A file truncated in place while the judging pass read it was refused with the wrong
# error: the reader parsed the cut line it found and said "d.jsonl:14: not JSON
# (Unterminated string ...)", sending the user to a line that is fine (or gone), when the
# pre-pass had parsed every line. A record that fails now is blamed on the change when the
# file changed.
def test_a_file_cut_short_during_the_run_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", 40)
    on_first_row(monkeypatch, lambda: write_jsonl(path, 5))
    with pytest.raises(InputFormatError, match="changed since it was read"):
        evaluate(path, metrics=RETRIEVAL, progress=False, concurrency=1)


def test_a_file_replaced_by_another_during_the_run_is_refused(
    tmp_path: Path, monkeypatch: Any
) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", 40)
    other = write_jsonl(tmp_path / "other.jsonl", 40, tag="Z")  # same size, a new inode

    def replace() -> None:
        stat = path.stat()
        os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        os.replace(other, path)

    on_first_row(monkeypatch, replace)
    with pytest.raises(InputFormatError, match="changed since it was read"):
        evaluate(path, metrics=RETRIEVAL, progress=False, concurrency=1)


# A file rewritten in place during the run (same inode, same size) with its modification
# time put back (`cp -p`, `touch -r`, `rsync --inplace -t`, a restore from a backup)
# passed the inode/size/mtime check: the run judged its first rows from the old content
# and the rest from the new, and reported success with a data_sha256 of that mix. The
# change time (st_ctime_ns), which no user can set back and which moves on every such
# write, is part of the identity.
def test_a_file_rewritten_in_place_with_its_time_kept_is_refused(
    tmp_path: Path, monkeypatch: Any
) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", 200)  # bigger than the read buffer

    def rewrite() -> None:
        stat = path.stat()
        write_jsonl(path, 200, tag="Z")  # same length: "q" -> "Z" in every id
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    on_first_row(monkeypatch, rewrite)
    try:
        result = evaluate(path, metrics=RETRIEVAL, progress=False, concurrency=1)
    except InputFormatError as exc:
        assert "changed" in str(exc)
        return
    ids = {row.id[0] for row in result.rows}
    pytest.fail(f"the run judged a mix of two files (ids starting {sorted(ids)}) and passed")


# A JSON-lines file with old Mac line endings (CR alone) was read with readline(), which
# splits on LF only, so the whole file was one "line": a CR-only file bigger than the line
# limit (JUDGE_MAX_LINE_MB, 64 MiB by default) was refused as "the line is longer than
# ..." though every record is short, and a smaller one was held whole in memory by the
# pre-pass and by the judging pass. Lines are split on CR too as they are read
# (`judge.lines.universal_lines`), and the limit applies to each.
def test_a_cr_only_file_bigger_than_the_line_limit_is_read(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("JUDGE_MAX_LINE_MB", "0.001")  # 1,048 bytes; each record is ~300
    path = tmp_path / "mac.jsonl"
    path.write_bytes("".join(json.dumps(record(i)) + "\r" for i in range(20)).encode())
    assert len(open_input(path)) == 20


def _odd_lines(path: Path) -> Path:
    """Every line ending (LF, CRLF, CR, none at the end), blank lines of Unicode spaces,
    and characters that other splitters take for line ends."""
    lines = [
        json.dumps({**record(0), "question": "a\u2028b\u2029c\x85d"}, ensure_ascii=False),
        json.dumps({**record(1), "question": "an escaped\nnewline"}),
        json.dumps({**record(2), "question": "lone \ud800 surrogate"}),  # escaped: \ud800
        '{"id": "raw", "question": "tab\there, form\x0cfeed", "retrieved_ids": ["a"], '
        '"relevance": {"a": 1}}',
        json.dumps({**record(4), "question": "\x1c\x1d\x1e\x1f separators"}, ensure_ascii=False),
        json.dumps(record(5)),
    ]
    text = (
        lines[0]
        + "\r\n"
        + lines[1]
        + "\r"
        + "\u3000\u2003\n"
        + lines[2]
        + "\n\x0b\x0c\n"
        + lines[3]
        + "\r\r\n"
        + lines[4]
        + "\n\u00a0\n"
        + lines[5]  # no newline at the end
    )
    path.write_bytes(text.encode("utf-8"))
    return path


def test_odd_lines_give_load_rows_rows_in_every_shard(tmp_path: Path) -> None:
    path = _odd_lines(tmp_path / "odd.jsonl")
    loaded, columns, _ = load_rows(path)
    rows = open_input(path)
    assert rows.columns == columns and list(rows) == loaded and len(loaded) == 6
    for count in (2, 3, 7):
        for index in range(1, count + 1):
            shard = Shard(index, count)
            assert list(rows.only(shard)) == [r for r in loaded if shard.holds(r.number)]


def test_a_bom_is_refused_alike_by_the_pre_pass_and_by_load_rows(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(record(0)).encode() + b"\n")
    with pytest.raises(InputFormatError) as loading:
        load_rows(path)
    with pytest.raises(InputFormatError) as opening:
        open_input(path)
    assert str(opening.value) == str(loading.value) and "BOM" in str(opening.value)


def _eval(data: Path, out: Path, *extra: object) -> bytes:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "judge", "eval", data, "--metrics", ",".join(RETRIEVAL)),
            *("--out", out, "--no-progress", "--no-record", "--max-error-rate", "0.5"),
            *map(str, extra),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return (out / "results.jsonl").read_bytes()


def test_processes_give_one_process_results_on_odd_lines_and_tiny_inputs(tmp_path: Path) -> None:
    odd = _odd_lines(tmp_path / "odd.jsonl")
    assert _eval(odd, tmp_path / "two", "--processes", 2) == _eval(odd, tmp_path / "one")
    one_row = tmp_path / "one_row.jsonl"
    one_row.write_text("\n\n" + json.dumps(record(0)))  # blank lines, no newline at the end
    assert _eval(one_row, tmp_path / "r2", "--processes", 2) == _eval(one_row, tmp_path / "r1")


def _no_rows(data: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "judge", "eval", data, "--metrics", "mrr"),
            *("--out", out, "--no-progress", "--no-record", *extra),
        ],
        capture_output=True,
        text=True,
    )


def test_processes_on_no_rows_is_the_error_one_process_gives(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n \r\n\t\n")
    for extra in ([], ["--processes", "2"]):
        done = _no_rows(empty, tmp_path / "o", *extra)
        assert done.returncode == 2 and "no rows to evaluate" in done.stderr, done.stderr


# A .jsonl file of blank lines, one of them of Unicode spaces (an ideographic space
# U+3000, as an editor in a CJK locale leaves), was taken for an OTLP protobuf trace file
# by the trace sniffing of `judge eval` (judge.traces.extract.source_of): "not an OTLP
# protobuf request (... Wire format was corrupt)", and with --processes "holds traces:
# --processes ... read rows files". The rows reader counts such lines as blank: the
# sniffing does too, so it is "no rows to evaluate", as for ASCII blank lines.
@pytest.mark.parametrize("extra", [[], ["--processes", "2"]], ids=["one", "processes"])
def test_blank_lines_of_unicode_spaces_are_no_rows_not_traces(
    tmp_path: Path, extra: list[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n \r\n\u3000\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match="no rows to evaluate"):
        open_input(empty)  # the rows reader: no rows
    done = _no_rows(empty, tmp_path / "o", *extra)
    assert done.returncode == 2 and "no rows to evaluate" in done.stderr, done.stderr


# A rows file whose first line is blank and whose next line is not JSON ("\\nnot json",
# a CSV header saved as .jsonl after an empty line) was taken for an OTLP protobuf trace
# file, because a protobuf request starts with the byte of a newline: the error blamed
# "Wire format was corrupt" instead of the line that is not JSON. A protobuf request
# holds binary ids; a head of text is not one.
@pytest.mark.parametrize(
    ("text", "line"),
    [("\nthis is not json\n", 2), ("\n\n\nquestion,answer\n", 4)],
    ids=["one", "three"],
)
def test_a_blank_first_line_then_text_is_a_rows_file_not_protobuf(
    tmp_path: Path, text: str, line: int
) -> None:
    from judge.traces.otlp import encoding_of

    data = tmp_path / "rows.jsonl"
    data.write_text(text, encoding="utf-8")
    assert encoding_of(data) is None
    done = _no_rows(data, tmp_path / "o")
    assert done.returncode == 2, done.stderr
    assert "not JSON" in done.stderr and "protobuf" not in done.stderr, done.stderr
    assert f"rows.jsonl:{line}: not JSON" in done.stderr, done.stderr


def _parquet_with_empty_row_groups(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"question": ["q0?", "q1?", "q2?"], "answer": ["a0", "a1", "a2"]})
    with pq.ParquetWriter(path, table.schema) as writer:
        for part in (table.slice(0, 0), table.slice(0, 2), table.slice(0, 0), table.slice(2)):
            writer.write_table(part)
    return path


def _parquet_with_a_map_column(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = pa.array([[("k", 1)], [("k", 2)]], pa.map_(pa.string(), pa.int64()))
    pq.write_table(pa.table({"question": ["q0?", "q1?"], "answer": ["a", "b"], "m": meta}), path)
    return path


# `judge eval --dry-run` (judge.run.dry_run) read a Parquet file through `load_rows`, i.e.
# through `datasets`, while the run itself reads it with pyarrow (`ParquetRecords`): a
# file with empty row groups (a writer flushed with nothing pending) or a map-typed
# column was judged fine by `judge eval` but refused by `judge eval --dry-run` ("cannot be
# read (DatasetGenerationError ...)" / "does not have a datasets dtype equivalent"), and
# by `judge.dry_run`. The dry run reads the input as the run does (`open_input`).
@pytest.mark.parametrize("make", [_parquet_with_empty_row_groups, _parquet_with_a_map_column])
def test_the_dry_run_reads_the_parquet_files_the_run_reads(tmp_path: Path, make: Any) -> None:
    from judge.run.dry_run import dry_run

    path = make(tmp_path / "d.parquet")
    read = list(open_input(path))  # the run reads it
    assert len(read) >= 2
    result = dry_run(path, metrics=["faithfulness"])
    assert result.rows == len(read) and not result.unreadable
