"""Rank the relevant judged documents of every query at once, exactly as trec_eval does.

Every metric judge computes depends only on the ranks of the judged documents with a
positive grade, so those are all that is ranked: the rank of a document is one plus the
number of documents of its query with a higher score, plus, for ties, the number of tied
documents with a greater doc id (trec_eval breaks ties by doc id, descending). The counts
are vectorised comparisons against each query's score row; only queries with exact ties
fall back to Python, and only for the tied scores.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain, repeat
from operator import methodcaller
from typing import Protocol

import numpy as np

from judge.errors import InputFormatError

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]

_NAN = float("nan")
_EMPTY: dict[str, float] = {}
_VALUES = methodcaller("values")  # works on any Mapping, and runs in C
# Elements compared per block: bounds the temporary memory to a few tens of MB.
_BLOCK_ELEMENTS = 1 << 21


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


def _scores_of_judged(run_q: Mapping[str, float], judged_q: Mapping[str, int]) -> Iterator[float]:
    """Scores of a query's judged docs in the run, NaN for those not retrieved."""
    return map(run_q.get, judged_q, repeat(_NAN))


def as_float_array(values: Iterator[object], count: int) -> np.ndarray:
    """Scores or grades as float64; anything not a number is a clear error."""
    try:
        return np.fromiter(values, dtype=np.float64, count=count)
    except (TypeError, ValueError) as exc:
        raise InputFormatError(
            f"run scores and qrels grades must be numbers ({exc}); convert them first"
        ) from exc


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


def _starts(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)


class _DictDocIds:
    def __init__(self, runs: list[Mapping[str, float]], judged: list[Mapping[str, int]]):
        self.runs, self.judged_docs = runs, judged
        self.judged_start = _starts(np.fromiter(map(len, judged), np.int64, len(judged)))

    def tied(self, query: int, scores: set[float]) -> dict[float, list[str]]:
        groups: dict[float, list[str]] = {}
        for doc, score in self.runs[query].items():
            if score in scores:
                groups.setdefault(float(score), []).append(doc)
        for docs in groups.values():
            docs.sort()
        return groups

    def judged(self, index: int) -> str:
        query = int(np.searchsorted(self.judged_start, index, side="right")) - 1
        return list(self.judged_docs[query])[index - int(self.judged_start[query])]


def check_scores(scores: np.ndarray, lengths: np.ndarray, qids: list[str]) -> None:
    """Refuse NaN run scores: trec_eval's ranking is undefined for them."""
    bad = np.flatnonzero(np.isnan(scores))
    if bad.size:
        query = _query_of(int(bad[0]), lengths, qids)
        raise InputFormatError(f"run score is NaN for query {query!r}; scores must be numbers")


def check_grades(grades: np.ndarray, lengths: np.ndarray, qids: list[str]) -> None:
    """Refuse grades that are not integers."""
    bad = np.flatnonzero(grades != np.floor(grades))
    if bad.size:
        query = _query_of(int(bad[0]), lengths, qids)
        raise InputFormatError(
            f"qrels grade {grades[bad[0]]!r} for query {query!r} is not an integer; "
            "grades are integers (-1 and 0 non-relevant)"
        )


def rank_judged(qrels: Qrels, run: Run, qids: list[str]) -> RankedJudgments:
    """Rank the positively graded judged docs of the queries `qids` in `run`."""
    nq = len(qids)
    runs = list(map(run.get, qids, repeat(_EMPTY)))
    judged = [qrels[q] for q in qids]
    run_length = np.fromiter(map(len, runs), dtype=np.int64, count=nq)
    judged_length = np.fromiter(map(len, judged), dtype=np.int64, count=nq)
    n_run, n_judged = int(run_length.sum()), int(judged_length.sum())
    # The dict look-ups and float conversions here are most of the time on large inputs.
    scores = as_float_array(chain.from_iterable(map(_VALUES, runs)), n_run)
    grades = as_float_array(chain.from_iterable(map(_VALUES, judged)), n_judged)
    found = as_float_array(chain.from_iterable(map(_scores_of_judged, runs, judged)), n_judged)
    check_scores(scores, run_length, qids)
    check_grades(grades, judged_length, qids)
    arrays = RunArrays(
        qids=qids,
        scores=scores,
        run_start=_starts(run_length),
        run_length=run_length,
        judged_query=np.repeat(np.arange(nq), judged_length),
        grades=grades,
        found=found,
        doc_ids=_DictDocIds(runs, judged),
    )
    return rank_arrays(arrays)


def rank_arrays(a: RunArrays) -> RankedJudgments:
    """Rank the positively graded judged docs that the run retrieved, per query."""
    positive = (a.grades > 0) & ~np.isnan(a.found)
    pair_index = np.flatnonzero(positive)
    pair_query = a.judged_query[pair_index]
    pair_score = a.found[pair_index]
    rank, tied = _count_above(a.scores, a.run_start, a.run_length, pair_query, pair_score)
    if tied.size:
        _break_ties(rank, tied, a.doc_ids, pair_query, pair_index, pair_score)

    # Pairs are in query order already; sort by rank within each query.
    order = np.argsort(pair_query * (int(rank.max(initial=0)) + 1) + rank, kind="stable")
    return RankedJudgments(
        qids=a.qids,
        judged_query=a.judged_query,
        grades=a.grades,
        pair_query=pair_query[order],
        pair_rank=rank[order],
        pair_grade=a.grades[pair_index][order],
        run_length=a.run_length,
    )


def _count_above(
    scores: np.ndarray,
    starts: np.ndarray,
    run_length: np.ndarray,
    pair_query: np.ndarray,
    pair_score: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rank ignoring ties (1 + docs scored higher), and the pairs whose score is tied."""
    n = pair_query.size
    rank = np.ones(n, dtype=np.int64)
    lengths = run_length[pair_query]
    pair_start = starts[pair_query]

    def count(chunk: np.ndarray, length: int, matrix: np.ndarray | None) -> np.ndarray:
        if matrix is not None:  # the queries' scores are whole rows of a matrix
            block = matrix[pair_start[chunk] // length]
        else:
            block = scores[pair_start[chunk][:, None] + np.arange(length)]
        s = pair_score[chunk][:, None]
        # Summing bytes is faster than count_nonzero along an axis.
        total = np.uint16 if length < 2**16 else np.int64
        rank[chunk] += (block > s).view(np.uint8).sum(axis=1, dtype=total)
        tied: np.ndarray = chunk[(block == s).view(np.uint8).sum(axis=1, dtype=total) > 1]
        return tied

    tasks = []
    distinct = np.unique(lengths).tolist()
    for length in distinct:
        members = np.arange(n) if len(distinct) == 1 else np.flatnonzero(lengths == length)
        # Every query retrieved `length` docs, laid out back to back: index rows, not elements.
        rows = scores.size % length == 0 and not np.any(pair_start[members] % length)
        matrix = scores.reshape(-1, length) if rows else None
        step = max(1, _BLOCK_ELEMENTS // length)
        tasks += [(members[lo : lo + step], length, matrix) for lo in range(0, members.size, step)]
    if len(tasks) > 1:
        # numpy releases the GIL in the comparisons, so blocks run in parallel on threads.
        with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            tied = list(pool.map(lambda task: count(*task), tasks))
    else:
        tied = [count(*task) for task in tasks]
    return rank, (np.concatenate(tied) if tied else np.empty(0, dtype=np.int64))


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
