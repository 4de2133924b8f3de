"""Results of retrieval metrics: per-query scores, means and the coverage warnings.

Without numpy, so `judge ir` on small files can print results without importing it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

from judge.errors import CoverageWarning
from judge.formatting import counted


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
    values: dict[str, Any]  # numpy arrays (lists of floats on judge ir's small-file path)
    missing_queries: tuple[str, ...]  # judged, absent from the run: they score 0
    unjudged_queries: tuple[str, ...]  # in the run without judgments: ignored


def result_of(scores: QueryScores, *, per_query: bool = False) -> IRResult:
    """The `evaluate` result of per-query scores: means, or values per query.

    Args:
        scores: from `score_queries`.
        per_query: `{query_id: {metric: value}}` instead of `{metric: mean}`.
    """
    return result(scores, per_query, stacklevel=4)


def _floats(values: Any) -> list[float]:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def result(scores: QueryScores, per_query: bool, stacklevel: int) -> IRResult:
    """`result_of`, warning at `stacklevel` (the caller's caller's line)."""
    qids = scores.qids
    if per_query:
        columns = {name: _floats(array) for name, array in scores.values.items()}
        out = IRResult(
            (q, {name: column[i] for name, column in columns.items()}) for i, q in enumerate(qids)
        )
    else:
        # fsum is correctly rounded, so the mean does not depend on the order of queries.
        out = IRResult(
            (name, math.fsum(_floats(a)) / len(qids)) for name, a in scores.values.items()
        )
    out.missing_queries = scores.missing_queries
    out.unjudged_queries = scores.unjudged_queries
    judged_at = any(name.startswith("judged@") for name in scores.values)
    _warn_coverage(out, len(qids), stacklevel, judged_at)
    return out


def _examples(queries: tuple[str, ...]) -> str:
    shown = ", ".join(repr(q) for q in queries[:5])
    return shown + (f", ... ({len(queries)} in all)" if len(queries) > 5 else "")


def _warn_coverage(out: IRResult, judged: int, stacklevel: int, judged_at: bool) -> None:
    if out.missing_queries:
        # judged@k is 1 on an empty ranking: no unjudged doc in it (trec_eval's unj_k is 0).
        score = "score 0 (judged@k 1)" if judged_at else "score 0"
        warnings.warn(
            f"{len(out.missing_queries)} of {judged} judged queries have no results in the "
            f"run and {score} (they count in the mean): {_examples(out.missing_queries)}",
            CoverageWarning,
            stacklevel=stacklevel,
        )
    if out.unjudged_queries:
        warnings.warn(
            f"{counted(len(out.unjudged_queries), 'run query', 'run queries')} without "
            "judgments, ignored: "
            f"{_examples(out.unjudged_queries)}",
            CoverageWarning,
            stacklevel=stacklevel,
        )
