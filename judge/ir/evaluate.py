"""`judge.ir.evaluate`: trec_eval-exact retrieval metrics over a set of queries."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from judge.errors import CoverageWarning, InputFormatError, JudgeError
from judge.ir.measures import parse_measures
from judge.ir.metrics import MetricTable
from judge.ir.ranking import Qrels, Run, rank_judged


class IRResult(dict):  # type: ignore[type-arg]
    """A plain dict of results that also says which queries were missing or ignored.

    Attributes:
        missing_queries: judged queries with no results in the run; they score 0 and count.
        unjudged_queries: run queries with no judgments; they are ignored.
    """

    missing_queries: tuple[str, ...] = ()
    unjudged_queries: tuple[str, ...] = ()


def score_queries(
    qrels: Qrels, run: Run, metrics: str | Sequence[str], *, relevance_level: int = 1
) -> tuple[list[str], dict[str, np.ndarray]]:
    """Per-query metric arrays: (sorted judged query ids, {metric: values in that order}).

    Args:
        qrels: judgments, as for `evaluate`.
        run: retrieved documents, as for `evaluate`.
        metrics: metric names, as for `evaluate`.
        relevance_level: smallest grade that counts as relevant.
    """
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, int):
        raise JudgeError(f"relevance_level must be an integer, got {relevance_level!r}")
    measures = parse_measures(list(metrics) if not isinstance(metrics, str) else metrics)
    if not isinstance(qrels, Mapping) or not isinstance(run, Mapping):
        raise InputFormatError(
            "qrels and run must be dicts: {query_id: {doc_id: grade}} and "
            "{query_id: {doc_id: score}}; read TREC files with judge.ir.read_qrels/read_run"
        )
    # trec_eval orders queries by strcmp; Python's str order is the same code point order.
    qids = sorted(qrels)
    table = MetricTable(rank_judged(qrels, run, qids), relevance_level)
    return qids, {m.name: table.values(m) for m in measures}


def evaluate(
    qrels: Qrels,
    run: Run,
    metrics: str | Sequence[str],
    *,
    relevance_level: int = 1,
    per_query: bool = False,
) -> IRResult:
    """Compute retrieval metrics exactly as trec_eval does (with -c).

    Args:
        qrels: judgments, `{query_id: {doc_id: grade}}`; grades are integers, -1 and 0
            are non-relevant.
        run: retrieved documents, `{query_id: {doc_id: score}}`; higher scores rank first,
            ties are broken by doc id, descending.
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
    qids, values = score_queries(qrels, run, metrics, relevance_level=relevance_level)
    if not qids:
        raise InputFormatError("qrels has no queries: there is nothing to evaluate against")
    if per_query:
        columns = {name: array.tolist() for name, array in values.items()}
        result = IRResult(
            (q, {name: column[i] for name, column in columns.items()}) for i, q in enumerate(qids)
        )
    else:
        # fsum is correctly rounded, so the mean does not depend on the order of queries.
        result = IRResult((name, math.fsum(a.tolist()) / len(qids)) for name, a in values.items())
    result.missing_queries = tuple(q for q in qids if not run.get(q))
    result.unjudged_queries = tuple(sorted(q for q in run if q not in qrels))
    _warn_coverage(result, len(qids))
    return result


def _examples(queries: tuple[str, ...]) -> str:
    shown = ", ".join(repr(q) for q in queries[:5])
    return shown + (f", ... ({len(queries)} in all)" if len(queries) > 5 else "")


def _warn_coverage(result: IRResult, judged: int) -> None:
    if result.missing_queries:
        warnings.warn(
            f"{len(result.missing_queries)} of {judged} judged queries have no results in the "
            f"run and score 0 (they count in the mean): {_examples(result.missing_queries)}",
            CoverageWarning,
            stacklevel=3,
        )
    if result.unjudged_queries:
        warnings.warn(
            f"{len(result.unjudged_queries)} run queries have no judgments and are ignored: "
            f"{_examples(result.unjudged_queries)}",
            CoverageWarning,
            stacklevel=3,
        )
