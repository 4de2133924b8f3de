"""Rank judged docs straight from TREC files read into arrays, for `evaluate` on files.

The run's lines are never turned into Python objects: judged docs are found in the run by
a hash of (query, doc), then confirmed by comparing the ids; doc ids are read back only
for the queries with exact score ties. Whatever the arrays cannot do exactly (no pyarrow,
a file the fast reader leaves to the line reader, a hash collision) goes through the dict
path, which gives the same values and the line reader's errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from operator import methodcaller
from typing import Any

import numpy as np

from judge.errors import JudgeError
from judge.ir.arrow import mix, string_hashes, strings_to_arrow, take
from judge.ir.from_dicts import judged_only, rank_judged
from judge.ir.ranking import (
    Qrels,
    RankedJudgments,
    Run,
    RunArrays,
    as_float_array,
    rank_arrays,
)
from judge.ir.run_stream import rank_run_file
from judge.ir.trec import PathLike, read_qrels_by_line, read_run_by_line
from judge.ir.trec_columns import Kind, TrecColumns, query_groups, read_columns

_VALUES = methodcaller("values")
_BITS = 22
_SLICE = 1 << 20  # lines looked up at a time: bounds the temporary arrays


def rank_sources(
    qrels: Qrels | PathLike, run: Run | PathLike, least_grade: int = 1
) -> tuple[RankedJudgments, tuple[str, ...]]:
    """Ranked judgments over every judged query, and the run's unjudged queries (sorted).

    The queries of the ranked judgments are sorted, or in the order of the qrels dict.

    Args:
        qrels: a qrels dict or the path of a qrels file.
        run: a run dict or the path of a run file.
        least_grade: rank the judged docs graded this or more: 1, or 0 for bpref and
            judged@k.
    """
    if isinstance(qrels, Mapping):
        qrels = judged_only(qrels)
    judged = _columns(qrels, "qrels")
    if judged is not None and not isinstance(run, Mapping):
        # A run file grouped by query is ranked as it is read, keeping only its scores.
        streamed = rank_run_file(judged, run, least_grade)
        if streamed is not None:
            return streamed
    retrieved = _columns(run, "run") if judged is not None else None
    if judged is not None and retrieved is not None:
        ranked = rank_columns(judged, retrieved, least_grade)
        if ranked is not None:
            return ranked
    qrels_dict = qrels if isinstance(qrels, Mapping) else read_qrels_by_line(qrels)
    run_dict = run if isinstance(run, Mapping) else read_run_by_line(run)
    return rank_judged(qrels_dict, run_dict, least_grade)


def _columns(source: Mapping[str, Any] | PathLike, kind: Kind) -> TrecColumns | None:
    if isinstance(source, Mapping):
        return columns_from_mapping(source, kind)
    return read_columns(source, kind)


def columns_from_mapping(data: Mapping[str, Mapping[str, Any]], kind: Kind) -> TrecColumns | None:
    """A qrels or run dict as columns; None if the dict path must judge it (it has the errors)."""
    try:
        import pyarrow as pa
    except ImportError:
        return None
    query_ids = list(data)
    lengths = np.fromiter(map(len, data.values()), dtype=np.int64, count=len(query_ids))
    try:
        values = as_float_array(chain.from_iterable(map(_VALUES, data.values())), lengths.sum())
        docs = strings_to_arrow(list(chain.from_iterable(data.values())))
        ids = strings_to_arrow(query_ids)
    except (JudgeError, AttributeError, UnicodeError, ValueError):
        return None  # not numbers, ids that are not strings, or over 2 GB of ids
    if np.isnan(values).any() or (
        kind == "qrels" and not np.array_equal(values, np.floor(values[np.isfinite(values)]))
    ):
        return None  # NaN scores, or grades that are not integers (infinite ones neither)
    query = np.repeat(np.arange(len(query_ids), dtype=np.int32), lengths)
    keys = mix(string_hashes(docs) ^ mix(string_hashes(ids))[query])
    ordered = np.sort(keys)
    if np.any(ordered[1:] == ordered[:-1]):  # a hash collision: leave it to the dict path
        return None
    return TrecColumns(query_ids, query, pa.chunked_array([docs]), values, keys)


def rank_columns(
    qrels: TrecColumns, run: TrecColumns, least_grade: int = 1
) -> tuple[RankedJudgments, tuple[str, ...]] | None:
    """Rank from columns; None on a hash collision (the caller takes the dict path)."""
    import pyarrow.compute as pc

    qids = sorted(qrels.query_ids)
    position = {q: i for i, q in enumerate(qids)}
    nq = len(qids)
    # Judged docs grouped by query, in sorted query order (the order the metrics use).
    judged_of = np.array([position[q] for q in qrels.query_ids], dtype=np.int64)[qrels.query]
    order = np.argsort(judged_of, kind="stable")
    judged_query = judged_of[order]
    judged_keys = qrels.keys[order]
    judged_docs = take(qrels.docs, order)

    # Each judged query's scores, contiguous; the lines of unjudged queries are skipped.
    to_judged = np.array([position.get(q, -1) for q in run.query_ids], dtype=np.int64)
    permutation, starts, lengths = query_groups(run)
    grouped = run.query if permutation is None else run.query[permutation]
    segment_query = to_judged[grouped[starts]]
    judged_segments = segment_query >= 0
    run_start, run_length = np.zeros(nq, dtype=np.int64), np.zeros(nq, dtype=np.int64)
    run_start[segment_query[judged_segments]] = starts[judged_segments]
    run_length[segment_query[judged_segments]] = lengths[judged_segments]
    scores = run.values if permutation is None else run.values[permutation]

    # The run line of each judged doc: equal hashes, then equal query and doc ids.
    rows, judged = _match(run.keys, judged_keys)
    if rows.size and not (
        np.array_equal(to_judged[run.query[rows]], judged_query[judged])
        and pc.all(pc.equal(take(run.docs, rows), take(judged_docs, judged))).as_py()
    ):
        return None
    found = np.full(judged_query.size, np.nan)
    found[judged] = run.values[rows]

    arrays = RunArrays(
        qids=qids,
        scores=scores,
        run_start=run_start,
        run_length=run_length,
        judged_query=judged_query,
        grades=qrels.values[order].astype(np.float64),
        found=found,
        doc_ids=_ColumnDocIds(run, permutation, scores, run_start, run_length, judged_docs),
    )
    unjudged = tuple(sorted(q for q in run.query_ids if q not in position))
    return rank_arrays(arrays, least_grade), unjudged


def _match(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions in `keys` of the values in `wanted` (distinct), and their index in `wanted`."""
    by_key = np.argsort(wanted)
    ordered = wanted[by_key]
    # A 4 MB table of the top 22 bits lets a few lines in 100 through to the exact search.
    bitmap = np.zeros(1 << _BITS, dtype=bool)
    bitmap[ordered >> np.uint64(64 - _BITS)] = True
    found = []
    for lo in range(0, keys.size, _SLICE):
        part = keys[lo : lo + _SLICE]
        maybe = np.flatnonzero(bitmap[part >> np.uint64(64 - _BITS)])
        at = np.minimum(np.searchsorted(ordered, part[maybe]), max(ordered.size - 1, 0))
        hit = ordered[at] == part[maybe] if ordered.size else np.zeros(maybe.size, dtype=bool)
        found.append((maybe[hit] + lo, by_key[at[hit]]))
    if not found:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])


class _ColumnDocIds:
    """Doc ids read back from the columns, only for tied queries."""

    def __init__(
        self,
        run: TrecColumns,
        permutation: np.ndarray | None,
        scores: np.ndarray,
        run_start: np.ndarray,
        run_length: np.ndarray,
        judged_docs: Any,
    ):
        self.run, self.permutation, self.scores = run, permutation, scores
        self.run_start, self.run_length, self.judged_docs = run_start, run_length, judged_docs

    def tied(self, query: int, scores: set[float]) -> dict[float, list[str]]:
        start = int(self.run_start[query])
        segment = self.scores[start : start + int(self.run_length[query])]
        rows = start + np.flatnonzero(np.isin(segment, list(scores)))
        if self.permutation is not None:
            rows = self.permutation[rows]
        groups: dict[float, list[str]] = {}
        docs = take(self.run.docs, rows).to_pylist()
        for doc, score in zip(docs, self.run.values[rows].tolist(), strict=True):
            groups.setdefault(score, []).append(doc)
        for group in groups.values():
            group.sort()
        return groups

    def judged(self, index: int) -> str:
        doc: str = self.judged_docs[index].as_py()
        return doc
