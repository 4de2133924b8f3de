"""Per-query values of each retrieval metric, computed from ranked judgments with numpy."""

from __future__ import annotations

import numpy as np

from judge.ir.ideal import (
    dcg,
    grade_counts,
    ideal_dcg_by_sorting,
    ideal_dcg_from_counts,
    position_in_group,
)
from judge.ir.measure_names import Measure
from judge.ir.ranking import RankedJudgments


def _count(values: np.ndarray, nq: int, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(values, weights=weights, minlength=nq).astype(np.float64)


def _divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, 0 where den is 0 (a query with no relevant doc scores 0, as in trec_eval)."""
    out = np.zeros_like(num, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


class MetricTable:
    """Computes metric arrays (one value per query) from one set of ranked judgments."""

    def __init__(self, ranked: RankedJudgments, relevance_level: int):
        self.r = ranked
        self.nq = len(ranked.qids)
        self.relevant = ranked.pair_grade >= relevance_level
        # Docs per query and grade: the relevant judged docs and nDCG's ideal rankings.
        self.counts = grade_counts(ranked.judged_query, ranked.grades, self.nq)
        if self.counts is not None and relevance_level >= 1:
            top = self.counts.shape[1]  # columns: grades top, ..., 1
            relevant_columns = self.counts[:, : max(top - relevance_level + 1, 0)]
            self.num_rel = relevant_columns.sum(axis=1).astype(np.float64)
        else:
            relevant_judged = ranked.judged_query[ranked.grades >= relevance_level]
            self.num_rel = _count(relevant_judged, self.nq)
        rel_query = ranked.pair_query[self.relevant]
        self.rel_query = rel_query
        self.rel_rank = ranked.pair_rank[self.relevant]
        # Position of each relevant retrieved doc among its query's relevant retrieved docs.
        self.rel_seen = position_in_group(rel_query)

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

    def _ndcg(self, k: int | None, exponential: bool) -> np.ndarray:
        r = self.r
        keep = self._top(r.pair_rank, k)
        actual = dcg(
            r.pair_query[keep], r.pair_rank[keep], r.pair_grade[keep], self.nq, exponential
        )
        ideal = None
        if self.counts is not None:
            ideal = ideal_dcg_from_counts(self.counts, k, exponential)
        if ideal is None:
            ideal = ideal_dcg_by_sorting(r.judged_query, r.grades, self.nq, k, exponential)
        return _divide(actual, ideal)
