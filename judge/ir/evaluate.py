"""`judge.ir.evaluate`: trec_eval-exact retrieval metrics over a set of queries."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from judge.errors import CoverageWarning, InputFormatError, JudgeError
from judge.formatting import counted
from judge.ir.from_dicts import rank_judged
from judge.ir.measure_names import parse_measures
from judge.ir.per_query import MetricTable
from judge.ir.rank_columns import rank_sources
from judge.ir.ranking import Qrels, Run
from judge.ir.trec_columns import PathLike


class IRResult(dict):  # type: ignore[type-arg]
    """A plain dict of results that also says which queries were missing or ignored.

    Attributes:
        missing_queries: judged queries with no results in the run; they score 0 and count.
        unjudged_queries: run queries with no judgments; they are ignored.
    """

    missing_queries: tuple[str, ...] = ()
    unjudged_queries: tuple[str, ...] = ()


@dataclass(frozen=True)
class QueryScores:
    """Per-query metric values, in sorted query order, and the coverage of the run."""

    qids: list[str]
    values: dict[str, np.ndarray]
    missing_queries: tuple[str, ...]  # judged, absent from the run: they score 0
    unjudged_queries: tuple[str, ...]  # in the run without judgments: ignored


def score_queries(
    qrels: Qrels | PathLike,
    run: Run | PathLike,
    metrics: str | Sequence[str],
    *,
    relevance_level: int = 1,
) -> QueryScores:
    """Per-query metric arrays over every judged query (sorted by query id).

    Args:
        qrels: judgments, as for `evaluate`.
        run: retrieved documents, as for `evaluate`.
        metrics: metric names, as for `evaluate`.
        relevance_level: smallest grade that counts as relevant.
    """
    return _score(qrels, run, metrics, relevance_level, in_order=True)


def _score(
    qrels: Qrels | PathLike,
    run: Run | PathLike,
    metrics: str | Sequence[str],
    relevance_level: int,
    in_order: bool,
) -> QueryScores:
    """score_queries; `in_order=False` leaves queries in the order ranked (for means)."""
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, int):
        raise JudgeError(f"relevance_level must be an integer, got {relevance_level!r}")
    measures = parse_measures(list(metrics) if not isinstance(metrics, str) else metrics)
    if isinstance(qrels, Mapping) and isinstance(run, Mapping):
        ranked, unjudged = rank_judged(qrels, run)
    elif isinstance(qrels, (Mapping, str, os.PathLike)) and isinstance(
        run, (Mapping, str, os.PathLike)
    ):
        ranked, unjudged = rank_sources(qrels, run)
    else:
        raise InputFormatError(
            "qrels and run must be dicts: {query_id: {doc_id: grade}} and "
            "{query_id: {doc_id: score}}, or paths of TREC qrels and run files"
        )
    if not ranked.qids:
        raise InputFormatError("qrels has no queries: there is nothing to evaluate against")
    table = MetricTable(ranked, relevance_level)
    values = {m.name: table.values(m) for m in measures}
    missing = tuple(sorted(ranked.qids[i] for i in np.flatnonzero(ranked.run_length == 0)))
    if not in_order:
        return QueryScores(ranked.qids, values, missing, unjudged)
    # trec_eval orders queries by strcmp; Python's str order is the same code point order.
    order = sorted(range(len(ranked.qids)), key=ranked.qids.__getitem__)
    index = np.array(order, dtype=np.int64)
    return QueryScores(
        qids=list(map(ranked.qids.__getitem__, order)),
        values={name: array[index] for name, array in values.items()},
        missing_queries=missing,
        unjudged_queries=unjudged,
    )


def evaluate(
    qrels: Qrels | PathLike,
    run: Run | PathLike,
    metrics: str | Sequence[str],
    *,
    relevance_level: int = 1,
    per_query: bool = False,
) -> IRResult:
    """Compute retrieval metrics exactly as trec_eval does (with -c).

    Args:
        qrels: judgments, `{query_id: {doc_id: grade}}`; grades are integers, -1 and 0
            are non-relevant. Or the path of a TREC qrels file.
        run: retrieved documents, `{query_id: {doc_id: score}}`; higher scores rank first,
            ties are broken by doc id, descending. Or the path of a TREC run file, read
            straight into arrays (much faster than `read_run` for big runs).
        metrics: metric names such as `["ndcg@10", "map", "P@5"]`, or one comma-separated
            string; see `judge.ir.valid_names()`.
        relevance_level: smallest grade that counts as relevant (nDCG gains use the raw
            grade regardless).
        per_query: return `{query_id: {metric: value}}` instead of `{metric: mean}`.

    Returns:
        An `IRResult` dict. Means are over every judged query: a judged query missing from
        the run scores 0 and counts; run queries without judgments are ignored. Both are
        listed on the result and reported with a `CoverageWarning`.
    """
    # Means do not depend on the order of queries (fsum is correctly rounded): no sort.
    scores = _score(qrels, run, metrics, relevance_level, in_order=per_query)
    return _result(scores, per_query, stacklevel=4)


def result_of(scores: QueryScores, *, per_query: bool = False) -> IRResult:
    """The `evaluate` result of per-query scores: means, or values per query.

    Args:
        scores: from `score_queries`.
        per_query: `{query_id: {metric: value}}` instead of `{metric: mean}`.
    """
    return _result(scores, per_query, stacklevel=4)


def _result(scores: QueryScores, per_query: bool, stacklevel: int) -> IRResult:
    qids = scores.qids
    if per_query:
        columns = {name: array.tolist() for name, array in scores.values.items()}
        result = IRResult(
            (q, {name: column[i] for name, column in columns.items()}) for i, q in enumerate(qids)
        )
    else:
        # fsum is correctly rounded, so the mean does not depend on the order of queries.
        result = IRResult(
            (name, math.fsum(a.tolist()) / len(qids)) for name, a in scores.values.items()
        )
    result.missing_queries = scores.missing_queries
    result.unjudged_queries = scores.unjudged_queries
    _warn_coverage(result, len(qids), stacklevel)
    return result


def _examples(queries: tuple[str, ...]) -> str:
    shown = ", ".join(repr(q) for q in queries[:5])
    return shown + (f", ... ({len(queries)} in all)" if len(queries) > 5 else "")


def _warn_coverage(result: IRResult, judged: int, stacklevel: int) -> None:
    if result.missing_queries:
        warnings.warn(
            f"{len(result.missing_queries)} of {judged} judged queries have no results in the "
            f"run and score 0 (they count in the mean): {_examples(result.missing_queries)}",
            CoverageWarning,
            stacklevel=stacklevel,
        )
    if result.unjudged_queries:
        warnings.warn(
            f"{counted(len(result.unjudged_queries), 'run query', 'run queries')} without "
            "judgments, ignored: "
            f"{_examples(result.unjudged_queries)}",
            CoverageWarning,
            stacklevel=stacklevel,
        )
