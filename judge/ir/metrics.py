"""Per-query values of each retrieval metric, computed from ranked judgments with numpy."""

from __future__ import annotations

import numpy as np

from judge.ir.measures import Measure
from judge.ir.ranking import RankedJudgments


def _count(values: np.ndarray, nq: int, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(values, weights=weights, minlength=nq).astype(np.float64)


def _divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, 0 where den is 0 (a query with no relevant doc scores 0, as in trec_eval)."""
    out = np.zeros_like(num, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _discount(rank: np.ndarray) -> np.ndarray:
    return np.log2(rank.astype(np.float64) + 1.0)


def _position_in_group(group: np.ndarray) -> np.ndarray:
    """1-based position of each element within its run of equal values (`group` sorted)."""
    n = group.size
    starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1]))) if n else group
    position: np.ndarray = np.arange(1, n + 1) - np.repeat(starts, np.diff(np.append(starts, n)))
    return position


def _gain(grades: np.ndarray, exponential: bool) -> np.ndarray:
    return np.exp2(grades) - 1.0 if exponential else grades


class MetricTable:
    """Computes metric arrays (one value per query) from one set of ranked judgments."""

    def __init__(self, ranked: RankedJudgments, relevance_level: int):
        self.r = ranked
        self.nq = len(ranked.qids)
        self.relevant = ranked.pair_grade >= relevance_level
        self.num_rel = _count(ranked.judged_query[ranked.grades >= relevance_level], self.nq)
        rel_query = ranked.pair_query[self.relevant]
        self.rel_query = rel_query
        self.rel_rank = ranked.pair_rank[self.relevant]
        # Position of each relevant retrieved doc among its query's relevant retrieved docs.
        self.rel_seen = _position_in_group(rel_query)
        self._ideal_order: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def values(self, m: Measure) -> np.ndarray:
        """One value per query (in `ranked.qids` order) for measure m."""
        k = m.k
        if m.family == "P":
            assert k is not None  # parse_measure requires a cutoff for P
            return self._rel_in_top(k) / float(k)
        if m.family == "recall":
            return _divide(self._rel_in_top(k), self.num_rel)
        if m.family == "hit_rate":
            return (self._rel_in_top(k) > 0).astype(np.float64)
        if m.family == "r_precision":
            within = self.rel_rank <= self.num_rel[self.rel_query]
            return _divide(_count(self.rel_query[within], self.nq), self.num_rel)
        if m.family == "mrr":
            return self._reciprocal_rank(k)
        if m.family == "map":
            keep = self._top(self.rel_rank, k)
            precision = self.rel_seen[keep] / self.rel_rank[keep]
            return _divide(_count(self.rel_query[keep], self.nq, precision), self.num_rel)
        if m.family in ("ndcg", "ndcg_exp"):
            return self._ndcg(k, exponential=m.family == "ndcg_exp")
        raise AssertionError(f"unhandled measure family {m.family}")  # parse_measure guards

    @staticmethod
    def _top(rank: np.ndarray, k: int | None) -> np.ndarray:
        return np.ones(rank.size, dtype=bool) if k is None else rank <= k

    def _rel_in_top(self, k: int | None) -> np.ndarray:
        return _count(self.rel_query[self._top(self.rel_rank, k)], self.nq)

    def _reciprocal_rank(self, k: int | None) -> np.ndarray:
        out = np.zeros(self.nq)
        firsts = self.rel_seen == 1
        query, rank = self.rel_query[firsts], self.rel_rank[firsts]
        keep = self._top(rank, k)
        out[query[keep]] = 1.0 / rank[keep]
        return out

    def _ideal(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Judged positive grades per query in ideal order: (query, position, grade)."""
        if self._ideal_order is None:
            query, grades = self._ideal_by_counts() or self._ideal_by_sorting()
            self._ideal_order = (query, _position_in_group(query), grades)
        return self._ideal_order

    def _ideal_by_counts(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Count each query's docs per grade, then lay grades out from the highest: no sort.

        None when the grades span too wide a range for a table of counts.
        """
        grades, nq = self.r.grades, self.nq
        top = int(grades.max(initial=0))
        if (top + 1) * nq > 4 * grades.size + 1024:
            return None
        levels = np.maximum(grades, 0).astype(np.int64)  # -1 and 0 gain nothing alike
        table = np.bincount(self.r.judged_query * (top + 1) + levels, minlength=nq * (top + 1))
        counts = table.reshape(nq, top + 1)[:, :0:-1]  # grades top, top - 1, ..., 1
        ideal = np.repeat(np.tile(np.arange(top, 0, -1, dtype=np.float64), nq), counts.ravel())
        return np.repeat(np.arange(nq), counts.sum(axis=1)), ideal

    def _ideal_by_sorting(self) -> tuple[np.ndarray, np.ndarray]:
        positive = self.r.grades > 0
        query, grades = self.r.judged_query[positive], self.r.grades[positive]
        top = int(grades.max(initial=0))
        if (top + 1) * max(self.nq, 1) < 2**62:
            # Judged docs come grouped by query, so sorting one integer key per doc
            # orders grades within each query and leaves `query` as it is.
            base = query * (top + 1)
            key = np.sort(base + (top - grades.astype(np.int64)))
            return query, (top - (key - base)).astype(np.float64)
        order = np.lexsort((-grades, query))
        return query[order], grades[order]

    def _ndcg(self, k: int | None, exponential: bool) -> np.ndarray:
        r = self.r
        keep = self._top(r.pair_rank, k)
        gain = _gain(r.pair_grade[keep], exponential) / _discount(r.pair_rank[keep])
        dcg = _count(r.pair_query[keep], self.nq, gain)
        query, position, grades = self._ideal()
        if k is not None:
            ideal_keep = position <= k
            query, position, grades = query[ideal_keep], position[ideal_keep], grades[ideal_keep]
        idcg = _count(query, self.nq, _gain(grades, exponential) / _discount(position))
        return _divide(dcg, idcg)
