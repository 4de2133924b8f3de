"""Rank the relevant judged documents of every query at once, exactly as trec_eval does.

Every metric judge computes depends only on the ranks of the judged documents with a
positive grade, so those are all that is ranked: the rank of a document is one plus the
number of documents of its query with a higher score, plus, for ties, the number of tied
documents with a greater doc id (trec_eval breaks ties by doc id, descending). The counts
are binary searches in each query's sorted scores, vectorised (`judge.ir.rank_counts`);
only queries with exact ties fall back to Python, and only for the tied scores.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter, methodcaller
from typing import Protocol

import numpy as np

from judge.errors import InputFormatError
from judge.ir.rank_counts import count_above

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]

_NAN = float("nan")
_EMPTY: dict[str, float] = {}
_VALUES = methodcaller("values")  # works on any Mapping, and runs in C
_GET = attrgetter("get")
_NAN_DEFAULT = repeat(_NAN)  # endless and stateless: one serves every query


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
    def __init__(
        self,
        runs: list[Mapping[str, float]],
        judged: list[Mapping[str, int]],
        judged_length: np.ndarray,
    ):
        self.runs, self.judged_docs, self.judged_length = runs, judged, judged_length
        self.judged_start: np.ndarray | None = None  # computed on the first tie

    def tied(self, query: int, scores: set[float]) -> dict[float, list[str]]:
        groups: dict[float, list[str]] = {}
        for doc, score in self.runs[query].items():
            if score in scores:
                groups.setdefault(float(score), []).append(doc)
        for docs in groups.values():
            docs.sort()
        return groups

    def judged(self, index: int) -> str:
        if self.judged_start is None:
            self.judged_start = _starts(self.judged_length)
        query = int(np.searchsorted(self.judged_start, index, side="right")) - 1
        return list(self.judged_docs[query])[index - int(self.judged_start[query])]


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
    """Refuse grades that are not integers."""
    bad = np.flatnonzero(grades != np.floor(grades))
    if bad.size:
        query = _query_of(int(bad[0]), lengths, qids)
        raise InputFormatError(
            f"qrels grade {grades[bad[0]]!r} for query {query!r} is not an integer; "
            "grades are integers (-1 and 0 non-relevant)"
        )


def rank_judged(qrels: Qrels, run: Run) -> tuple[RankedJudgments, tuple[str, ...]]:
    """Rank the positively graded judged docs of every judged query in `run`.

    Returns the ranked judgments, with the queries in the order of `qrels` (walking both
    dicts in the order they were built reads memory in order), and the run's unjudged
    queries, sorted.
    """
    qids = list(qrels)
    nq = len(qids)
    if len(run) == nq and list(run) == qids:  # the same queries in the same order: no look-ups
        runs = list(run.values())
    else:
        runs = list(map(run.get, qids, repeat(_EMPTY)))
    judged = list(qrels.values())
    run_length = np.fromiter(map(len, runs), dtype=np.int64, count=nq)
    judged_length = np.fromiter(map(len, judged), dtype=np.int64, count=nq)
    n_run, n_judged = int(run_length.sum()), int(judged_length.sum())
    # Every run query is judged if the run has no more queries than judged ones it retrieved
    # for (the quick test; a judged query with an empty ranking takes the set difference).
    if len(run) <= int(np.count_nonzero(run_length)):
        unjudged: tuple[str, ...] = ()
    else:
        unjudged = tuple(sorted(run.keys() - qrels.keys()))
    # Walking the dicts and converting their values is most of the time on large inputs.
    # Per query, all in C: its scores, the scores of its judged docs (NaN if not
    # retrieved), then its grades. A run's dict is looked up just after its values were
    # read, and a qrels dict's grades read just after its keys, while each is in the cache.
    lookups = map(map, map(_GET, runs), judged, repeat(_NAN_DEFAULT))
    per_query = chain.from_iterable(
        zip(map(_VALUES, runs), lookups, map(_VALUES, judged), strict=True)
    )
    scores = as_float_array(chain.from_iterable(per_query), n_run + 2 * n_judged)
    run_start = _starts(run_length + 2 * judged_length)
    judged_offset = run_start + run_length - _starts(judged_length)
    found_at = np.arange(n_judged) + np.repeat(judged_offset, judged_length)
    found = scores[found_at]
    grades = scores[found_at + np.repeat(judged_length, judged_length)]
    # (Judged scores and grades stay between the queries' rows: ranking reads only the rows.)
    check_grades(grades, judged_length, qids)  # first: a NaN grade is not a NaN score
    check_scores(scores, run_length + 2 * judged_length, qids, not_scores=found_at)
    arrays = RunArrays(
        qids=qids,
        scores=scores,
        run_start=run_start,
        run_length=run_length,
        judged_query=np.repeat(np.arange(nq), judged_length),
        grades=grades,
        found=found,
        doc_ids=_DictDocIds(runs, judged, judged_length),
    )
    return rank_arrays(arrays), unjudged


def rank_arrays(a: RunArrays) -> RankedJudgments:
    """Rank the positively graded judged docs that the run retrieved, per query."""
    positive = (a.grades > 0) & ~np.isnan(a.found)
    pair_index = np.flatnonzero(positive)
    pair_query = a.judged_query[pair_index]
    pair_score = a.found[pair_index]
    rank, tied = count_above(a.scores, a.run_start, a.run_length, pair_query, pair_score)
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
