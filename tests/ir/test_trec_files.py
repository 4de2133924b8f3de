"""Reading and writing TREC qrels and run files, and the errors a user gets on bad ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import judge.ir.small
from judge.cli.main import main
from judge.errors import InputFormatError, JudgeError
from judge.ir import evaluate, read_qrels, read_run, write_qrels, write_run
from judge.ir.trec import read_qrels_by_line, read_run_by_line


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_read_run_ignores_rank_column_and_trailing_fields(tmp_path):
    path = write(
        tmp_path, "run", "q1 Q0 a 9 0.5 tag\n\nq1 Q0 b 1 0.25 tag extra junk\nq2 Q0 a 1 -1e3 t\n"
    )
    assert read_run(path) == {"q1": {"a": 0.5, "b": 0.25}, "q2": {"a": -1000.0}}


def test_read_qrels_grades_and_ids_with_hash(tmp_path):
    path = write(tmp_path, "qrels", "2024-1 0 msmarco#4_1 3\n2024-1 0 x -1\n")
    assert read_qrels(path) == {"2024-1": {"msmarco#4_1": 3, "x": -1}}


@pytest.mark.parametrize(
    ("reader", "text", "line", "fragment"),
    [
        (read_qrels, "q 0 d 1\nq 0 e\n", 2, "expected 4 fields"),
        (read_qrels, "q 0 d high\n", 1, "grade 'high' is not an integer"),
        (read_qrels, "q 0 d 1\nq 0 e 0\nq 0 d 2\n", 3, "judged again (first on line 1)"),
        (read_run, "q Q0 d 1\n", 1, "found 4 fields"),
        (read_run, "q Q0 d 1 0.5 t\nq Q0 e 2 abc t\n", 2, "score 'abc' is not a number"),
        (read_run, "q Q0 d 1 nan t\n", 1, "score 'nan' is not a number"),
        (read_run, "q Q0 d 1 0.5 t\nq Q0 d 2 0.4 t\n", 2, "appears twice"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, reader, text, line, fragment):
    path = write(tmp_path, "file.txt", text)
    with pytest.raises(InputFormatError) as info:
        reader(path)
    assert info.value.path == str(path) and info.value.line == line
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert fragment in str(info.value)
    assert isinstance(info.value, JudgeError)


def test_missing_and_binary_files_are_clear_errors(tmp_path):
    with pytest.raises(InputFormatError, match="cannot open"):
        read_run(tmp_path / "absent.txt")
    path = tmp_path / "binary"
    path.write_bytes(b"q Q0 d 1 0.5 t\n\xff\xfe\n")
    with pytest.raises(InputFormatError, match="not UTF-8"):
        read_run(path)


def test_write_run_ranks_like_trec_eval_and_round_trips(tmp_path):
    run = {"q2": {"a": 0.1}, "q1": {"a": 0.5, "c": 0.5, "b": 1 / 3, "d": 2.0}}
    path = tmp_path / "out" / "run.txt"
    write_run(run, path, tag="mine")
    lines = path.read_text().splitlines()
    # Score descending, ties by doc id descending, queries sorted; ranks from 1.
    assert [line.split()[2] for line in lines] == ["d", "c", "a", "b", "a"]
    assert [line.split()[3] for line in lines] == ["1", "2", "3", "4", "1"]
    assert read_run(path) == run  # scores written with repr round-trip exactly
    with pytest.raises(InputFormatError, match="one non-empty word"):
        write_run(run, tmp_path / "x", tag="two words")


def test_write_qrels_round_trips(tmp_path):
    qrels = {"q": {"b": 2, "a": -1}, "p": {"z": 0}}
    write_qrels(qrels, tmp_path / "qrels")
    assert read_qrels(tmp_path / "qrels") == qrels
    assert (tmp_path / "qrels").read_text() == "p 0 z 0\nq 0 a -1\nq 0 b 2\n"


def test_evaluate_rejects_bad_values():
    with pytest.raises(InputFormatError, match="NaN for query 'q'"):
        evaluate({"q": {"a": 1}}, {"q": {"a": float("nan")}}, ["map"])
    with pytest.raises(InputFormatError, match="not an integer"):
        evaluate({"q": {"a": 1.5}}, {"q": {"a": 1.0}}, ["map"])
    with pytest.raises(InputFormatError, match="must be numbers"):
        evaluate({"q": {"a": 1}}, {"q": {"a": "high"}}, ["map"])
    with pytest.raises(InputFormatError, match="must be dicts"):
        evaluate([("q", "a", 1)], {}, ["map"])


def test_evaluate_names_the_query_of_a_nan_score_not_a_missing_judged_doc():
    # Judged docs the run did not retrieve are NaN internally too; only the run's NaN counts.
    qrels = {"a": {"x": 1, "y": 1}, "b": {"z": 1, "v": 0}}
    run = {"a": {"x": 1.0}, "b": {"z": 0.5, "w": float("nan")}}
    with pytest.raises(InputFormatError, match="NaN for query 'b'"):
        evaluate(qrels, run, ["map"])
    del run["b"]["w"]
    assert evaluate(qrels, run, ["map"])["map"] == pytest.approx((0.5 + 1.0) / 2)
    with pytest.raises(InputFormatError, match="no queries"):
        evaluate({}, {"q": {"a": 1.0}}, ["map"])
    with pytest.raises(JudgeError, match="relevance_level must be an integer"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["map"], relevance_level=1.5)


QRELS_123 = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 1\n"
FOUR = ["P@1", "P@2", "map", "ndcg@10"]


def judge_ir(capsys: Any, qrels: Path, run: Path, metrics: list[str]) -> dict[str, float]:
    """The metrics `judge ir --format json` prints for the files."""
    assert main(["ir", str(qrels), str(run), "-m", ",".join(metrics), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["metrics"]


# White space to Python's str.split() but not to trec_eval, which splits fields on the C
# locale's isspace() bytes only (space, \t, \n, \v, \f, \r): a byte of an id there.
UNICODE_SPACES = ["\u00a0", "\u3000", "\u2028", "\u2003", "\x85", "\x1c", "\x1d", "\x1e", "\x1f"]


@pytest.mark.parametrize("small", [True, False], ids=["small", "numpy"])
@pytest.mark.parametrize("space", UNICODE_SPACES)
def test_only_the_c_locale_white_space_separates_fields(
    tmp_path: Path, capsys: Any, monkeypatch: Any, space: str, small: bool
) -> None:
    if not small:
        monkeypatch.setattr(judge.ir.small, "SMALL_BYTES", 0)
    qrels = write(tmp_path, "qrels", QRELS_123)
    run = write(tmp_path, "run", f"q1 Q0 d2 1 9.0 t\nq1 Q0 d1{space}x 2 0.1 t\nq1 Q0 d4 3 0.05 t\n")
    # trec_eval 10.0 on these files: 0 for all four (d1<space>x is not the judged d1, and
    # 0.1, not the rank 2, is its score).
    assert judge_ir(capsys, qrels, run, FOUR) == dict.fromkeys(FOUR, 0.0)
    assert read_run(run) == {"q1": {"d2": 9.0, f"d1{space}x": 0.1, "d4": 0.05}}
    # An id holding such a character is an id like any other: it matches only itself.
    judged = write(tmp_path, "judged", f"q1 0 d1{space}x 1\nq1 0 d1 0\n")
    assert read_qrels(judged) == {"q1": {f"d1{space}x": 1, "d1": 0}}
    assert judge_ir(capsys, judged, run, ["P@2", "map"]) == {"P@2": 0.5, "map": 0.5}


@pytest.mark.parametrize("space", [" ", "\t", "\x0b", "\x0c", " \t\x0b\x0c "])
def test_the_c_locale_white_space_separates_fields(tmp_path: Path, space: str) -> None:
    path = write(tmp_path, "run", f"q1{space}Q0 d1 1{space}0.5 t\nq1 Q0{space}d2 2 0.25{space}t\n")
    assert read_run(path) == {"q1": {"d1": 0.5, "d2": 0.25}}


@pytest.mark.parametrize(
    ("reader", "text", "line", "fragment"),
    [
        (read_run, "q Q0 a 1 0.5 t\rq Q0 b 2 0.25 t\n", 1, "carriage return"),
        (read_qrels, "q 0 c 1\nq 0 a 1\rq 0 b 0\n", 2, "carriage return"),
        (read_run, "q Q0 a 1 0.5 t\rq Q0 b 2 0.25 t\r", 1, "carriage return"),
        (read_run, "q Q0 a\x00b 1 0.5 t\n", 1, "NUL"),
        (read_qrels, "q 0 a 1\nq\x00 0 b 0\n", 2, "NUL"),
    ],
)
def test_bytes_trec_eval_reads_otherwise_are_refused(
    tmp_path: Path, reader: Any, text: str, line: int, fragment: str
) -> None:
    # trec_eval ends a line at \n only (a lone \r is white space inside it, so the next
    # "line" is fields after the tag) and an id at a NUL byte (C strings): read otherwise.
    path = write(tmp_path, "file", text)
    with pytest.raises(InputFormatError, match=fragment) as info:
        reader(path)
    assert info.value.path == str(path) and info.value.line == line


@pytest.mark.parametrize("small", [True, False], ids=["small", "numpy"])
@pytest.mark.parametrize("end", ["\r\r\n", "\r \r\n", "\r\t\n", " \r\n", "last \r"])
def test_a_carriage_return_among_a_lines_trailing_white_space_is_white_space(
    tmp_path: Path, capsys: Any, monkeypatch: Any, end: str, small: bool
) -> None:
    # trec_eval reads a \r as white space: at a line's end, with nothing after it but
    # white space, it joins no lines, and the fields are the line's own. Such files (\r\r\n
    # from a CRLF file converted twice, a last line ended by \r) were read before the
    # lone \r was refused, and trec_eval reads them: they are read.
    if not small:
        monkeypatch.setattr(judge.ir.small, "SMALL_BYTES", 0)
    run_text = "q1 Q0 d2 1 9.0 t\nq1 Q0 d1 2 0.1 t\nq1 Q0 d3 3 0.05 t\n"
    ended = (lambda t: t[:-1] + "\r") if end == "last \r" else (lambda t: t.replace("\n", end))
    qrels = write(tmp_path, "qrels", ended(QRELS_123))
    run = write(tmp_path, "run", ended(run_text))
    plain = judge_ir(capsys, write(tmp_path, "q", QRELS_123), write(tmp_path, "r", run_text), FOUR)
    assert judge_ir(capsys, qrels, run, FOUR) == plain
    assert read_run(run) == {"q1": {"d2": 9.0, "d1": 0.1, "d3": 0.05}}
    assert read_qrels(qrels) == {"q1": {"d1": 1, "d2": 0, "d3": 1}}


@pytest.mark.parametrize("small", [True, False], ids=["small", "numpy"])
@pytest.mark.parametrize(
    ("qrels_text", "run_text", "bad"),
    [
        # trec_eval reads a grade with atol() and a score with atof(): each stops at the
        # first byte that is not part of a C number ("0_1" is grade 0, "0_5" score 0), where
        # Python's int() and float() read "_" between digits and any script's digits.
        ("q1 0 d1 0_1\nq1 0 d2 1\n", "q1 Q0 d1 1 2 t\nq1 Q0 d2 2 1 t\n", "grade '0_1'"),
        ("q1 0 d1 \u0661\nq1 0 d2 1\n", "q1 Q0 d1 1 2 t\nq1 Q0 d2 2 1 t\n", "grade '\u0661'"),
        ("q1 0 d1 \uff11\nq1 0 d2 1\n", "q1 Q0 d1 1 2 t\nq1 Q0 d2 2 1 t\n", "grade '\uff11'"),
        ("q1 0 d1 1\nq1 0 d2 0\n", "q1 Q0 d2 1 0.1 t\nq1 Q0 d1 2 0_5 t\n", "score '0_5'"),
        ("q1 0 d1 1\nq1 0 d2 0\n", "q1 Q0 d2 1 0.1 t\nq1 Q0 d1 2 \u0665 t\n", "score '\u0665'"),
        ("q1 0 d1 1\nq1 0 d2 0\n", "q1 Q0 d2 1 0.1 t\nq1 Q0 d1 2 1_0.5 t\n", "score '1_0.5'"),
    ],
)
def test_grades_and_scores_are_plain_ascii_numbers(
    tmp_path: Path,
    capsys: Any,
    monkeypatch: Any,
    qrels_text: str,
    run_text: str,
    bad: str,
    small: bool,
) -> None:
    if not small:
        monkeypatch.setattr(judge.ir.small, "SMALL_BYTES", 0)
    qrels, run = write(tmp_path, "qrels", qrels_text), write(tmp_path, "run", run_text)
    wrong = qrels if bad.startswith("grade") else run
    assert main(["ir", str(qrels), str(run), "-m", "mrr,P@1"]) == 2
    said = capsys.readouterr().err
    assert f"{wrong}:{1 if wrong is qrels else 2}: {bad}" in said
    for reader in (
        (read_qrels, read_qrels_by_line) if wrong is qrels else (read_run, read_run_by_line)
    ):
        with pytest.raises(InputFormatError, match=bad) as info:
            reader(wrong)
        assert info.value.path == str(wrong)
    with pytest.raises(InputFormatError, match=bad):
        evaluate(qrels, run, ["mrr"])


@pytest.mark.parametrize("grade", ["+3", "-1", "007", "-0"])
def test_signed_and_zero_padded_grades_read_as_trec_eval_reads_them(
    tmp_path: Path, grade: str
) -> None:
    path = write(tmp_path, "qrels", f"q 0 a {grade}\n")
    assert read_qrels(path) == {"q": {"a": int(grade)}}


@pytest.mark.parametrize("score", ["1.", ".5", "+.5", "1E+05", "-INF", "Infinity", "1e400", "-0"])
def test_every_c_number_form_python_reads_alike_is_read(tmp_path: Path, score: str) -> None:
    path = write(tmp_path, "run", f"q Q0 a 1 {score} t\n")
    assert read_run(path) == read_run_by_line(path) == {"q": {"a": float(score)}}
