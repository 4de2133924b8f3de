"""Attacks on `judge ir`'s streamed run reader (`judge.ir.run_stream`) and its small-file
path (`judge.ir.small`): a run file read a chunk at a time, or in plain Python, must give
the values the line reader's dicts give (the trec_eval semantics the conformance tests
hold), whatever the file's layout."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import judge.ir.trec_columns as columns
from judge.cli.main import main
from judge.errors import CoverageWarning, InputFormatError
from judge.ir.evaluate import score_queries
from judge.ir.run_stream import rank_run_file
from judge.ir.small import score_small
from judge.ir.trec import read_qrels_by_line, read_run_by_line
from judge.ir.trec_columns import read_columns

METRICS = ["ndcg@3", "ndcg", "map", "mrr", "P@2", "recall@3", "r_precision", "ndcg_exp"]


def values(scores: Any) -> Any:
    """Comparable per-query values (bit for bit), with the missing and unjudged queries."""
    return (
        list(scores.qids),
        {name: [float(v) for v in array] for name, array in scores.values.items()},
        tuple(scores.missing_queries),
        tuple(scores.unjudged_queries),
    )


def three_ways(qrels: Path, run: Path, level: int = 1) -> tuple[Any, Any, Any]:
    """(from the files, from the line reader's dicts, in plain Python) values."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)
        files = values(score_queries(qrels, run, METRICS, relevance_level=level))
        judged, ranked = read_qrels_by_line(qrels), read_run_by_line(run)
        dicts = values(score_queries(judged, ranked, METRICS, relevance_level=level))
    plain = values(score_small(judged, ranked, METRICS, relevance_level=level))
    return files, dicts, plain


@st.composite
def trec_files(draw: st.DrawFn) -> tuple[str, str]:
    """A qrels and a run text: queries grouped or not, many exact score ties, tabs or
    spaces, blank lines, CRLF now and then."""
    queries = draw(
        st.lists(
            st.sampled_from(["q1", "q2", "q10", "Q", "7"]), min_size=1, max_size=4, unique=True
        )
    )
    docs = [f"d{i}" for i in range(9)]
    qrels_lines, run_lines = [], []
    for q in queries:
        for doc in draw(st.lists(st.sampled_from(docs), unique=True, max_size=6)):
            qrels_lines.append(f"{q} 0 {doc} {draw(st.integers(-1, 3))}")
        for rank, doc in enumerate(draw(st.lists(st.sampled_from(docs), unique=True, max_size=8))):
            score = draw(st.sampled_from(["1", "1.0", "0.5", "0", "-0", "2", "-1e3", "inf"]))
            run_lines.append([q, "Q0", doc, str(rank), score, "t"])
    if not qrels_lines:
        qrels_lines.append(f"{queries[0]} 0 d0 1")
    if draw(st.booleans()):  # each query's lines apart: the whole-file reader's case
        run_lines = draw(st.permutations(run_lines))
    separator = draw(st.sampled_from([" ", "\t"]))
    run_text = [separator.join(fields) for fields in run_lines]
    ending = draw(st.sampled_from(["\n", "\n", "\r\n", "\n\n"]))
    last = draw(st.sampled_from(["\n", ""]))
    return "\n".join(qrels_lines) + "\n", ending.join(run_text) + (last if run_text else "")


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=trec_files(), chunk=st.sampled_from([48, 64, 97, 256, 4 << 20]), level=st.integers(1, 2)
)
def test_streamed_numpy_and_plain_paths_agree(
    tmp_path: Path, monkeypatch: Any, files: tuple[str, str], chunk: int, level: int
) -> None:
    qrels_text, run_text = files
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_bytes(qrels_text.encode())
    run.write_bytes(run_text.encode())
    monkeypatch.setattr(columns, "_CHUNK_BYTES", chunk)  # queries and ties cross chunks
    files_values, dicts_values, plain_values = three_ways(qrels, run, level)
    assert files_values == dicts_values
    assert plain_values == dicts_values


def test_a_query_split_across_the_file_counts_all_its_lines(
    tmp_path: Path, monkeypatch: Any
) -> None:
    qrels = tmp_path / "qrels"
    qrels.write_text("a 0 d1 1\na 0 d9 1\nb 0 d2 1\n")
    run = tmp_path / "run"
    run.write_text("a Q0 d1 1 3 t\nb Q0 d2 1 5 t\na Q0 d9 2 4 t\n")  # a's lines apart
    monkeypatch.setattr(columns, "_CHUNK_BYTES", 16)
    judged = read_columns(qrels, "qrels")
    assert judged is not None
    assert rank_run_file(judged, run) is None  # not grouped: the file is read whole
    files, dicts, plain = three_ways(qrels, run)
    assert files == dicts == plain
    assert files[1]["map"] == [1.0, 1.0]  # d9 ranks first for a: both found


def test_ties_across_a_chunk_boundary_rank_by_doc_id_descending(
    tmp_path: Path, monkeypatch: Any
) -> None:
    qrels = tmp_path / "qrels"
    qrels.write_text("q 0 a 1\nq 0 z 0\n")
    run = tmp_path / "run"
    # 40 docs of one score, the judged "a" last by id: rank 40 as trec_eval ranks ties.
    lines = [
        f"q Q0 {doc} {i} 1.5 t"
        for i, doc in enumerate(["a", *[f"m{i:02}" for i in range(38)], "z"])
    ]
    run.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(columns, "_CHUNK_BYTES", 64)
    files, dicts, plain = three_ways(qrels, run)
    assert files == dicts == plain
    assert files[1]["mrr"] == [1.0 / 40]


def test_a_doc_twice_is_refused_whichever_path(tmp_path: Path, monkeypatch: Any) -> None:
    qrels = tmp_path / "qrels"
    qrels.write_text("q 0 a 1\n")
    run = tmp_path / "run"
    run.write_text("q Q0 a 1 2 t\nq Q0 b 2 1 t\nq Q0 a 3 0 t\n")
    monkeypatch.setattr(columns, "_CHUNK_BYTES", 16)  # the second "a" in another chunk
    with pytest.raises(InputFormatError, match="twice"):
        score_queries(qrels, run, ["map"])
    with pytest.raises(InputFormatError, match="twice"):
        read_run_by_line(run)


def _cli(capsys: Any, *args: object) -> str:
    assert main(["ir", *map(str, args), "--format", "json"]) == 0
    return capsys.readouterr().out


def test_the_small_path_and_the_numpy_path_print_the_same(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    import judge.ir.small as small

    qrels = tmp_path / "qrels"
    qrels.write_text("q1\t0\ta\t2\r\nq1\t0\tb\t0\r\nq2\t0\tc\t1\r\nq3\t0\tx\t1\r\n")
    run = tmp_path / "run"
    run.write_text(
        "q1 Q0 b 1 0.5 t\r\nq1 Q0 a 2 0.5 t\r\n\r\nq2 Q0 c 1 -0 t\r\nq2 Q0 a 2 0 t\r\nq9 Q0 c 1 1 t"
    )
    plain = _cli(capsys, qrels, run, "-q", "-m", ",".join(METRICS))
    monkeypatch.setattr(small, "SMALL_BYTES", 0)  # the same files through numpy
    assert _cli(capsys, qrels, run, "-q", "-m", ",".join(METRICS)) == plain
