"""`judge.ir.evaluate`: trec_eval-exact retrieval metrics over a set of queries.

numpy is imported when metrics are computed, not with this module: `judge ir` on small
files computes without it, and `judge.ir` imports this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from judge.errors import InputFormatError
from judge.ir.dict_input import check_dict, name_the_value
from judge.ir.measure_names import JUDGED_FAMILIES, check_relevance_level, parse_measures
from judge.ir.result import IRResult as IRResult  # (these three are public here too)
from judge.ir.result import QueryScores as QueryScores
from judge.ir.result import result
from judge.ir.result import result_of as result_of
from judge.ir.trec import PathLike

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]


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
    relevance_level = check_relevance_level(relevance_level)
    for data, name in ((qrels, "qrels"), (run, "run")):
        if isinstance(data, Mapping):
            check_dict(data, name)
    measures = parse_measures(list(metrics) if not isinstance(metrics, str) else metrics)
    import numpy as np

    from judge.ir.from_dicts import rank_judged
    from judge.ir.per_query import MetricTable
    from judge.ir.rank_columns import rank_sources
    from judge.ir.ranking import NotNumbersError

    # bpref and judged@k also read the docs graded 0: rank those only when they are asked for.
    least_grade = 0 if any(m.family in JUDGED_FAMILIES for m in measures) else 1
    if not (
        isinstance(qrels, (Mapping, str, os.PathLike))
        and isinstance(run, (Mapping, str, os.PathLike))
    ):
        raise InputFormatError(
            "qrels and run must be dicts: {query_id: {doc_id: grade}} and "
            "{query_id: {doc_id: score}}, or paths of TREC qrels and run files"
        )
    try:
        if isinstance(qrels, Mapping) and isinstance(run, Mapping):
            ranked, unjudged = rank_judged(qrels, run, least_grade)
        else:
            ranked, unjudged = rank_sources(qrels, run, least_grade)
    except NotNumbersError:
        # The arrays refuse a value that is not a number as they take it; name it.
        for data, name in ((qrels, "qrels"), (run, "run")):
            if isinstance(data, Mapping):
                name_the_value(data, name)
        raise
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
            straight into arrays (much faster than `read_run` for big runs). In dicts, ids
            are strings and grades and scores numbers (Python's or numpy's), as a TREC
            file gives them: anything else raises `InputFormatError`.
        metrics: metric names such as `["ndcg@10", "map", "P@5"]`, or one comma-separated
            string; see `judge.ir.valid_names()`.
        relevance_level: smallest grade that counts as relevant, an integer of at least 1
            (nDCG gains use the raw grade regardless).
        per_query: return `{query_id: {metric: value}}` instead of `{metric: mean}`.

    Returns:
        An `IRResult` dict. Means are over every judged query: a judged query missing from
        the run scores 0 and counts; run queries without judgments (a query judged `{}`
        has none) are ignored. Both are listed on the result and reported with a
        `CoverageWarning`.
    """
    # Means do not depend on the order of queries (fsum is correctly rounded): no sort.
    scores = _score(qrels, run, metrics, relevance_level, in_order=per_query)
    return result(scores, per_query, stacklevel=4)
