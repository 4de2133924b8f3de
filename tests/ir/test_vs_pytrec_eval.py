"""Property test: judge.ir.evaluate agrees with pytrec_eval (trec_eval's C code) on random data."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from judge.errors import CoverageWarning
from judge.ir import evaluate

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]

TOL = 1e-9
KS = (1, 3, 5, 10)
QIDS = ("q1", "q2", "q3", "q4", "q5", "q6")
# small pool so runs and qrels overlap; ids whose string order differs from "numeric" order
DOCS = ("d1", "d10", "d2", "d3", "D4", "e", "d20", "x9", "a0")
GRADES = (-1, 0, 1, 2, 3, 4)
SCORES = tuple(i * 0.25 for i in range(-8, 9))  # exact in float32: many exact ties

# judge metric -> trec_eval measure (None: checked against a reference in this file)
METRICS: dict[str, str | None] = {
    "map": "map",
    "ndcg": "ndcg",
    "mrr": "recip_rank",
    "r_precision": "Rprec",
}
for _k in KS:
    METRICS |= {
        f"P@{_k}": f"P_{_k}",
        f"recall@{_k}": f"recall_{_k}",
        f"hit_rate@{_k}": f"success_{_k}",
        f"map@{_k}": f"map_cut_{_k}",
        f"ndcg@{_k}": f"ndcg_cut_{_k}",
        f"mrr@{_k}": None,
        f"ndcg_exp@{_k}": None,
    }
_KS = ",".join(map(str, KS))
PYTREC_MEASURES = {
    f"P.{_KS}",
    f"recall.{_KS}",
    f"success.{_KS}",
    f"map_cut.{_KS}",
    f"ndcg_cut.{_KS}",
    "recip_rank",
    "map",
    "ndcg",
    "Rprec",
}


def ranked(docs: dict[str, float]) -> list[str]:
    """trec_eval order: score descending, ties by doc id descending."""
    return [d for d, _ in sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def truncate(run: Run, k: int) -> Run:
    return {qid: {d: docs[d] for d in ranked(docs)[:k]} for qid, docs in run.items()}


def ndcg_exp_ref(judged: dict[str, int], docs: dict[str, float], k: int) -> float:
    def dcg(grades: list[int]) -> float:
        return sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(grades) if g > 0)

    ideal = dcg(sorted(judged.values(), reverse=True)[:k])
    return dcg([judged.get(d, 0) for d in ranked(docs)[:k]]) / ideal if ideal > 0 else 0.0


@st.composite
def cases(draw: st.DrawFn) -> tuple[Qrels, Run, int]:
    qids = draw(st.lists(st.sampled_from(QIDS), min_size=1, max_size=len(QIDS), unique=True))
    judgments = st.dictionaries(
        st.sampled_from(DOCS), st.sampled_from(GRADES), min_size=1, max_size=len(DOCS)
    )
    results = st.dictionaries(
        st.sampled_from(DOCS), st.sampled_from(SCORES), min_size=1, max_size=len(DOCS)
    )
    qrels: Qrels = {}
    run: Run = {}
    for i, qid in enumerate(qids):
        roles = ["both", "both", "both", "judged_only", "empty_run"]
        role = draw(st.sampled_from(roles + (["run_only"] if i else [])))  # first one is judged
        if role != "run_only":
            qrels[qid] = draw(judgments)
        if role in ("both", "run_only"):
            run[qid] = draw(results)
        elif role == "empty_run":
            run[qid] = {}
    return qrels, run, draw(st.sampled_from((1, 2, 3)))


def pytrec_evaluate(
    qrels: Qrels, run: Run, measures: set[str], level: int
) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query values, with inputs its C code handles correctly.

    pytrec-eval-terrier 0.5.11 (trec_eval de6a29f, form_res_rels.c) keeps `num_rel_levels` from
    the previous topic when every grade of a topic is negative (max_rel < 0), then reads past
    `rel_levels`: nDCG loops for ages or returns garbage. Minimal repro, in one process:
    RelevanceEvaluator({"a": {"d1": 4, "d2": 3, "d3": 0}}, {"ndcg", "map"}).evaluate({"a":
    {"d1": 1.0}}) then RelevanceEvaluator({"b": {"x": -1}}, ...).evaluate({"b": {"y": 1.0}}) hangs.
    Grades -1 and 0 are equivalent for every measure compared here (non-relevant since level >= 1,
    gain 0), so pass max(grade, 0). Empty rankings (another trec_eval corner) are left out; a
    query pytrec_eval does not return is expected to score 0.
    """
    safe_qrels = {q: {d: max(g, 0) for d, g in docs.items()} for q, docs in qrels.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(safe_qrels, measures, relevance_level=level)
    return evaluator.evaluate({q: docs for q, docs in run.items() if docs})


def _evaluate(qrels: Qrels, run: Run, level: int, per_query: bool) -> tuple[Any, list[Any]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = evaluate(qrels, run, list(METRICS), relevance_level=level, per_query=per_query)
    return res, [w for w in caught if issubclass(w.category, CoverageWarning)]


@settings(max_examples=300, deadline=None)
@given(cases())
def test_agrees_with_pytrec_eval(case: tuple[Qrels, Run, int]) -> None:
    qrels, run, level = case
    ours_q, warned_q = _evaluate(qrels, run, level, per_query=True)
    ours_mean, warned_mean = _evaluate(qrels, run, level, per_query=False)

    # reference per-query values, for every judged query (0 where pytrec_eval omits it)
    pytrec_q = pytrec_evaluate(qrels, run, PYTREC_MEASURES, level)
    assert set(pytrec_q) <= set(qrels)
    pytrec_cut = {k: pytrec_evaluate(qrels, truncate(run, k), {"recip_rank"}, level) for k in KS}
    expected: dict[str, dict[str, float]] = {}
    for qid in qrels:
        row: dict[str, float] = {}
        for metric, measure in METRICS.items():
            if measure is not None:
                row[metric] = pytrec_q.get(qid, {}).get(measure, 0.0)
            elif metric.startswith("mrr@"):
                row[metric] = pytrec_cut[int(metric[4:])].get(qid, {}).get("recip_rank", 0.0)
            else:
                row[metric] = ndcg_exp_ref(qrels[qid], run.get(qid, {}), int(metric[9:]))
        expected[qid] = row

    assert set(ours_q) == set(qrels)
    problems = [
        f"q={qid} {metric}: expected {exp!r}, got {ours_q[qid].get(metric)!r}"
        for qid, row in expected.items()
        for metric, exp in row.items()
        if not abs(ours_q[qid].get(metric, math.nan) - exp) <= TOL
    ]
    assert set(ours_mean) == set(METRICS)
    for metric in METRICS:
        mean = sum(row[metric] for row in expected.values()) / len(qrels)
        if not abs(ours_mean[metric] - mean) <= TOL:
            problems.append(f"mean {metric}: expected {mean!r}, got {ours_mean[metric]!r}")
    assert not problems, f"level={level}\n" + "\n".join(problems)

    missing = {qid for qid in qrels if not run.get(qid)}
    unjudged = set(run) - set(qrels)
    for res, warned in ((ours_q, warned_q), (ours_mean, warned_mean)):
        assert set(res.missing_queries) == missing
        assert len(res.missing_queries) == len(missing)
        assert set(res.unjudged_queries) == unjudged
        assert bool(warned) == bool(missing or unjudged), f"CoverageWarning emitted: {warned}"


@settings(max_examples=300, deadline=None)
@given(cases())
def test_bpref_agrees_with_pytrec_eval_to_the_last_bit(case: tuple[Qrels, Run, int]) -> None:
    qrels, run, level = case
    # Grade -1 stays -1 here: bpref reads it as trec_eval does (in the pool, not judged:
    # neither relevant nor non-relevant). trec_eval cannot evaluate a topic whose grades are
    # all below 0 (pytrec_eval reads stale memory, see pytrec_evaluate), so such a topic
    # gets one doc graded 0.
    qrels = {q: docs if max(docs.values()) >= 0 else {**docs, "zz": 0} for q, docs in qrels.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"bpref"}, relevance_level=level)
    expected = evaluator.evaluate({q: docs for q, docs in run.items() if docs})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)
        ours = evaluate(qrels, run, ["bpref"], relevance_level=level, per_query=True)
    assert {q: v["bpref"] for q, v in ours.items()} == {
        q: expected.get(q, {}).get("bpref", 0.0) for q in qrels
    }
