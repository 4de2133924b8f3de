"""Comparing two TREC runs on the same qrels: did the reranker (or new retriever) help?"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from judge import ir
from judge.comparison.evaluations import Comparison, Scores, compare_scores
from judge.errors import InputFormatError
from judge.fields import cell_list
from judge.formatting import counted
from judge.ir.from_dicts import judged_only
from judge.ir.measure_names import JUDGED_FAMILIES, parse_measure
from judge.ir.ranking import Qrels, Run
from judge.run.data import parse_relevance, read_records, resolve_columns


def rerank_metrics(k: int) -> list[str]:
    """The metrics a reranker is judged by at cutoff k: mrr, ndcg@k, P@k, recall@k, hit_rate@k."""
    return ["mrr", f"ndcg@{k}", f"P@{k}", f"recall@{k}", f"hit_rate@{k}"]


def top_k(docs: Mapping[str, float], k: int) -> list[str]:
    """The first k docs in trec_eval's order: score descending, ties by doc id descending."""
    return sorted(docs, key=lambda d: (docs[d], d), reverse=True)[:k]


def lost_from_top_k(
    qrels: Qrels, run_a: Run, run_b: Run, k: int, relevance_level: int = 1
) -> list[dict[str, object]]:
    """Queries where a relevant doc in A's top k is no longer in B's top k: a reranker can
    lower recall@k while it raises mrr."""
    lost: list[dict[str, object]] = []
    for query in sorted(qrels):
        relevant = {d for d, g in qrels[query].items() if g >= relevance_level}
        before = [d for d in top_k(run_a.get(query, {}), k) if d in relevant]
        after = set(top_k(run_b.get(query, {}), k))
        dropped = [d for d in before if d not in after]
        if dropped:
            lost.append(
                {
                    "query": query,
                    "docs": dropped,
                    "rank_in_b": {d: _rank(run_b.get(query, {}), d) for d in dropped},
                }
            )
    return lost


# The losing run's judged@k this far below the winner's (5 points: one more unjudged doc in
# the top 10 of every other query) puts its loss in doubt: unjudged docs count as
# non-relevant, so they can only lower the run that holds them.
JUDGED_GAP = 0.05

# The cutoff of the judged@k check for a metric without one (map, mrr, r_precision).
_DEFAULT_JUDGED_CUTOFF = 10


def unjudged_losses(
    comparison: Comparison,
    qrels: Qrels,
    run_a: Run,
    run_b: Run,
    *,
    k: int | None = None,
    gap: float = JUDGED_GAP,
) -> list[dict[str, Any]]:
    """The metrics a run loses while its top documents are less judged than the winner's.

    Every metric but bpref and judged@k reads an unjudged doc as non-relevant, so unjudged
    docs can only lower the score of the run that holds them: a win despite them stands,
    but a loss may lie in them (the pool bias against a run the judgments were not pooled
    from: Buckley & Voorhees 2004). For each metric the runs differ on, judged@c of both,
    c the metric's cutoff (`k`, else 10, for a metric without one); listed when the
    loser's is below the winner's by more than `gap`, with the share of the docs the
    loser brings into its top c (absent from the winner's) that are not judged.

    Args:
        comparison: the comparison of the two runs.
        qrels: the judgments.
        run_a: the baseline run.
        run_b: the candidate run.
        k: the cutoff for metrics without one (default 10).
        gap: how far below the winner's the loser's judged@c must be.
    """
    cutoffs: dict[str, int] = {}
    for name, result in comparison.metrics.items():
        measure = parse_measure(name)
        if measure.family in JUDGED_FAMILIES or not (result.delta > 0 or result.delta < 0):
            continue
        cutoffs[name] = measure.k or k or _DEFAULT_JUDGED_CUTOFF
    if not cutoffs:
        return []
    names = [f"judged@{c}" for c in sorted(set(cutoffs.values()))]
    judged_a = _means(ir.score_queries(qrels, run_a, names).values)
    judged_b = _means(ir.score_queries(qrels, run_b, names).values)
    found = []
    for name, cutoff in cutoffs.items():
        a, b = judged_a[f"judged@{cutoff}"], judged_b[f"judged@{cutoff}"]
        b_lost = comparison.metrics[name].delta < 0
        loser, winner = (b, a) if b_lost else (a, b)
        if loser < winner - gap:
            runs = (run_b, run_a) if b_lost else (run_a, run_b)
            found.append(
                {
                    "metric": name,
                    "delta": comparison.metrics[name].delta,
                    "loser": "b" if b_lost else "a",
                    "k": cutoff,
                    "judged_a": a,
                    "judged_b": b,
                    "new_unjudged": _new_unjudged(qrels, *runs, cutoff),
                }
            )
    return found


def _means(values: Mapping[str, Any]) -> dict[str, float]:
    return {name: math.fsum(array.tolist()) / len(array) for name, array in values.items()}


def _new_unjudged(qrels: Qrels, loser: Run, winner: Run, k: int) -> float | None:
    """Of the docs in the loser's top k and not in the winner's (over the judged queries:
    `qrels` without queries judged `{}`), the share that has no judgment (grade below 0, or
    none); None when there is none."""
    new = unjudged = 0
    # A query judged `{}` is left out of judged@k and of the pairs: of this share too.
    for query, judged in judged_only(qrels).items():
        before = set(top_k(winner.get(query, {}), k))
        for doc in top_k(loser.get(query, {}), k):
            if doc not in before:
                new += 1
                unjudged += judged.get(doc, -1) < 0
    return unjudged / new if new else None


def left_out_note(rows: Sequence[str]) -> str:
    """The rows `compare_ranked_columns` left out for want of judgments, as a sentence."""
    shown = ", ".join(repr(row) for row in rows[:5])
    more = f", ... ({len(rows)} in all)" if len(rows) > 5 else ""
    return f"{counted(len(rows), 'row')} left out, without relevance judgments: {shown}{more}"


def unjudged_loss_warning(found: Mapping[str, Any], label_a: str, label_b: str) -> str:
    """One `unjudged_losses` entry as a sentence for the terminal."""
    k = found["k"]
    b_lost = found["loser"] == "b"
    loser, winner = (label_b, label_a) if b_lost else (label_a, label_b)
    judged_loser, judged_winner = (
        (found["judged_b"], found["judged_a"]) if b_lost else (found["judged_a"], found["judged_b"])
    )
    share = found["new_unjudged"]
    new = "" if share is None else f"; {share:.0%} of the docs it ranks there that {winner} "
    new += "" if share is None else "does not are not judged"
    return (
        f"{loser} loses to {winner} on {found['metric']} (B - A {found['delta']:+.4f}), but "
        f"its top {k} is less judged: judged@{k} {judged_loser:.3f} against "
        f"{judged_winner:.3f}{new}. Unjudged docs count as non-relevant, so the loss may lie "
        "in them (judgments pooled from the other run): judge those docs, or compare on "
        "bpref, which leaves them out."
    )


def _rank(docs: Mapping[str, float], doc: str) -> int | None:
    if doc not in docs:
        return None
    return 1 + sum(1 for d, s in docs.items() if (s, d) > (docs[doc], doc))


def compare_runs(
    qrels: Qrels,
    run_a: Run,
    run_b: Run,
    metrics: Sequence[str] | None = None,
    *,
    relevance_level: int = 1,
    k: int | None = None,
    label_a: str = "A",
    label_b: str = "B",
    judged_gap: float = JUDGED_GAP,
) -> Comparison:
    """Compare two runs query by query with paired tests over every judged query.

    A metric a run loses while its judged@k is more than `judged_gap` below the winner's is
    listed in `extra["unjudged_losses"]` (`unjudged_losses`): the loss may lie in its
    unjudged docs.

    Args:
        qrels: judgments, `{query_id: {doc_id: grade}}`.
        run_a: the baseline run (e.g. first-stage retrieval).
        run_b: the candidate run (e.g. the same candidates reranked).
        metrics: retrieval metric names; default `rerank_metrics(k)` (k = 5 if None).
        relevance_level: smallest grade that counts as relevant.
        k: report the queries whose relevant docs fell out of the top k; also the cutoff
            of the judged@k check for metrics without one (10 if None).
        label_a: name of A in reports.
        label_b: name of B in reports.
        judged_gap: how far below the winner's the loser's judged@k must be for a loss to
            be listed.
    """
    names = list(metrics) if metrics else rerank_metrics(k or 5)
    scored_a = ir.score_queries(qrels, run_a, names, relevance_level=relevance_level)
    scored_b = ir.score_queries(qrels, run_b, names, relevance_level=relevance_level)
    a: Scores = {
        q: {m: float(v[i]) for m, v in scored_a.values.items()} for i, q in enumerate(scored_a.qids)
    }
    b: Scores = {
        q: {m: float(v[i]) for m, v in scored_b.values.items()} for i, q in enumerate(scored_b.qids)
    }
    comparison = compare_scores(a, b, names, label_a=label_a, label_b=label_b)
    comparison.extra["coverage"] = {
        "a": {
            "missing_queries": list(scored_a.missing_queries),
            "unjudged_queries": list(scored_a.unjudged_queries),
        },
        "b": {
            "missing_queries": list(scored_b.missing_queries),
            "unjudged_queries": list(scored_b.unjudged_queries),
        },
    }
    comparison.extra["unjudged_losses"] = unjudged_losses(
        comparison, qrels, run_a, run_b, k=k, gap=judged_gap
    )
    if k is not None:
        comparison.extra["lost_from_top_k"] = {
            "k": k,
            "queries": lost_from_top_k(qrels, run_a, run_b, k, relevance_level),
        }
    return comparison


def _null_as_no_docs(ids: Any) -> Any:
    """A ranked column's cell, a null cell as no docs."""
    return [] if ids is None else ids


def _ranked_run(ids: Any, column: str, row: int) -> dict[str, float]:
    try:
        ids = cell_list(ids)  # CSV cells hold lists as JSON text
    except ValueError:
        raise InputFormatError(
            f"row {row}: {column} must be a list of doc ids in rank order (a JSON list in "
            f"CSV), got {ids!r:.80}"
        ) from None
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if not isinstance(ids, list) or not all(isinstance(d, str) for d in ids):
        raise InputFormatError(f"row {row}: {column} must be a list of doc ids in rank order")
    ranked = list(dict.fromkeys(ids))
    return {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}


def compare_ranked_columns(
    data: Any,
    a: str,
    b: str,
    metrics: Sequence[str] | None = None,
    *,
    relevance_level: int = 1,
    k: int | None = None,
    column_map: Mapping[str, str] | None = None,
) -> Comparison:
    """Compare two ranked id columns of a dataset (e.g. first-stage and reranked ids).

    A row without relevance judgments (null, empty or blank) is left out, as `judge eval`
    leaves it out (NaN, `no_relevance_judgments`), and listed in
    `extra["left_out"]["no_relevance_judgments"]`; a row whose id is null is named by its
    number, as a row without an id.

    Args:
        data: anything `judge.evaluate` reads; it needs a relevance column (relevant ids,
            or `{doc_id: grade}`) besides the two ranked columns.
        a: the baseline column of doc ids in rank order.
        b: the candidate column.
        metrics: retrieval metric names; default `rerank_metrics(k)` (k = 5 if None).
        relevance_level: smallest grade that counts as relevant.
        k: report the rows whose relevant docs fell out of the top k.
        column_map: `{field: column}` as for `judge.evaluate` (id, relevance).
    """
    records, _ = read_records(data)
    columns = resolve_columns(dict.fromkeys(c for r in records for c in r), column_map)
    if "relevance" not in columns:
        raise InputFormatError("comparing ranked columns needs a relevance column")
    for name in (a, b):
        if not any(name in r for r in records):
            raise InputFormatError(f"no column {name!r} in the data")
    qrels, run_a, run_b = {}, {}, {}
    unjudged: list[str] = []
    first_row: dict[str, int] = {}
    for number, record in enumerate(records):
        named = record.get(columns["id"]) if "id" in columns else None
        query = str(number if named is None else named)  # a null id is none, as judge eval reads it
        if first_row.setdefault(query, number) != number:
            # Each row is one query of both rankings: a second would replace the first.
            raise InputFormatError(
                f"rows {first_row[query]} and {number} have the same id {query!r} (a row "
                "without an id is named by its number): each row is one query of the two "
                "rankings; give each row its own id"
            )
        # (`is None`, not `or`: a cell of a DataFrame read from Parquet is a numpy array,
        # which has no truth value)
        relevance = record.get(columns["relevance"])
        try:
            judged = parse_relevance({} if relevance is None else relevance)
        except (ValueError, TypeError) as exc:
            raise InputFormatError(f"row {number}: relevance: {exc}") from None
        ranked_a = _ranked_run(_null_as_no_docs(record.get(a)), a, number)
        ranked_b = _ranked_run(_null_as_no_docs(record.get(b)), b, number)
        if not judged:
            # Left out, as judge eval leaves it out (NaN, no_relevance_judgments): scored 0
            # on both sides, it would pull both means toward 0 and count as a tie.
            unjudged.append(query)
            continue
        qrels[query], run_a[query], run_b[query] = judged, ranked_a, ranked_b
    if not qrels:
        raise InputFormatError(
            f"no row has relevance judgments (column {columns['relevance']!r}): nothing to "
            "compare the two rankings against; give the rows relevant ids or {doc_id: grade}"
        )
    comparison = compare_runs(
        qrels, run_a, run_b, metrics, relevance_level=relevance_level, k=k, label_a=a, label_b=b
    )
    comparison.extra["left_out"] = {"no_relevance_judgments": unjudged}  # judge eval's reason
    return comparison
