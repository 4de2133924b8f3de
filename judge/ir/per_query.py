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
        self.level = relevance_level
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
        if m.family == "judged":
            assert k is not None  # parse_measure requires a cutoff for judged
            return self._judged(k)
        if m.family == "bpref":
            return self._bpref()
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

    def _zeros(self) -> tuple[np.ndarray, np.ndarray]:
        """Query and rank of each retrieved doc graded 0 (ranked when bpref or judged@k is
        asked for: `judge.ir.evaluate` passes `least_grade=0`)."""
        r = self.r
        if r.zero_query is None or r.zero_rank is None:
            raise AssertionError("bpref and judged@k need the docs graded 0 ranked")
        return r.zero_query, r.zero_rank

    def _judged(self, k: int) -> np.ndarray:
        """1 - trec_eval's unj_k: the docs of the top k not judged (not in the qrels, or
        graded below 0), / k; ranks past the end of the run count as judged."""
        zero_query, zero_rank = self._zeros()
        r = self.r
        judged = _count(r.pair_query[r.pair_rank <= k], self.nq)
        judged += _count(zero_query[zero_rank <= k], self.nq)
        unjudged = np.minimum(r.run_length, k).astype(np.float64) - judged
        out: np.ndarray = 1.0 - unjudged / float(k)
        return out

    def _bpref(self) -> np.ndarray:
        """trec_eval's bpref: for each relevant doc retrieved, 1 - min(n, R) / min(N, R),
        n the judged non-relevant docs ranked above it, N those judged for the query; the
        sum / R. Docs not judged, or graded below 0, count for nothing."""
        zero_query, zero_rank = self._zeros()
        r = self.r
        query = np.concatenate((r.pair_query, zero_query))
        rank = np.concatenate((r.pair_rank, zero_rank))
        nonrel = np.concatenate((r.pair_grade < self.level, np.ones(zero_query.size, bool)))
        order = np.argsort(query * (int(rank.max(initial=0)) + 1) + rank, kind="stable")
        query, nonrel = query[order], nonrel[order]
        # Judged non-relevant docs above each doc of its query: those before it in the
        # sorted arrays, less those of the queries before.
        before = np.cumsum(nonrel) - nonrel
        earlier = np.cumsum(_count(query[nonrel], self.nq)) - _count(query[nonrel], self.nq)
        above = before - earlier[query].astype(np.int64)
        judged = r.grades >= 0
        nonrel_judged = _count(r.judged_query[judged & (r.grades < self.level)], self.nq)
        rel = ~nonrel
        rel_query, rel_above = query[rel], above[rel].astype(np.float64)
        num_rel = self.num_rel[rel_query]
        share = np.zeros(rel_query.size)
        np.divide(
            np.minimum(rel_above, num_rel),
            np.minimum(nonrel_judged[rel_query], num_rel),
            out=share,
            where=rel_above > 0,
        )
        # (Summed in rank order, as trec_eval sums: the same value to the last bit.)
        return _divide(_count(rel_query, self.nq, 1.0 - share), self.num_rel)

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
