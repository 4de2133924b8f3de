"""Every TREC file judge writes reads back with `judge ir` as written: an id a TREC line
cannot hold (white space, a newline that would forge a line, control characters, empty)
is refused before anything is written, naming it."""

from __future__ import annotations

import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge.errors import InputFormatError
from judge.ir import read_qrels, read_run, write_qrels, write_run

ids = st.one_of(
    st.text(max_size=6),
    st.text(alphabet="ab \t\n\r\x00\x0b\x1c\x85\u2028\u3000\ufeff\u202e#Q", max_size=4),
)
runs = st.dictionaries(
    ids, st.dictionaries(ids, st.floats(allow_nan=False, width=64), max_size=4), max_size=4
)


def unfit(text: str) -> bool:
    """What a field of a line split on white space cannot hold (control characters and
    lone surrogates are refused too: no escape sequence or unwritable text in a file)."""
    return not text or any(c.isspace() or unicodedata.category(c) in ("Cc", "Cs") for c in text)


def refused_naming_an_unfit_id(error: InputFormatError, table: dict) -> bool:
    # (a query id may not start with '#' either: its line would be a comment)
    unfit_ids = [
        i
        for q, docs in table.items()
        for i in (q, *docs)
        if unfit(i) or (i == q and q.startswith("#"))
    ]
    return bool(unfit_ids) and any(repr(i) in str(error) for i in unfit_ids)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs)
def test_a_run_is_written_and_read_back_the_same_or_refused_naming_the_id(run):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.trec"
        try:
            write_run(run, path)
        except InputFormatError as exc:
            assert refused_naming_an_unfit_id(exc, run), exc
            assert not path.exists()  # nothing half written
            return
        assert read_run(path) == {q: d for q, d in run.items() if d}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(ids, st.dictionaries(ids, st.integers(-3, 3), max_size=4), max_size=4))
def test_qrels_are_written_and_read_back_the_same_or_refused_naming_the_id(qrels):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "qrels.txt"
        try:
            write_qrels(qrels, path)
        except InputFormatError as exc:
            assert refused_naming_an_unfit_id(exc, qrels), exc
            assert not path.exists()
            return
        assert read_qrels(path) == {q: d for q, d in qrels.items() if d}


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ("d1\nq2 Q0 forged 1 99 judge", "white space ('\\n' at character 2)"),
        ("doc 1", "white space (' ' at character 3)"),
        ("", "is empty"),
        ("d\x1b[31m", "control character ('\\x1b' at character 1)"),
        ("d\ud800", "lone surrogate"),
    ],
)
def test_the_refusal_names_the_id_and_why(tmp_path, doc, why):
    with pytest.raises(InputFormatError) as caught:
        write_run({"q1": {"d0": 1.0, doc: 0.5}}, tmp_path / "run.trec")
    assert f"document id of query 'q1' {doc!r}" in str(caught.value)
    assert why in str(caught.value)


def test_a_nan_score_is_refused(tmp_path):
    with pytest.raises(InputFormatError, match="not a number"):
        write_run({"q1": {"d1": float("nan")}}, tmp_path / "run.trec")
