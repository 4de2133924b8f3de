"""Rank the relevant judged documents of every query at once, exactly as trec_eval does.

Every metric judge computes depends only on the ranks of the judged documents with a
positive grade (bpref and judged@k also on those graded 0, ranked only when asked for), so
those are all that is ranked: the rank of a document is one plus the
number of documents of its query with a higher score, plus, for ties, the number of tied
documents with a greater doc id (trec_eval breaks ties by doc id, descending). The counts
are binary searches in each query's sorted scores, vectorised (`judge.ir.rank_counts`);
only queries with exact ties fall back to Python, and only for the tied scores.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Protocol

import numpy as np

from judge.errors import InputFormatError
from judge.ir.rank_counts import count_above

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class RankedJudgments:
    """What the metrics need: per query, the judged grades; per retrieved positive doc, its rank."""

    qids: list[str]
    judged_query: np.ndarray  # query index of every judged doc
    grades: np.ndarray  # grade of every judged doc (float64, integral)
    pair_query: np.ndarray  # query index of every retrieved doc with a positive grade
    pair_rank: np.ndarray  # its 1-based rank, pairs sorted by (query, rank)
    pair_grade: np.ndarray  # its grade
    run_length: np.ndarray  # number of retrieved docs per query
    # Each retrieved doc graded 0, when ranked (`least_grade=0`): query and rank, by both.
    zero_query: np.ndarray | None = None
    zero_rank: np.ndarray | None = None


class NotNumbersError(InputFormatError):
    """A run score or qrels grade that is not a number: `judge.ir.evaluate` names it."""


_PACK = 1 << 16  # values converted per call: bounds the arguments tuple
_PACK_FULL = struct.Struct(f"{_PACK}d")


def as_float_array(values: Iterator[object], count: int) -> np.ndarray:
    """Scores or grades as float64; anything not a number raises `NotNumbersError`.

    struct takes numbers only (Python's and numpy's, by `__float__` or `__index__`), where
    np.fromiter would parse a string as a number; it is faster too.
    """
    out = np.empty(count, dtype=np.float64)
    values = iter(values)
    try:
        for start in range(0, count, _PACK):
            size = min(_PACK, count - start)
            packer = _PACK_FULL if size == _PACK else struct.Struct(f"{size}d")
            packer.pack_into(out.data, start * 8, *islice(values, size))
    except struct.error as exc:
        raise NotNumbersError(
            f"run scores and qrels grades must be numbers ({exc}); convert them first"
        ) from None
    return out


def _query_of(flat_index: int, lengths: np.ndarray, qids: list[str]) -> str:
    return qids[int(np.searchsorted(np.cumsum(lengths), flat_index, side="right"))]


class DocIds(Protocol):
    """Doc ids for breaking exact score ties, looked up only for the tied queries."""

    def tied(self, query: int, scores: set[float]) -> dict[float, list[str]]:
        """Sorted ids of the query's retrieved docs that have one of `scores`, by score."""
        ...

    def judged(self, index: int) -> str:
        """Id of the judged doc at flat position `index` (judged docs grouped by query)."""
        ...


@dataclass(frozen=True)
class RunArrays:
    """A run and qrels as flat arrays over the judged queries `qids` (sorted).

    Each judged query's scores are contiguous in `scores`, from `run_start` for
    `run_length`; other runs' lines may lie between them. Judged docs are grouped by query
    in `qids` order; `found` is each one's score in the run, NaN if it was not retrieved.
    """

    qids: list[str]
    scores: np.ndarray
    run_start: np.ndarray
    run_length: np.ndarray
    judged_query: np.ndarray
    grades: np.ndarray
    found: np.ndarray
    doc_ids: DocIds


def starts_of(lengths: np.ndarray) -> np.ndarray:
    """Where each of consecutive segments of these lengths starts."""
    return np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)


def check_scores(
    scores: np.ndarray, lengths: np.ndarray, qids: list[str], not_scores: np.ndarray | None = None
) -> None:
    """Refuse NaN run scores: trec_eval's ranking is undefined for them.

    Args:
        scores: the scores of each query in turn, `lengths` of them per query.
        lengths: how many values each query has in `scores`.
        qids: the query ids, for the error message.
        not_scores: positions in `scores` that hold something else (NaN allowed).
    """
    nan = np.isnan(scores)
    if not_scores is not None:
        nan[not_scores] = False
    if nan.any():
        query = _query_of(int(np.argmax(nan)), lengths, qids)
        raise InputFormatError(f"run score is NaN for query {query!r}; scores must be numbers")


def check_grades(grades: np.ndarray, lengths: np.ndarray, qids: list[str]) -> None:
    """Refuse grades that are not integers (an infinite one is not)."""
    bad = np.flatnonzero((grades != np.floor(grades)) | np.isinf(grades))
    if bad.size:
        query = _query_of(int(bad[0]), lengths, qids)
        raise InputFormatError(
            f"qrels grade {float(grades[bad[0]])!r} for query {query!r} is not an integer; "
            "grades are integers (-1 and 0 non-relevant)"
        )


def rank_arrays(a: RunArrays, least_grade: int = 1) -> RankedJudgments:
    """Rank the judged docs graded `least_grade` (1 or 0) or more that the run retrieved."""
    ranked = (a.grades >= least_grade) & ~np.isnan(a.found)
    pair_index = np.flatnonzero(ranked)
    pair_query = a.judged_query[pair_index]
    pair_score = a.found[pair_index]
    rank, tied = count_above(a.scores, a.run_start, a.run_length, pair_query, pair_score)
    pairs = Pairs(pair_index, pair_query, pair_score, rank, tied)
    return ranked_judgments(
        a.qids, a.judged_query, a.grades, a.run_length, pairs, a.doc_ids, least_grade
    )


@dataclass(frozen=True)
class Pairs:
    """The retrieved judged docs with a positive grade, their rank ignoring ties, and the tied.

    Attributes:
        index: position of each among the judged docs.
        query: query index of each (non-decreasing).
        score: run score of each.
        rank: 1 + the docs of its query scored higher.
        tied: positions in these arrays of the pairs whose score another doc shares.
    """

    index: np.ndarray
    query: np.ndarray
    score: np.ndarray
    rank: np.ndarray
    tied: np.ndarray


def ranked_judgments(
    qids: list[str],
    judged_query: np.ndarray,
    grades: np.ndarray,
    run_length: np.ndarray,
    pairs: Pairs,
    doc_ids: DocIds,
    least_grade: int = 1,
) -> RankedJudgments:
    """Break the pairs' ties by doc id and sort the pairs by rank within each query.

    Args:
        qids: the query ids.
        judged_query: query index of every judged doc (grouped by query).
        grades: grade of every judged doc.
        run_length: number of retrieved docs per query.
        pairs: the ranked pairs (their `rank` is updated in place for ties).
        doc_ids: the doc ids, for the tied pairs.
        least_grade: 1 if the pairs are the positively graded docs, 0 if those graded 0
            are among them (they are then kept apart, in `zero_query` and `zero_rank`).
    """
    rank = pairs.rank
    if pairs.tied.size:
        _break_ties(rank, pairs.tied, doc_ids, pairs.query, pairs.index, pairs.score)
    # Pairs are in query order already; sort by rank within each query.
    order = np.argsort(pairs.query * (int(rank.max(initial=0)) + 1) + rank, kind="stable")
    query, rank, grade = pairs.query[order], rank[order], grades[pairs.index][order]
    zero_query = zero_rank = None
    if least_grade < 1:
        positive = grade > 0
        zero_query, zero_rank = query[~positive], rank[~positive]
        query, rank, grade = query[positive], rank[positive], grade[positive]
    return RankedJudgments(
        qids=qids,
        judged_query=judged_query,
        grades=grades,
        pair_query=query,
        pair_rank=rank,
        pair_grade=grade,
        run_length=run_length,
        zero_query=zero_query,
        zero_rank=zero_rank,
    )


def _break_ties(
    rank: np.ndarray,
    tied: np.ndarray,
    doc_ids: DocIds,
    pair_query: np.ndarray,
    pair_index: np.ndarray,
    pair_score: np.ndarray,
) -> None:
    """Add, for each tied pair, the tied docs with a greater doc id (they rank first)."""
    by_query: dict[int, list[int]] = {}
    for p in tied.tolist():
        by_query.setdefault(int(pair_query[p]), []).append(p)
    for q, pairs in by_query.items():
        groups = doc_ids.tied(q, {float(pair_score[p]) for p in pairs})
        for p in pairs:
            docs = groups[float(pair_score[p])]
            rank[p] += len(docs) - bisect_right(docs, doc_ids.judged(int(pair_index[p])))
