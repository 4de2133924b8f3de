"""Refuse qrels and run dicts that would be misread, before anything is computed from them.

A TREC file holds ids and numbers as text, read one way; a dict can hold anything. An id
that is not a string never equals the same id as text (the int 1 is not the doc "1"), so
a qrels or run keyed by ints would match nothing without a word; and numpy parses a
string score or grade that Python would compare as a string. So ids must be strings
(numpy's str_ is one) and values numbers (Python or numpy ints and floats; a bool is the
int it is). The ids are checked by walks in C over the dicts (a run's doc ids at the
first of each query: see `_doc_ids_are_strings`), the values as they are converted to
arrays; only a dict that breaks a rule is walked in Python, to name what broke it.
"""

from __future__ import annotations

import numbers
import struct
from collections import deque
from collections.abc import Mapping
from typing import Any

from judge.errors import InputFormatError


def check_dict(data: Mapping[Any, Any], name: str) -> None:
    """Refuse a qrels or run dict whose ids judge would misread, naming the query and the id.

    Args:
        data: `{query_id: {doc_id: grade}}` or `{query_id: {doc_id: score}}`.
        name: the argument it was given as, "qrels" or "run" (its values are grades or
            scores).
    """
    if not all(issubclass(t, str) for t in set(map(type, data))):
        query = next(q for q in data if not isinstance(q, str))
        raise InputFormatError(
            f"{name}: query id {query!r} is {_a(query)}, not a string; {_as_text(query)} "
            "(give ids as strings: str(query_id))"
        )
    if not all(issubclass(t, Mapping) for t in set(map(type, data.values()))):
        query, docs = next((q, d) for q, d in data.items() if not isinstance(d, Mapping))
        value = "grade" if name == "qrels" else "score"
        raise InputFormatError(
            f"{name}: query {query!r} holds {_a(docs)}, not a dict; give each query's "
            f"documents as a dict {{doc_id: {value}}}"
        )
    if not _doc_ids_are_strings(data, every=name == "qrels"):
        query, doc = next(
            (q, d) for q, docs in data.items() for d in docs if not isinstance(d, str)
        )
        raise InputFormatError(
            f"{name}: doc id {doc!r} of query {query!r} is {_a(doc)}, not a string; "
            f"{_as_text(doc)} (give ids as strings: str(doc_id))"
        )


def _doc_ids_are_strings(data: Mapping[Any, Mapping[Any, Any]], every: bool) -> bool:
    """Whether the doc ids are strings: every one (the qrels), or the first of each query
    (a run). A run's ids come from one source, typed alike (pandas' int64, a Parquet
    column, a JSON object's keys), so a run keyed by ints shows at its first id; a walk of
    every id of a 100,000 x 100 run cost a quarter of its whole evaluation (0.2 s). A run
    whose queries mix strings with other ids after the first is not caught."""
    if not every:
        return all(isinstance(next(iter(docs), ""), str) for docs in data.values())
    try:
        # str.join refuses anything but strings, and runs in C.
        deque(map("".join, data.values()), maxlen=0)
    except TypeError:
        return False
    return True


def name_the_value(data: Mapping[str, Mapping[str, Any]], name: str) -> None:
    """Raise `InputFormatError` naming the first grade or score in `data` that is not a
    number, as the arrays take numbers (`judge.ir.ranking.as_float_array`); else nothing.

    Args:
        data: a qrels or run dict whose ids `check_dict` passed.
        name: "qrels" or "run".
    """
    value_name = "grade" if name == "qrels" else "score"
    for query, docs in data.items():
        for doc, value in docs.items():
            try:
                _DOUBLE.pack(value)
            except struct.error:
                where = f"{name}: {value_name} {value!r} of doc {doc!r} of query {query!r}"
                if isinstance(value, numbers.Integral):
                    raise InputFormatError(
                        f"{where} is too large for a double (trec_eval reads numbers as doubles)"
                    ) from None
                raise InputFormatError(
                    f"{where} is not a number but {_a(value)}; {value_name}s must be numbers "
                    "(judge does not parse text in dicts): give them as numbers, e.g. "
                    f"{'int(grade)' if name == 'qrels' else 'float(score)'}"
                ) from None


_DOUBLE = struct.Struct("d")


def _as_text(value: object) -> str:
    return f"ids are compared as strings, as in a TREC file: {value!r} never matches {str(value)!r}"


def _a(value: object) -> str:
    kind = type(value).__name__
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"
