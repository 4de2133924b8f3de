"""The columnar reader of TREC files: same dicts, values and errors as the line reader."""

from __future__ import annotations

import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import judge.ir.arrow as arrow
import judge.ir.trec_columns as columns
from judge.errors import CoverageWarning, InputFormatError
from judge.ir import evaluate, read_qrels, read_run
from judge.ir.trec import read_qrels_by_line, read_run_by_line, write_qrels
from judge.ir.trec_columns import read_columns

FIXTURE = HealthCheck.function_scoped_fixture  # tmp_path is rewritten on every example
FIXTURE = HealthCheck.function_scoped_fixture  # tmp_path is reused: each example rewrites it
METRICS = ["ndcg@10", "ndcg", "map", "map@5", "mrr", "P@3", "recall@5", "r_precision"]


def outcome(reader: Any, path: Path) -> Any:
    """What a reader returns (with the order of its keys), or the error it raises."""
    try:
        result = reader(path)
    except InputFormatError as exc:
        return ("error", str(exc), exc.line)
    return ("ok", [(q, list(docs.items())) for q, docs in result.items()])


# These also rank the docs graded 0 (every path ranks those only when they are asked for).
JUDGED_METRICS = [*METRICS, "bpref", "judged@1", "judged@5"]


def quiet(qrels: Any, run: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)
        result = evaluate(qrels, run, METRICS, per_query=True)
        judged = evaluate(qrels, run, JUDGED_METRICS, per_query=True)
    return dict(result), result.missing_queries, result.unjudged_queries, dict(judged)


# Tokens and separators that str.split() and a CSV reader could read differently.
ODD_FIELDS = [
    *("", "nan", "NaN", "-inf", "Infinity", "1e400", "1_0", "0x10", "0X1f", "+1", "-0", "007"),
    *("é", "٣", "a\x00b", '"q"', "'q'", "#", "1,5", "1.5e", "\ufeffq", "0_5", "\uff11"),
    *("a\x1cb", "a\xa0b", "a\u3000b", ".5", "1.", "+inf", "-INFINITY", "a\rb"),
]
# trec_eval splits on C white space (space, \t, \v, \f, \r): the others are bytes of an id.
ODD_SEPARATORS = [
    *("  ", "\t", " \t", "\x0b", "\x0c", "\r", " \r", "\x1c", "\x1d", "\x1e", "\x1f"),
    *("\xa0", "\u2003", "\u3000", "\u2028", "\u2029", "\x85", "\x00"),
]
ODD_ENDINGS = ["\r\n", "\r", " \n", "\n\n", "\n \n", "\n\r\n", ""]


@st.composite
def texts(draw: st.DrawFn, fields: int) -> str:
    """A well-formed file of `fields` fields per line, then a few kinds of damage."""
    ids = st.sampled_from(["q1", "q2", "10", "Q"])
    docs = st.sampled_from(["d1", "d2", "D3", "d10", "x#1", "a-b"])
    grades = ["0", "1", "2", "-1", "3"]
    values = st.sampled_from(grades if fields == 4 else [*grades, "0.5", "1e3", "-0.25", "inf"])
    rows = []
    for i in range(draw(st.integers(0, 6))):
        rest = [draw(values)] if fields == 4 else [str(i), draw(values), "tag"]
        rows.append([draw(ids), "0" if fields == 4 else "Q0", draw(docs), *rest])
    separators = [[" "] * (fields - 1) for _ in rows]
    endings = ["\n"] * len(rows)
    for _ in range(draw(st.integers(0, 2)) if rows else 0):
        i = draw(st.integers(0, len(rows) - 1))
        damage = draw(st.integers(0, 5))
        if damage == 0:  # an odd field (the value most often); "" makes two separators meet
            value = 3 if fields == 4 else 4
            column = draw(st.sampled_from([value, value, value, *range(fields)]))
            rows[i][min(column, len(rows[i]) - 1)] = draw(st.sampled_from(ODD_FIELDS))
        elif damage == 1:
            at = draw(st.integers(0, len(separators[i]) - 1))
            separators[i][at] = draw(st.sampled_from(ODD_SEPARATORS))
        elif damage == 2:  # one field fewer or more
            rows[i] = rows[i][:-1] if draw(st.booleans()) else [*rows[i], "extra"]
            separators[i] = [" "] * (len(rows[i]) - 1)
        elif damage == 3:  # a doc listed twice for a query
            rows.append(list(rows[i]))
            separators.append(list(separators[i]))
            endings.append("\n")
        elif damage == 4:  # "" joins the line to the next one
            endings[i] = draw(st.sampled_from(ODD_ENDINGS))
        else:  # a space at the start of the line
            rows[i] = [" " + rows[i][0], *rows[i][1:]]
    tab = draw(st.booleans())
    return "".join(
        "".join(
            f + ("\t" if tab and s == " " else s) for f, s in zip(row, [*seps, ""], strict=True)
        )
        + ending
        for row, seps, ending in zip(rows, separators, endings, strict=True)
    )


@settings(max_examples=500, deadline=None, suppress_health_check=[FIXTURE])
@given(qrels_text=texts(4), run_text=texts(6))
def test_readers_agree_with_the_line_reader(tmp_path: Path, qrels_text: str, run_text: str) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text(qrels_text, encoding="utf-8")
    run.write_text(run_text, encoding="utf-8")
    assert outcome(read_qrels, qrels) == outcome(read_qrels_by_line, qrels)
    assert outcome(read_run, run) == outcome(read_run_by_line, run)


@pytest.mark.parametrize("odd", ODD_FIELDS)
@pytest.mark.parametrize(
    ("reader", "line_reader", "template"),
    [
        (read_qrels, read_qrels_by_line, "q 0 d {}\n"),
        (read_run, read_run_by_line, "q Q0 d 1 {} t\n"),
        (read_run, read_run_by_line, "q Q0 {} 1 0.5 t\n"),
    ],
)
def test_odd_fields_read_as_the_line_reader_reads_them(
    tmp_path: Path, reader: Any, line_reader: Any, template: str, odd: str
) -> None:
    path = tmp_path / "file"
    path.write_text("q 0 a 1\n" if reader is read_qrels else "q Q0 a 1 2.5 t\n")
    with path.open("a", encoding="utf-8") as out:
        out.write(template.format(odd))
    assert outcome(reader, path) == outcome(line_reader, path)


DOCS = ["d1", "d2", "d3", "d10", "D4", "a", "zz9"]
SCORES = [0.0, -0.0, 0.5, 1.0, 1.0 / 3, 2.0, float("inf"), -1e300]  # many exact ties


@st.composite
def collections_(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """Qrels and run lines: queries interleaved or grouped, missing, unjudged, tied."""
    qrels, run = [], []
    for q in draw(st.lists(st.sampled_from(["q1", "q2", "q10", "Q3", "x"]), unique=True)):
        judged = draw(st.lists(st.sampled_from(DOCS), unique=True, max_size=5))
        qrels += [f"{q} 0 {d} {draw(st.sampled_from([-1, 0, 1, 2, 3]))}" for d in judged]
        retrieved = draw(st.lists(st.sampled_from(DOCS), unique=True, max_size=7))
        run += [f"{q} Q0 {d} 1 {draw(st.sampled_from(SCORES))!r} t" for d in retrieved]
    return draw(st.permutations(qrels)), draw(st.permutations(run))


@settings(max_examples=300, deadline=None, suppress_health_check=[FIXTURE])
@given(case=collections_())
def test_files_score_exactly_as_dicts(tmp_path: Path, case: tuple[list[str], list[str]]) -> None:
    qrels_lines, run_lines = case
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("".join(line + "\n" for line in qrels_lines))
    run.write_text("".join(line + "\n" for line in run_lines))
    if not qrels_lines:
        with pytest.raises(InputFormatError, match="no queries"):
            evaluate(qrels, run, METRICS)
        return
    assert read_columns(qrels, "qrels") is not None
    assert not run_lines or read_columns(run, "run") is not None
    expected = quiet(read_qrels_by_line(qrels), read_run_by_line(run))
    assert quiet(qrels, run) == expected  # == on floats: bit for bit
    assert quiet(str(qrels), read_run_by_line(run)) == expected
    assert quiet(read_qrels_by_line(qrels), run) == expected


def write_big(
    tmp_path: Path, queries: int = 40, docs: int = 60, odd: bool = False
) -> tuple[Path, Path]:
    lines, judged = [], []
    docs = 60
    for q in range(queries):
        for d in range(docs):
            lines.append(f"q{q} Q0 doc{(q * 7 + d * 13) % 97} {d} {(d * 37 % 11) / 4} run")
        judged += [f"q{q} 0 doc{(q * 7 + d * 13) % 97} {d % 4}" for d in range(0, docs, 3)]
    if odd:  # a line longer than a chunk, and blank lines that fill whole chunks
        lines.insert(len(lines) // 2, "q1 Q0 " + "x" * 300 + " 0 0.5 " + "long" * 50)
        lines.insert(len(lines) // 3, "\n" * 600)
    (tmp_path / "run").write_text("\n".join(lines) + "\n")
    (tmp_path / "qrels").write_text("\n".join(judged) + "\n")
    return tmp_path / "qrels", tmp_path / "run"


def test_small_chunks_long_lines_and_growing_arrays(tmp_path: Path, monkeypatch: Any) -> None:
    qrels, run = write_big(tmp_path, odd=True)
    expected = quiet(read_qrels_by_line(qrels), read_run_by_line(run))
    monkeypatch.setattr(columns, "_CHUNK_BYTES", 256)  # lines cross chunks; one is longer
    monkeypatch.setattr(columns, "_BATCH_LINES", 50)  # dicts built from several batches
    assert read_columns(run, "run") is not None
    assert quiet(qrels, run) == expected
    assert outcome(read_run, run) == outcome(read_run_by_line, run)
    lines = run.read_text().splitlines()
    run.write_text("\n".join(lines[::2] + lines[1::2]) + "\n")  # each query's lines apart
    assert quiet(qrels, run) == expected
    assert outcome(read_run, run) == outcome(read_run_by_line, run)


def test_hash_collisions_fall_back_to_exact_comparison(tmp_path: Path, monkeypatch: Any) -> None:
    qrels, run = write_big(tmp_path)
    expected = quiet(read_qrels_by_line(qrels), read_run_by_line(run))
    # Every string of one length hashes alike: a run "duplicates" ids, qrels match wrong docs.
    monkeypatch.setattr(columns, "string_hashes", lambda strings: _lengths(strings))
    monkeypatch.setattr("judge.ir.rank_columns.string_hashes", lambda strings: _lengths(strings))
    assert read_columns(run, "run") is None
    assert quiet(qrels, run) == expected
    (tmp_path / "one").write_text("q Q0 a 1 0.5 t\n")
    (tmp_path / "other").write_text("q 0 b 1\n")
    assert quiet(tmp_path / "other", tmp_path / "one")[0] == {"q": dict.fromkeys(METRICS, 0.0)}


def _lengths(strings: Any) -> Any:
    import numpy as np

    offsets = arrow.to_numpy(strings, np.int32, extra=1)
    return np.diff(offsets).astype(np.uint64)


@pytest.mark.parametrize("chunk_bytes", [None, 256])  # 256: the bad line in a later chunk
def test_malformed_files_keep_their_line_numbers(
    tmp_path: Path, monkeypatch: Any, chunk_bytes: int | None
) -> None:
    if chunk_bytes:  # parsed in the reader's thread while earlier chunks are stored
        monkeypatch.setattr(columns, "_CHUNK_BYTES", chunk_bytes)
    qrels, run = write_big(tmp_path)
    text = run.read_text().splitlines()
    text[1000] = "q1 Q0 doc1 1 high run"
    run.write_text("\n".join(text) + "\n")
    with pytest.raises(InputFormatError, match="score 'high' is not a number") as info:
        evaluate(qrels, run, ["map"])
    assert info.value.line == 1001 and info.value.path == str(run)
    text[1000] = text[999]
    run.write_text("\n".join(text) + "\n")
    with pytest.raises(InputFormatError, match="appears twice") as info:
        evaluate(qrels, run, ["map"])
    assert info.value.line == 1001


def test_without_pyarrow_the_line_reader_reads(tmp_path: Path, monkeypatch: Any) -> None:
    qrels, run = write_big(tmp_path)
    expected = quiet(read_qrels_by_line(qrels), read_run_by_line(run))
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    assert read_columns(run, "run") is None
    assert quiet(qrels, run) == expected


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_is_read_once_by_the_line_reader(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=pipe.write_text, args=("q Q0 a 1 0.5 t\nq Q0 b 2 0.25 t\n",))
    writer.start()
    try:
        assert read_run(pipe) == {"q": {"a": 0.5, "b": 0.25}}
    finally:
        writer.join()


def test_tab_separated_files_take_the_fast_path(tmp_path: Path) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_text("1048585\t0\t7187158\t1\n2\t0\td\t0\n")
    assert read_columns(path, "qrels") is not None
    assert read_qrels(path) == {"1048585": {"7187158": 1}, "2": {"d": 0}}


def test_a_grouped_run_is_ranked_as_it_is_read(tmp_path: Path, monkeypatch: Any) -> None:
    import judge.ir.run_stream as run_stream

    qrels, run = write_big(tmp_path)  # every query's lines together, many exact ties
    expected = quiet(read_qrels_by_line(qrels), read_run_by_line(run))
    monkeypatch.setattr(columns, "_CHUNK_BYTES", 256)  # queries (and ties) cross chunks
    judged = read_columns(qrels, "qrels")
    assert judged is not None
    assert run_stream.rank_run_file(judged, run) is not None
    assert quiet(qrels, run) == expected
    lines = run.read_text().splitlines()
    run.write_text("\n".join(lines[::2] + lines[1::2]) + "\n")  # each query's lines apart
    assert run_stream.rank_run_file(judged, run) is None  # read whole instead, same values
    assert quiet(qrels, run) == expected
    run.write_text("\n".join([*lines[:6], lines[5], *lines[6:]]) + "\n")  # a doc twice
    assert run_stream.rank_run_file(judged, run) is None
    with pytest.raises(InputFormatError, match="appears twice"):
        evaluate(qrels, run, ["map"])


@settings(max_examples=200, deadline=None)
@given(
    chunks=st.lists(st.lists(st.text(max_size=6), max_size=5), min_size=1, max_size=4),
    picks=st.lists(st.integers(0, 10**6), max_size=12),
    sliced=st.booleans(),
)
def test_take_gathers_what_pyarrow_take_gathers(
    chunks: list[list[str]], picks: list[int], sliced: bool
) -> None:
    import numpy as np
    import pyarrow as pa

    kind = pa.large_string() if len(chunks) % 2 else pa.string()  # (take's own when big)
    parts = [pa.array(chunk, kind) for chunk in chunks]
    if sliced:  # arrays that start inside their buffers
        parts = [part.slice(min(1, len(part))) for part in parts]
    strings = pa.chunked_array(parts, kind)
    if not len(strings):
        return
    rows = np.array([p % len(strings) for p in picks], dtype=np.int64)
    assert arrow.take(strings, rows).to_pylist() == strings.take(pa.array(rows)).to_pylist()
    first = parts[0]
    if len(first):
        rows = rows % len(first)
        assert arrow.take(first, rows).to_pylist() == first.take(pa.array(rows)).to_pylist()


@settings(max_examples=300, deadline=None)
@given(
    strings=st.lists(st.text(max_size=30), min_size=1, max_size=30),
    start=st.integers(0, 30),
)
def test_equal_strings_hash_alike_wherever_they_are(strings: list[str], start: int) -> None:
    import numpy as np
    import pyarrow as pa

    hashes = arrow.string_hashes(pa.array(strings, pa.string()))
    alone = [int(arrow.string_hashes(pa.array([s], pa.string()))[0]) for s in strings]
    assert hashes.tolist() == alone  # whatever else is in the array, however long
    part = pa.array(strings, pa.string()).slice(min(start, len(strings)))
    assert np.array_equal(arrow.string_hashes(part), hashes[len(strings) - len(part) :])
    assert len(set(alone)) == len(set(strings))  # (and these few do not collide)


@pytest.mark.parametrize(
    "grade", ["1" * 18, "-" + "9" * 18, "1" * 19, "9" * 30, "-0", "0007", "+3", "-", "--1", "1-"]
)
def test_long_and_odd_grades_read_as_the_line_reader_reads_them(tmp_path: Path, grade: str) -> None:
    path = tmp_path / "qrels"
    path.write_text(f"q 0 a 1\nq 0 b {grade}\nr 0 c -2\n")
    assert outcome(read_qrels, path) == outcome(read_qrels_by_line, path)


def test_ranking_a_big_run_file_does_not_import_pyarrow_compute(tmp_path: Path) -> None:
    # pyarrow.compute and numpy.ma (np.unique imports it) cost some 70 and 40 ms of
    # import that judge ir on big files does not need.
    import subprocess

    qrels, run = write_big(tmp_path)
    code = (
        "import sys; from judge.ir.run_stream import rank_run_file; "
        "from judge.ir.trec_columns import read_columns; "
        f"ranked = rank_run_file(read_columns({str(qrels)!r}, 'qrels'), {str(run)!r}, 0); "
        "print(ranked is not None, 'pyarrow.compute' in sys.modules, 'numpy.ma' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["True", "False", "False"], result.stderr


@settings(max_examples=500, deadline=None)
@given(
    text=st.binary(max_size=40).map(lambda b: bytes(b"ab \t\n\r\x01"[x % 7] for x in b)),
    separator=st.sampled_from([b" ", b"\t"]),
    scan=st.sampled_from([1, 2, 3, 7, 1 << 20]),
)
def test_empty_fields_are_found_across_scan_slices(
    text: bytes, separator: bytes, scan: int
) -> None:
    import threading

    if not text:
        return
    sep = separator
    # Separators side by side, or at either end of a line or of the text.
    expected = text.startswith(sep) or text.endswith(sep)
    expected |= any(
        p in text for p in (sep + sep, b"\n" + sep, sep + b"\n", b"\r" + sep, sep + b"\r")
    )
    old = columns._SCAN_BYTES, columns._SCRATCH
    columns._SCAN_BYTES, columns._SCRATCH = scan, threading.local()
    try:
        assert columns._empty_field(text, len(text), separator) == expected
    finally:
        columns._SCAN_BYTES, columns._SCRATCH = old


def test_a_chunk_parsed_keeps_its_ids_when_the_next_chunk_reuses_the_buffer() -> None:
    # Each chunk is copied into one pyarrow buffer the reading thread keeps: what a parsed
    # chunk holds must be pyarrow's copies, not views of that buffer.
    first = b"".join(b"q1 Q0 doc%d %d %d.5 run\n" % (i, i, i) for i in range(500))
    second = b"".join(b"zz Q0 other%d %d 0.25 run\n" % (i, i) for i in range(300))
    piece = columns.parse_chunk(first, len(first), b" ", 6, "run")
    assert piece is not None
    distinct, _, docs, scores, _ = piece
    kept = columns._SCRATCH.buffer
    columns.parse_chunk(second, len(second), b" ", 6, "run")  # a shorter chunk: the same buffer
    assert columns._SCRATCH.buffer is kept
    assert distinct == ["q1"]
    assert [doc for chunk in docs for doc in chunk.to_pylist()] == [f"doc{i}" for i in range(500)]
    assert scores.tolist() == [i + 0.5 for i in range(500)]


def test_comment_lines_are_skipped_as_trec_eval_skips_them(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # trec_eval's formats: "Lines starting with '#' are ignored". They were read as data: a
    # judged query '#q2' missing from the run lowered every mean.
    qrels, run = write_big(tmp_path)
    expected = quiet(qrels, run)
    qrels.write_text("#q2 0 doc1 1\n# judged by hand\n" + qrels.read_text())
    lines = run.read_text().splitlines()
    lines.insert(len(lines) // 2, "# q1 Q0 doc3 1 9.5 a comment of six fields")
    run.write_text("# a run\n" + "\n".join(lines) + "\n")
    for chunk_bytes in (None, 256):  # one chunk, or the comment in a later one
        if chunk_bytes:
            monkeypatch.setattr(columns, "_CHUNK_BYTES", chunk_bytes)
        assert quiet(qrels, run) == expected
        assert outcome(read_run, run) == outcome(read_run_by_line, run)
        assert outcome(read_qrels, qrels) == outcome(read_qrels_by_line, qrels)
    assert "#q2" not in read_qrels_by_line(qrels)
    with pytest.raises(InputFormatError, match="'#' is a comment"):
        write_qrels({"#q": {"d": 1}}, tmp_path / "out")
