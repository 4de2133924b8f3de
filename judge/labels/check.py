"""People's labels read from the data and checked before any call to a judge.

Binary labels are 0 or 1 (1 = faithful/relevant); graded labels are numbers on any scale;
pairwise labels mark, in each pair of rows sharing a pair id, the preferred row with 1 and the
other with 0. Anything else is refused with the rows at fault, so no request is wasted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from judge.errors import InputFormatError

Kind = Literal["binary", "graded", "pairwise"]
KINDS: tuple[Kind, ...] = ("binary", "graded", "pairwise")
MISSING_GROUP = "(none)"  # the --by group of rows without a value
_SHOWN = 5  # rows quoted in an error message


@dataclass(frozen=True)
class Pair:
    """Two rows compared by a person: the preferred one and the other."""

    id: str
    preferred: int
    other: int


@dataclass(frozen=True)
class Labels:
    """The checked labels of every row, with its --by group and, for pairwise, the pairs."""

    kind: Kind
    column: str
    values: np.ndarray  # one float per row
    groups: list[str] | None  # the --by value of each row, as text
    pairs: list[Pair]  # empty unless pairwise


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


def _binary(value: Any) -> float | None:
    """0.0 or 1.0 for 0/1, False/True and their text ("0", "1.0", "true"); else None."""
    if isinstance(value, str):
        text = value.strip().lower()
        value = {"true": 1, "false": 0}.get(text, text)
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, (bool, int, float, np.integer, np.floating)) and value in (0, 1):
        return float(value)
    return None


def _number(value: Any) -> float | None:
    """A finite number from a number or its text; None for anything else (bools too)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value):
        return float(value)
    return None


def _rows(bad: Sequence[tuple[int, Any]]) -> str:
    shown = ", ".join(f"{row} ({value!r})" for row, value in bad[:_SHOWN])
    more = f" and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
    return f"rows {shown}{more} (counted from 0)"


def _column(records: list[dict[str, Any]], column: str, what: str, option: str) -> None:
    if not any(column in r for r in records):
        present = sorted({k for r in records for k in r})
        raise InputFormatError(
            f"no {what} column {column!r} in the data (columns: {', '.join(present)}); "
            f"name the right one with {option}"
        )


def _pairs(records: list[dict[str, Any]], values: np.ndarray, column: str) -> list[Pair]:
    rows_of: dict[str, list[int]] = {}
    missing = [(i, r.get(column)) for i, r in enumerate(records) if _blank(r.get(column))]
    if missing:
        raise InputFormatError(f"pair column {column!r} is empty in {_rows(missing)}")
    for i, record in enumerate(records):
        rows_of.setdefault(str(record[column]), []).append(i)
    pairs, bad = [], []
    for pair_id, rows in rows_of.items():
        preferred = [i for i in rows if values[i] == 1]
        if len(rows) != 2 or len(preferred) != 1:
            bad.append(f"{pair_id!r} ({len(rows)} rows, {len(preferred)} preferred)")
            continue
        pairs.append(Pair(pair_id, preferred[0], next(i for i in rows if i != preferred[0])))
    if bad:
        more = f" and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
        raise InputFormatError(
            f"each pair must be two rows, exactly one of them preferred (label 1, the other "
            f"0); pairs {', '.join(bad[:_SHOWN])}{more} are not"
        )
    return pairs


def read_labels(
    records: list[dict[str, Any]],
    *,
    kind: Kind,
    label: str,
    by: str | None = None,
    pair: str | None = None,
) -> Labels:
    """Check and read the labels of every record; an InputFormatError names the bad rows."""
    if kind not in KINDS:
        raise InputFormatError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "pairwise" and not pair:
        raise InputFormatError("pairwise labels need a pair column (--pair COLUMN): the pair id")
    if kind != "pairwise" and pair:
        raise InputFormatError(f"a pair column is for pairwise labels, not {kind} ones")
    _column(records, label, "label", "--label")
    parse = _number if kind == "graded" else _binary
    parsed = [parse(r.get(label)) for r in records]
    bad = [(i, records[i].get(label)) for i, v in enumerate(parsed) if v is None]
    if bad:
        expected = (
            "a number"
            if kind == "graded"
            else "0 or 1 (1 = faithful/relevant; a graded scale: --kind graded)"
            if kind == "binary"
            else "1 for the preferred row of its pair, 0 for the other"
        )
        raise InputFormatError(f"{kind} labels in {label!r} must be {expected}; {_rows(bad)}")
    values = np.array(parsed, dtype=np.float64)
    groups = None
    if by:
        _column(records, by, "--by", "--by")
        groups = [MISSING_GROUP if _blank(r.get(by)) else str(r.get(by)) for r in records]
    pairs: list[Pair] = []
    if pair:
        _column(records, pair, "pair", "--pair")
        pairs = _pairs(records, values, pair)
        split = [repr(p.id) for p in pairs if groups and groups[p.preferred] != groups[p.other]]
        if split:
            raise InputFormatError(
                f"the two rows of a pair must share their {by!r} value; pairs "
                f"{', '.join(split[:_SHOWN])}{' and more' if len(split) > _SHOWN else ''} do not"
            )
    return Labels(kind, label, values, groups, pairs)
