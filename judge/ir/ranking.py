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


def _as_array(values: Iterator[object], count: int) -> np.ndarray:
    try:
        return np.fromiter(values, dtype=np.float64, count=count)
    except (TypeError, ValueError) as exc:
        raise InputFormatError(
            f"run scores and qrels grades must be numbers ({exc}); convert them first"
        ) from exc


def _query_of(flat_index: int, lengths: np.ndarray, qids: list[str]) -> str:
    return qids[int(np.searchsorted(np.cumsum(lengths), flat_index, side="right"))]


def rank_judged(qrels: Qrels, run: Run, qids: list[str]) -> RankedJudgments:
    """Rank the positively graded judged docs of the queries `qids` in `run`."""
    nq = len(qids)
    runs = list(map(run.get, qids, repeat(_EMPTY)))
    judged = [qrels[q] for q in qids]
    run_length = np.fromiter(map(len, runs), dtype=np.int64, count=nq)
    judged_length = np.fromiter(map(len, judged), dtype=np.int64, count=nq)
    n_run, n_judged = int(run_length.sum()), int(judged_length.sum())
    # The dict look-ups and float conversions here are most of the time on large inputs.
    scores = _as_array(chain.from_iterable(map(_VALUES, runs)), n_run)
    grades = _as_array(chain.from_iterable(map(_VALUES, judged)), n_judged)
    found = _as_array(chain.from_iterable(map(_scores_of_judged, runs, judged)), n_judged)

    bad = np.flatnonzero(np.isnan(scores))
    if bad.size:
        query = _query_of(int(bad[0]), run_length, qids)
        raise InputFormatError(f"run score is NaN for query {query!r}; scores must be numbers")
    bad = np.flatnonzero(grades != np.floor(grades))
    if bad.size:
        query = _query_of(int(bad[0]), judged_length, qids)
        raise InputFormatError(
            f"qrels grade {grades[bad[0]]!r} for query {query!r} is not an integer; "
            "grades are integers (-1 and 0 non-relevant)"
        )

    judged_query = np.repeat(np.arange(nq), judged_length)
    positive = (grades > 0) & ~np.isnan(found)
    pair_index = np.flatnonzero(positive)
    pair_query = judged_query[pair_index]
    pair_score = found[pair_index]
    rank, tied = _count_above(scores, run_length, pair_query, pair_score)
    if tied.size:
        _break_ties(rank, tied, runs, judged, judged_length, pair_query, pair_index, pair_score)

    # Pairs are in query order already; sort by rank within each query.
    order = np.argsort(pair_query * (int(rank.max(initial=0)) + 1) + rank, kind="stable")
    return RankedJudgments(
        qids=qids,
        judged_query=judged_query,
        grades=grades,
        pair_query=pair_query[order],
        pair_rank=rank[order],
        pair_grade=grades[pair_index][order],
        run_length=run_length,
    )


def _count_above(
    scores: np.ndarray, run_length: np.ndarray, pair_query: np.ndarray, pair_score: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rank ignoring ties (1 + docs scored higher), and the pairs whose score is tied."""
    n = pair_query.size
    rank = np.ones(n, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(run_length)[:-1]))
    lengths = run_length[pair_query]
    uniform = run_length.size > 0 and bool(np.all(run_length == run_length[0]))

    def count(chunk: np.ndarray, length: int) -> np.ndarray:
        if uniform:  # every query retrieved `length` docs: the scores are a matrix
            block = scores.reshape(-1, length)[pair_query[chunk]]
        else:
            block = scores[starts[pair_query[chunk]][:, None] + np.arange(length)]
        s = pair_score[chunk][:, None]
        rank[chunk] += np.count_nonzero(block > s, axis=1)
        tied: np.ndarray = chunk[np.count_nonzero(block == s, axis=1) > 1]
        return tied

    tasks = []
    for length in np.unique(lengths).tolist():
        members = np.arange(n) if uniform else np.flatnonzero(lengths == length)
        step = max(1, _BLOCK_ELEMENTS // length)
        tasks += [(members[lo : lo + step], length) for lo in range(0, members.size, step)]
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
    runs: list[Mapping[str, float]],
    judged: list[Mapping[str, int]],
    judged_length: np.ndarray,
    pair_query: np.ndarray,
    pair_index: np.ndarray,
    pair_score: np.ndarray,
) -> None:
    """Add, for each tied pair, the tied docs with a greater doc id (they rank first)."""
    judged_start = np.concatenate(([0], np.cumsum(judged_length)[:-1]))
    by_query: dict[int, list[int]] = {}
    for p in tied.tolist():
        by_query.setdefault(int(pair_query[p]), []).append(p)
    for q, pairs in by_query.items():
        wanted = {float(pair_score[p]) for p in pairs}
        groups: dict[float, list[str]] = {}
        for doc, score in runs[q].items():
            if score in wanted:
                groups.setdefault(float(score), []).append(doc)
        for docs in groups.values():
            docs.sort()
        keys = list(judged[q])
        for p in pairs:
            doc = keys[int(pair_index[p] - judged_start[q])]
            docs = groups[float(pair_score[p])]
            rank[p] += len(docs) - bisect_right(docs, doc)
