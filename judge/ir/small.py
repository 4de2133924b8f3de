"""Retrieval metrics of small qrels and runs in plain Python, without importing numpy.

For `judge ir` on small files, where importing numpy would take most of the time. Every
value is computed with the same floating-point operations, in the same order, as the
vectorised path (`judge.ir.per_query`), so the two agree bit for bit; the tests hold them
to it.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping

from judge.errors import InputFormatError
from judge.ir.measure_names import Measure, check_relevance_level, parse_measures
from judge.ir.result import QueryScores

# Below this many bytes of qrels and run together, `judge ir` computes in plain Python.
SMALL_BYTES = 1 << 20


def score_small(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: str | list[str],
    relevance_level: int = 1,
) -> QueryScores:
    """Per-query values, as `judge.ir.evaluate.score_queries`, for dicts read from files.

    Args:
        qrels: `{query_id: {doc_id: grade}}` (integer grades).
        run: `{query_id: {doc_id: score}}` (no NaN scores).
        metrics: metric names.
        relevance_level: smallest grade that counts as relevant.
    """
    check_relevance_level(relevance_level)
    measures = parse_measures(metrics)
    # A query judged `{}` is no judged query, as on the numpy path (`judged_only`).
    qrels = {query: docs for query, docs in qrels.items() if docs}
    if not qrels:
        raise InputFormatError("qrels has no queries: there is nothing to evaluate against")
    qids = sorted(qrels)
    values: dict[str, list[float]] = {m.name: [] for m in measures}
    for query in qids:
        ranked = _Query(qrels[query], run.get(query, {}), relevance_level)
        for m in measures:
            values[m.name].append(ranked.value(m))
    missing = tuple(q for q in qids if not run.get(q))
    unjudged = tuple(sorted(q for q in run if q not in qrels))
    return QueryScores(qids, values, missing, unjudged)


def _discount(rank: int) -> float:
    return math.log2(rank + 1.0)


def _gain(grade: float, exponential: bool) -> float:
    return 2.0**grade - 1.0 if exponential else grade


def _divide(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


def _rank(doc: str, docs: Mapping[str, float], scores: list[float]) -> int:
    """The rank of a retrieved doc: score descending, then doc id descending."""
    score = docs[doc]
    rank = 1 + len(scores) - bisect_right(scores, score)
    if bisect_right(scores, score) - bisect_left(scores, score) > 1:
        # Ties: the docs with a greater id rank first.
        tied = sorted(d for d, s in docs.items() if s == score)
        rank += len(tied) - bisect_right(tied, doc)
    return rank


class _Query:
    """One query's judged docs the run retrieved with a positive grade, ranked as trec_eval
    ranks them (score descending, then doc id descending)."""

    def __init__(self, judged: Mapping[str, int], docs: Mapping[str, float], level: int):
        self.judged, self.docs, self.level = judged, docs, level
        self.grades = [float(g) for g in judged.values()]
        self.num_rel = float(sum(1 for g in self.grades if g >= level))
        self.scores = sorted(docs.values())
        pairs = []  # (rank, grade) of each positively judged doc retrieved
        for doc, grade in judged.items():
            if grade > 0 and doc in docs:
                pairs.append((_rank(doc, docs, self.scores), float(grade)))
        pairs.sort()
        self.pairs = pairs
        self.relevant = [rank for rank, grade in pairs if grade >= level]
        self._zeros: list[int] | None = None

    def zeros(self) -> list[int]:
        """The ranks of the retrieved docs graded 0 (for bpref and judged@k), in order."""
        if self._zeros is None:
            self._zeros = sorted(
                _rank(doc, self.docs, self.scores)
                for doc, grade in self.judged.items()
                if grade == 0 and doc in self.docs
            )
        return self._zeros

    def _in_top(self, k: int | None) -> list[int]:
        return self.relevant if k is None else [r for r in self.relevant if r <= k]

    def value(self, m: Measure) -> float:
        k = m.k
        if m.family == "P":
            assert k is not None  # parse_measure requires a cutoff for P
            return float(len(self._in_top(k))) / float(k)
        if m.family == "recall":
            return _divide(float(len(self._in_top(k))), self.num_rel)
        if m.family == "hit_rate":
            return 1.0 if self._in_top(k) else 0.0
        if m.family == "r_precision":
            within = sum(1 for r in self.relevant if r <= self.num_rel)
            return _divide(float(within), self.num_rel)
        if m.family == "mrr":
            first = self.relevant[0] if self.relevant else 0
            return 1.0 / first if first and (k is None or first <= k) else 0.0
        if m.family == "map":
            total = 0.0
            for seen, rank in enumerate(self._in_top(k), start=1):
                total += seen / rank
            return _divide(total, self.num_rel)
        if m.family in ("ndcg", "ndcg_exp"):
            return self._ndcg(k, exponential=m.family == "ndcg_exp")
        if m.family == "judged":
            assert k is not None  # parse_measure requires a cutoff for judged
            judged = sum(1 for rank, _ in self.pairs if rank <= k)
            judged += sum(1 for rank in self.zeros() if rank <= k)
            unjudged = float(min(len(self.docs), k)) - float(judged)
            return 1.0 - unjudged / float(k)
        if m.family == "bpref":
            return self._bpref()
        raise AssertionError(f"unhandled measure family {m.family}")  # parse_measure guards

    def _bpref(self) -> float:
        nonrel_judged = float(sum(1 for g in self.grades if 0 <= g < self.level))
        ranked = sorted([*self.pairs, *((rank, 0.0) for rank in self.zeros())])
        total, above = 0.0, 0
        for _, grade in ranked:
            if grade < self.level:
                above += 1
                continue
            share = 0.0
            if above > 0:
                share = min(float(above), self.num_rel) / min(nonrel_judged, self.num_rel)
            total += 1.0 - share
        return _divide(total, self.num_rel)

    def _ndcg(self, k: int | None, exponential: bool) -> float:
        actual = 0.0
        for rank, grade in self.pairs:
            if k is None or rank <= k:
                actual += _gain(grade, exponential) / _discount(rank)
        ideal = 0.0
        best = sorted((g for g in self.grades if g > 0), reverse=True)
        for position, grade in enumerate(best if k is None else best[:k], start=1):
            ideal += _gain(grade, exponential) / _discount(position)
        return _divide(actual, ideal)
