"""nDCG's ideal DCG per query, from a table of how many judged docs each query has per grade.

The ideal ranking of a query lists its judged grades from the highest, so its DCG@k
depends only on its counts per grade, cut at k. Queries share few such patterns of counts
(100,000 queries with grades 0-3 cut at 10 have some hundreds), so each distinct pattern
is laid out and summed once, in rank order as trec_eval sums, and the sums are handed
out to the queries. Grades too wide for a table of counts are laid out by sorting.
"""

from __future__ import annotations

import math

import numpy as np

# Patterns numbered through a dense table when it has at most this many slots per query.
_DENSE_SLOTS_PER_QUERY = 4


def discount(rank: np.ndarray) -> np.ndarray:
    """trec_eval's log2(rank + 1) discount of 1-based ranks, from the C library's log2 as
    trec_eval's (numpy's own log2 differs from it in the last bit for some ranks: 1620)."""
    if not rank.size:
        return np.empty(0, dtype=np.float64)
    top = int(rank.max())
    if top <= rank.size + 1024:  # a table of every rank up to the largest
        table = np.array([math.log2(r + 1.0) for r in range(top + 1)])
        logs: np.ndarray = table[rank]
        return logs
    distinct, inverse = np.unique(rank, return_inverse=True)
    by_rank: np.ndarray = np.array([math.log2(r + 1.0) for r in distinct.tolist()])
    return by_rank[inverse.reshape(rank.shape)]


def gain(grades: np.ndarray, exponential: bool) -> np.ndarray:
    """The grade itself, or 2**grade - 1 for the exponential variant."""
    return np.exp2(grades) - 1.0 if exponential else grades


def dcg(
    query: np.ndarray, rank: np.ndarray, grades: np.ndarray, nq: int, exponential: bool
) -> np.ndarray:
    """Sum of gain / discount per query, in the order given (rank order within a query)."""
    weights = gain(grades, exponential) / discount(rank)
    return np.bincount(query, weights=weights, minlength=nq).astype(np.float64)


def position_in_group(group: np.ndarray) -> np.ndarray:
    """1-based position of each element within its run of equal values (`group` sorted)."""
    n = group.size
    starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1]))) if n else group
    position: np.ndarray = np.arange(1, n + 1) - np.repeat(starts, np.diff(np.append(starts, n)))
    return position


def grade_counts(judged_query: np.ndarray, grades: np.ndarray, nq: int) -> np.ndarray | None:
    """Judged docs per query and grade, columns for grades top, top - 1, ..., 1.

    None when the grades span too wide a range for a table (more slots than 4 per doc).

    Args:
        judged_query: query index of every judged doc.
        grades: grade of every judged doc (integral; -1 and 0 are both not counted).
        nq: number of queries.
    """
    top = int(grades.max(initial=0))
    if (top + 1) * nq > 4 * grades.size + 1024:
        return None
    levels = np.maximum(grades, 0).astype(np.int64)
    table = np.bincount(judged_query * (top + 1) + levels, minlength=nq * (top + 1))
    counts: np.ndarray = table.reshape(nq, top + 1)[:, :0:-1]
    return counts


def ideal_dcg_from_counts(
    counts: np.ndarray, k: int | None, exponential: bool
) -> np.ndarray | None:
    """Ideal DCG@k per query from `grade_counts`; None if the patterns are too many to number.

    Args:
        counts: from `grade_counts`.
        k: cutoff, or None for the whole ranking.
        exponential: 2**grade - 1 gains instead of the grade.
    """
    nq, levels = counts.shape
    if k is not None:  # the counts that fit in the top k, highest grades first
        counts = np.diff(np.minimum(np.cumsum(counts, axis=1), k), axis=1, prepend=0)
    base = int(counts.max(initial=0)) + 1
    slots = base**levels  # (a Python int: no overflow)
    if slots >= 2**62:
        return None
    key = np.zeros(nq, dtype=np.int64)
    for column in range(levels):
        key = key * base + counts[:, column]
    if slots <= _DENSE_SLOTS_PER_QUERY * nq + 1024:
        present = np.bincount(key, minlength=1)
        distinct = np.flatnonzero(present)
        number = np.zeros(present.size, dtype=np.int64)
        number[distinct] = np.arange(distinct.size)
        inverse = number[key]
    else:
        distinct, inverse = np.unique(key, return_inverse=True)
    # Each distinct pattern's counts, decoded from its key; then its grades laid out.
    powers = base ** np.arange(levels - 1, -1, -1, dtype=np.int64)
    pattern_counts = (distinct[:, None] // powers) % base
    grade_of_column = np.arange(levels, 0, -1, dtype=np.float64)  # top, ..., 1
    ideal = np.repeat(np.tile(grade_of_column, distinct.size), pattern_counts.ravel())
    pattern = np.repeat(np.arange(distinct.size), pattern_counts.sum(axis=1))
    per_pattern = dcg(pattern, position_in_group(pattern), ideal, distinct.size, exponential)
    result: np.ndarray = per_pattern[inverse]
    return result


def ideal_dcg_by_sorting(
    judged_query: np.ndarray, grades: np.ndarray, nq: int, k: int | None, exponential: bool
) -> np.ndarray:
    """Ideal DCG@k per query by sorting each query's positive grades (any range of grades).

    Args:
        judged_query: query index of every judged doc, grouped by query.
        grades: grade of every judged doc.
        nq: number of queries.
        k: cutoff, or None for the whole ranking.
        exponential: 2**grade - 1 gains instead of the grade.
    """
    positive = grades > 0
    query, grades = judged_query[positive], grades[positive]
    top = int(grades.max(initial=0))
    if (top + 1) * max(nq, 1) < 2**62:
        # Judged docs come grouped by query, so sorting one integer key per doc
        # orders grades within each query and leaves `query` as it is.
        base = query * (top + 1)
        key = np.sort(base + (top - grades.astype(np.int64)))
        grades = (top - (key - base)).astype(np.float64)
    else:
        order = np.lexsort((-grades, query))
        query, grades = query[order], grades[order]
    position = position_in_group(query)
    if k is not None:
        keep = position <= k
        query, position, grades = query[keep], position[keep], grades[keep]
    return dcg(query, position, grades, nq, exponential)
