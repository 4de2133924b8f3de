"""Rank judged docs from dicts (`{query: {doc: score}}`), a chunk of queries at a time.

Walking the dicts and converting their values is most of the time on large inputs, and
runs in C: per query, its run scores, the scores of its judged docs (NaN if not
retrieved) and its grades, into one array. A run's dict is looked up just after its values
were read, and a qrels dict's grades read just after its keys, while each is in the CPU
cache. Each chunk of some 500,000 values is then ranked while it is itself in the cache,
and freed: that is faster than ranking one array of every query's values, and holds less.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, pairwise, repeat
from operator import attrgetter, methodcaller

import numpy as np

from judge.errors import InputFormatError
from judge.ir.rank_counts import count_above
from judge.ir.ranking import (
    Pairs,
    Qrels,
    RankedJudgments,
    Run,
    as_float_array,
    check_grades,
    check_scores,
    ranked_judgments,
    starts_of,
)

_EMPTY: dict[str, float] = {}
_VALUES = methodcaller("values")  # works on any Mapping, and runs in C
_GET = attrgetter("get")
_NAN_DEFAULT = repeat(float("nan"))  # endless and stateless: one serves every query
_CHUNK_VALUES = 1 << 19  # values walked and ranked at a time (4 MB)


def rank_judged(
    qrels: Qrels, run: Run, least_grade: int = 1
) -> tuple[RankedJudgments, tuple[str, ...]]:
    """Rank the judged docs graded `least_grade` (1 or 0) or more of every judged query in `run`.

    Returns the ranked judgments, with the queries in the order of `qrels` (walking both
    dicts in the order they were built reads memory in order), and the run's unjudged
    queries, sorted.
    """
    qrels = judged_only(qrels)
    qids = list(qrels)
    nq = len(qids)
    if len(run) == nq and list(run) == qids:  # the same queries in the same order: no look-ups
        runs = list(run.values())
    else:
        runs = list(map(run.get, qids, repeat(_EMPTY)))
    judged = list(qrels.values())
    run_length = np.fromiter(map(len, runs), dtype=np.int64, count=nq)
    judged_length = np.fromiter(map(len, judged), dtype=np.int64, count=nq)
    # Every run query is judged if the run has no more queries than judged ones it retrieved
    # for (the quick test; a judged query with an empty ranking takes the set difference).
    if len(run) <= int(np.count_nonzero(run_length)):
        unjudged: tuple[str, ...] = ()
    else:
        unjudged = tuple(sorted(run.keys() - qrels.keys()))

    chunks: list[_Chunk] = []
    nan_score: InputFormatError | None = None
    # No judged query still makes one (empty) chunk, so the empty-input errors come from
    # the same place as before.
    bounds = chunk_bounds(run_length + 2 * judged_length) or [(0, 0)]
    for lo, hi in bounds:
        chunk = _rank_chunk(
            runs[lo:hi],
            judged[lo:hi],
            run_length[lo:hi],
            judged_length[lo:hi],
            qids[lo:hi],
            least_grade,
        )
        chunks.append(chunk)
        # A bad grade anywhere is reported before a NaN score, as when checked all at once.
        nan_score = nan_score or chunk.nan_score
    if nan_score is not None:
        raise nan_score
    grades = _joined([c.grades for c in chunks], np.float64)
    judged_offset = starts_of(np.array([c.grades.size for c in chunks], dtype=np.int64))
    pair_offset = starts_of(np.array([c.pairs.index.size for c in chunks], dtype=np.int64))
    query_offset = [lo for lo, _ in bounds]
    pairs = Pairs(
        index=_joined([c.pairs.index + o for c, o in zip(chunks, judged_offset, strict=True)]),
        query=_joined([c.pairs.query + o for c, o in zip(chunks, query_offset, strict=True)]),
        score=_joined([c.pairs.score for c in chunks], np.float64),
        rank=_joined([c.pairs.rank for c in chunks]),
        tied=_joined([c.pairs.tied + o for c, o in zip(chunks, pair_offset, strict=True)]),
    )
    judged_query = np.repeat(np.arange(nq), judged_length)
    doc_ids = _DictDocIds(runs, judged, judged_length)
    ranked = ranked_judgments(qids, judged_query, grades, run_length, pairs, doc_ids, least_grade)
    return ranked, unjudged


def judged_only(qrels: Qrels) -> Qrels:
    """`qrels` without its queries judged `{}`: a query with no judgments is no judged query
    (a qrels file cannot hold one), so its run results are ignored rather than scored 0."""
    if all(map(len, qrels.values())):  # the usual case: no copy
        return qrels
    return {query: docs for query, docs in qrels.items() if len(docs)}


@dataclass(frozen=True)
class _Chunk:
    grades: np.ndarray
    pairs: Pairs  # indices local to the chunk
    nan_score: InputFormatError | None


def chunk_bounds(width: np.ndarray) -> list[tuple[int, int]]:
    """(first, end) query of consecutive chunks of about `_CHUNK_VALUES` values each."""
    ends = np.cumsum(width)
    total = int(ends[-1]) if ends.size else 0
    cuts = np.searchsorted(ends, np.arange(_CHUNK_VALUES, total, _CHUNK_VALUES), side="right")
    bounds = [0, *np.unique(cuts).tolist(), width.size]
    return [(lo, hi) for lo, hi in pairwise(bounds) if hi > lo]


def _rank_chunk(
    runs: list[Mapping[str, float]],
    judged: list[Mapping[str, int]],
    run_length: np.ndarray,
    judged_length: np.ndarray,
    qids: list[str],
    least_grade: int,
) -> _Chunk:
    """Walk some queries' dicts into one array and rank their judged docs."""
    n_run, n_judged = int(run_length.sum()), int(judged_length.sum())
    lookups = map(map, map(_GET, runs), judged, repeat(_NAN_DEFAULT))
    per_query = chain.from_iterable(
        zip(map(_VALUES, runs), lookups, map(_VALUES, judged), strict=True)
    )
    values = as_float_array(chain.from_iterable(per_query), n_run + 2 * n_judged)
    row_start = starts_of(run_length + 2 * judged_length)
    found_at = np.arange(n_judged) + np.repeat(
        row_start + run_length - starts_of(judged_length), judged_length
    )
    found = values[found_at]
    grades = values[found_at + np.repeat(judged_length, judged_length)]
    # (Judged scores and grades stay between the rows: ranking reads only the rows.)
    check_grades(grades, judged_length, qids)
    nan_score = None
    try:
        check_scores(values, run_length + 2 * judged_length, qids, not_scores=found_at)
    except InputFormatError as exc:
        nan_score = exc
    pair_index = np.flatnonzero((grades >= least_grade) & ~np.isnan(found))
    pair_query = np.repeat(np.arange(len(qids)), judged_length)[pair_index]
    pair_score = found[pair_index]
    rank, tied = count_above(values, row_start, run_length, pair_query, pair_score)
    return _Chunk(grades, Pairs(pair_index, pair_query, pair_score, rank, tied), nan_score)


def _joined(pieces: list[np.ndarray], dtype: type = np.int64) -> np.ndarray:
    return np.concatenate(pieces) if pieces else np.empty(0, dtype=dtype)


class _DictDocIds:
    """Doc ids read from the dicts, for the queries with tied scores."""

    def __init__(
        self,
        runs: list[Mapping[str, float]],
        judged: list[Mapping[str, int]],
        judged_length: np.ndarray,
    ):
        self.runs, self.judged_docs, self.judged_length = runs, judged, judged_length
        self.judged_start: np.ndarray | None = None  # computed on the first tie

    def tied(self, query: int, scores: set[float]) -> dict[float, list[str]]:
        """Sorted ids of the query's retrieved docs that have one of `scores`, by score."""
        groups: dict[float, list[str]] = {}
        for doc, value in self.runs[query].items():
            # Compared as the doubles they were ranked as (an int beyond 2**53 is one).
            score = float(value)
            if score in scores:
                groups.setdefault(score, []).append(doc)
        for docs in groups.values():
            docs.sort()
        return groups

    def judged(self, index: int) -> str:
        """Id of the judged doc at flat position `index`."""
        if self.judged_start is None:
            self.judged_start = starts_of(self.judged_length)
        query = int(np.searchsorted(self.judged_start, index, side="right")) - 1
        return list(self.judged_docs[query])[index - int(self.judged_start[query])]
