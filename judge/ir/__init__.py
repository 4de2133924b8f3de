"""Retrieval metrics computed exactly as trec_eval computes them, vectorised with numpy.

Importing this package is cheap: numpy is imported when metrics are first computed.
"""

from judge.ir.evaluate import evaluate, score_queries
from judge.ir.measure_names import (
    DEFAULT_METRICS,
    Measure,
    parse_measure,
    parse_measures,
    valid_names,
)
from judge.ir.ranked_list import (
    average_precision,
    dcg_at_k,
    hit_rate_at_k,
    ndcg_at_k,
    precision_at_k,
    r_precision,
    recall_at_k,
    reciprocal_rank,
)
from judge.ir.result import IRResult, QueryScores
from judge.ir.trec import read_qrels, read_run, write_qrels, write_run

__all__ = [
    "DEFAULT_METRICS",
    "IRResult",
    "Measure",
    "QueryScores",
    "average_precision",
    "dcg_at_k",
    "evaluate",
    "hit_rate_at_k",
    "ndcg_at_k",
    "parse_measure",
    "parse_measures",
    "precision_at_k",
    "r_precision",
    "read_qrels",
    "read_run",
    "recall_at_k",
    "reciprocal_rank",
    "score_queries",
    "valid_names",
    "write_qrels",
    "write_run",
]
