"""Read and write TREC qrels and run files (whitespace separated, as trec_eval reads them)."""

from __future__ import annotations

import math
import os
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path

from judge.errors import InputFormatError

PathLike = str | os.PathLike[str]


# ASCII bytes str.split() splits on and trec_eval (C's isspace()) does not: id bytes.
_STR_SPACE_BYTES = (b"\x1c", b"\x1d", b"\x1e", b"\x1f")
_BATCH_BYTES = 1 << 16  # lines checked at a time


def _lines(path: PathLike) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every line that is neither blank nor a comment (its first
    non-blank character `#`: trec_eval's formats ignore such lines), split as trec_eval
    splits it; a missing file is a clear error.

    trec_eval ends a line at \\n only and splits it on the C locale's white space (space,
    \\t, \\n, \\v, \\f, \\r: what bytes.split() splits on), so a no-break space or U+2028
    is part of an id, as is any other byte but NUL, where its C strings end: a NUL, or a
    carriage return with more fields after it on its line (which trec_eval reads as
    white space, joining two "lines"), is refused rather than read otherwise.
    """
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below; open errors differ)
    except OSError as exc:
        raise InputFormatError(f"cannot open: {exc.strerror}", path=str(path)) from exc
    number = 0
    with handle:
        for batch in iter(lambda: handle.readlines(_BATCH_BYTES), []):
            # Most files are ASCII without those bytes: there str.split() splits each line
            # as trec_eval does, faster than splitting bytes and decoding each field.
            block = b"".join(batch)
            plain = (
                block.isascii()
                and not any(c in block for c in (*_STR_SPACE_BYTES, b"\0"))
                and block.count(b"\r") == block.count(b"\r\n")
            )
            if plain:
                lines = block.decode("ascii").split("\n")
                if block.endswith(b"\n"):
                    lines.pop()  # ("" after the last line end)
                for line in lines:
                    number += 1
                    fields = line.split()
                    if fields and fields[0][0] != "#":
                        yield number, fields
                continue
            for raw in batch:
                number += 1
                fields = _fields(raw, path, number)
                if fields and fields[0][0] != "#":
                    yield number, fields


def _fields(line: bytes, path: PathLike, number: int) -> list[str]:
    """The fields of a line of any bytes, or `InputFormatError` for those trec_eval would
    read otherwise or that are not UTF-8."""
    raw = line.split()
    if not raw:
        return []
    # Only a \r with more fields after it joins lines: one among the white space that
    # ends a line (\r\r\n, a last line ended by \r) is white space to trec_eval, as here.
    if b"\r" in line.rstrip():
        raise InputFormatError(
            "a carriage return (\\r) that does not end the line: trec_eval ends lines at "
            "\\n only and reads it as white space, joining two lines; convert the file's "
            "line endings to \\n or \\r\\n",
            path=str(path),
            line=number,
        )
    if b"\0" in line:
        raise InputFormatError(
            "a NUL byte: trec_eval ends the field there; remove it", path=str(path), line=number
        )
    try:
        return [field.decode("utf-8") for field in raw]
    except UnicodeDecodeError as exc:
        raise InputFormatError(
            f"not UTF-8 text ({exc.reason})", path=str(path), line=number
        ) from exc


def read_qrels(path: PathLike) -> dict[str, dict[str, int]]:
    """Read a TREC qrels file: `query_id iteration doc_id grade` per line.

    Args:
        path: the file; blank lines are skipped, the iteration column is ignored.

    Returns:
        `{query_id: {doc_id: grade}}`. A malformed line or a doc judged twice for one query
        raises `InputFormatError` naming the file and line.
    """
    from judge.ir.trec_columns import read_columns, to_dicts  # numpy: not for the line reader

    columns = read_columns(path, "qrels")
    return to_dicts(columns) if columns is not None else read_qrels_by_line(path)


def read_run(path: PathLike) -> dict[str, dict[str, float]]:
    """Read a TREC run file: `query_id Q0 doc_id rank score [tag]` per line.

    Args:
        path: the file; the rank column is ignored (ranking is by score, as in trec_eval),
            fields after the tag are ignored.

    Returns:
        `{query_id: {doc_id: score}}`. A malformed line, a score that is not a finite or
        infinite number, or a doc listed twice for one query raises `InputFormatError`.
    """
    from judge.ir.trec_columns import read_columns, to_dicts

    columns = read_columns(path, "run")
    return to_dicts(columns) if columns is not None else read_run_by_line(path)


def read_qrels_by_line(path: PathLike) -> dict[str, dict[str, int]]:
    """`read_qrels` line by line: any of trec_eval's white space, any fields, the errors
    with line numbers."""
    qrels: dict[str, dict[str, int]] = {}
    where: dict[tuple[str, str], int] = {}
    for number, fields in _lines(path):
        if len(fields) != 4:
            raise InputFormatError(
                f"expected 4 fields 'query_id iteration doc_id grade', found {len(fields)}",
                path=str(path),
                line=number,
            )
        query, _, doc, grade_text = fields
        try:
            # int() alone reads "_" between digits and any script's digits, which
            # trec_eval's atol() stops at ("0_1" is its grade 0).
            if not grade_text.isascii() or "_" in grade_text:
                raise ValueError
            grade = int(grade_text)
        except ValueError:
            raise InputFormatError(
                f"grade {grade_text!r} is not an integer as trec_eval reads one: write "
                "ASCII digits with an optional sign",
                path=str(path),
                line=number,
            ) from None
        judged = qrels.setdefault(query, {})
        if doc in judged:
            raise InputFormatError(
                f"doc {doc!r} of query {query!r} is judged again (first on line "
                f"{where[query, doc]}); keep one judgment per doc",
                path=str(path),
                line=number,
            )
        judged[doc] = grade
        where[query, doc] = number
    return qrels


def read_run_by_line(path: PathLike) -> dict[str, dict[str, float]]:
    """`read_run` line by line: any of trec_eval's white space, any fields, the errors
    with line numbers."""
    run: dict[str, dict[str, float]] = {}
    for number, fields in _lines(path):
        if len(fields) < 5:
            raise InputFormatError(
                f"expected 'query_id Q0 doc_id rank score tag', found {len(fields)} fields",
                path=str(path),
                line=number,
            )
        query, doc, score_text = fields[0], fields[2], fields[4]
        try:
            # As for grades: float() reads "_" and other scripts' digits, atof() does not.
            if not score_text.isascii() or "_" in score_text:
                raise ValueError
            score = float(score_text)
        except ValueError:
            raise InputFormatError(
                f"score {score_text!r} is not a number as trec_eval reads one: write ASCII "
                "digits with an optional sign, '.' and exponent, or inf",
                path=str(path),
                line=number,
            ) from None
        if math.isnan(score):
            raise InputFormatError(
                f"score {score_text!r} is not a number: give each document a number",
                path=str(path),
                line=number,
            )
        docs = run.setdefault(query, {})
        if doc in docs:
            raise InputFormatError(
                f"doc {doc!r} appears twice for query {query!r}; a run ranks each doc once",
                path=str(path),
                line=number,
            )
        docs[doc] = score
    return run


def trec_id_problem(value: object) -> str | None:
    """Why a value cannot be an id (a query, document or run tag) in a TREC file, whose
    fields are split on white space, or None when it can: it must be non-empty text
    without white space, control characters or lone surrogates."""
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    if not value:
        return "is empty"
    if value.isprintable() and " " not in value:  # the common case, in C
        return None
    for i, char in enumerate(value):
        kind = unicodedata.category(char)
        if char.isspace():
            return f"holds white space ({char!r} at character {i})"
        if kind == "Cc":
            return f"holds a control character ({char!r} at character {i})"
        if kind == "Cs":
            return f"holds a lone surrogate ({char!r} at character {i}), which is not text"
    return None  # format, private-use or unassigned characters: one field all the same


def check_trec_id(value: object, what: str) -> str:
    """The value, if a TREC file can hold it as an id; else `InputFormatError` naming it
    (`what`: "query id", "document id of query 'q1'", ...)."""
    problem = trec_id_problem(value)
    if problem is not None:
        raise InputFormatError(
            f"{what} {value!r} cannot be written to a TREC file: it {problem}; TREC files "
            "split their lines on white space, so an id must be one word without white "
            "space or control characters"
        )
    assert isinstance(value, str)
    return value


def _checked_ids(table: Mapping[str, Mapping[str, object]]) -> None:
    """Every query and document id of a qrels or run checked before a line is written:
    a refused id leaves no file half written."""
    for query, docs in table.items():
        check_trec_id(query, "query id")
        if query.startswith("#"):  # (a line that starts so is a comment: it would be skipped)
            raise InputFormatError(
                f"query id {query!r} cannot be written to a TREC file: a line starting "
                "with '#' is a comment there, skipped when the file is read"
            )
        for doc in docs:
            check_trec_id(doc, f"document id of query {query!r}")


def write_qrels(qrels: Mapping[str, Mapping[str, int]], path: PathLike) -> None:
    """Write qrels in TREC format, queries and docs sorted, so files diff cleanly; an id
    a TREC file cannot hold (`trec_id_problem`) raises `InputFormatError`."""
    _checked_ids(qrels)
    with open(path, "w", encoding="utf-8") as out:
        for query in sorted(qrels):
            for doc in sorted(qrels[query]):
                out.write(f"{query} 0 {doc} {int(qrels[query][doc])}\n")


def write_run(run: Mapping[str, Mapping[str, float]], path: PathLike, tag: str = "judge") -> None:
    """Write a run in TREC format, ranked as trec_eval ranks it; scores round-trip exactly.
    An id a TREC file cannot hold (`trec_id_problem`) or a NaN score raises
    `InputFormatError` before anything is written."""
    if trec_id_problem(tag) is not None:
        raise InputFormatError(f"run tag {tag!r} must be one non-empty word")
    _checked_ids(run)
    for query, docs in run.items():
        for doc, score in docs.items():
            if math.isnan(float(score)):
                raise InputFormatError(
                    f"the score of document {doc!r} of query {query!r} is not a number"
                )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for query in sorted(run):
            docs = run[query]
            ranked = sorted(docs, key=lambda d: (float(docs[d]), d), reverse=True)
            for rank, doc in enumerate(ranked, start=1):
                out.write(f"{query} Q0 {doc} {rank} {float(docs[doc])!r} {tag}\n")
