"""Conformance of judge.ir against trec_eval: pytrec_eval expectations and trec_eval 10.0 output."""

from __future__ import annotations

import functools
import json
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from judge.errors import CoverageWarning, InputFormatError, JudgeError, UnknownMetricError
from judge.ir import evaluate, read_qrels, read_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ir-conformance"
TREC_EVAL_DIR = FIXTURES / "trec_eval_test"
EXPECTED: dict[str, Any] = json.loads((FIXTURES / "expected_pytrec_eval.json").read_text())
DATASETS: dict[str, dict[str, Any]] = EXPECTED["datasets"]

TOL = 1e-9
TOL_4DP = 5e-5 + 1e-12

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]

_CUT_MEASURES = {
    "P": "P@{}",
    "recall": "recall@{}",
    "success": "hit_rate@{}",
    "map_cut": "map@{}",
    "ndcg_cut": "ndcg@{}",
}
_PLAIN_MEASURES = {
    "map": "map",
    "ndcg": "ndcg",
    "recip_rank": "mrr",
    "Rprec": "r_precision",
    "bpref": "bpref",
}
_CUT_RE = re.compile(r"^(P|recall|success|map_cut|ndcg_cut)_(\d+)$")
_UNJ_RE = re.compile(r"^unj_(\d+)$")  # judged@k is 1 - trec_eval's unj_k


def judge_name(trec_measure: str) -> str | None:
    """The judge metric equal to a trec_eval measure name (or, for unj_k, its complement
    judged@k), or None if judge has no equivalent."""
    if trec_measure in _PLAIN_MEASURES:
        return _PLAIN_MEASURES[trec_measure]
    unj = _UNJ_RE.match(trec_measure)
    if unj:
        return f"judged@{int(unj.group(1))}"
    m = _CUT_RE.match(trec_measure)
    return _CUT_MEASURES[m.group(1)].format(int(m.group(2))) if m else None


def judge_value(trec_measure: str, value: float) -> float:
    """What judge's metric for a trec_eval measure should be, from trec_eval's value."""
    return 1.0 - value if _UNJ_RE.match(trec_measure) else value


@functools.cache
def load_qrels(rel_path: str) -> Qrels:
    return read_qrels(FIXTURES / rel_path)


@functools.cache
def load_run(rel_path: str) -> Run:
    return read_run(FIXTURES / rel_path)


def quiet_evaluate(qrels: Qrels, run: Run, metrics: list[str], **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)
        return evaluate(qrels, run, metrics, **kwargs)


def truncate(run: Run, depth: int) -> Run:
    """trec_eval -M: keep the top `depth` docs per topic by (score desc, docid desc)."""
    return {
        qid: dict(sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:depth])
        for qid, docs in run.items()
    }


def _close(got: float, expected: float, tol: float) -> bool:
    return abs(got - expected) <= tol


# --------------------------------------------------------------------------------------------
# Expected values computed with pytrec_eval (expected_pytrec_eval.json)
# --------------------------------------------------------------------------------------------


def _dataset_measures(ds: dict[str, Any]) -> dict[str, str]:
    names = set(ds["mean"])
    for per_q in ds["per_query"].values():
        names |= set(per_q)
    mapping = {m: judge_name(m) for m in sorted(names)}
    unmapped = [m for m, j in mapping.items() if j is None]
    assert not unmapped, f"measures without a judge equivalent: {unmapped}"
    return {m: j for m, j in mapping.items() if j is not None}


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_per_query_matches_pytrec_eval(name: str) -> None:
    ds = DATASETS[name]
    measures = _dataset_measures(ds)
    qrels, run = load_qrels(ds["qrels"]), load_run(ds["run"])
    res = quiet_evaluate(
        qrels, run, list(measures.values()), relevance_level=ds["relevance_level"], per_query=True
    )

    assert set(res) == set(qrels), f"{name}: per-query ids differ from the judged query ids"
    problems: list[str] = []
    for qid, values in res.items():
        expected_q = ds["per_query"].get(qid)
        for trec_m, judge_m in measures.items():
            exp = expected_q[trec_m] if expected_q is not None else 0.0  # missing query -> 0
            got = values.get(judge_m)
            if got is None or not _close(got, exp, TOL):
                problems.append(
                    f"{name} q={qid} {judge_m} ({trec_m}): expected {exp!r}, got {got!r}"
                )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_mean_matches_pytrec_eval(name: str) -> None:
    ds = DATASETS[name]
    measures = _dataset_measures(ds)
    expected = ds.get("mean_complete", ds["mean"])  # missing topics count as 0 (trec_eval -c)
    qrels, run = load_qrels(ds["qrels"]), load_run(ds["run"])
    res = quiet_evaluate(qrels, run, list(measures.values()), relevance_level=ds["relevance_level"])

    assert set(res) == set(measures.values())
    problems = [
        f"{name} mean {judge_m} ({trec_m}): expected {expected[trec_m]!r}, got {res[judge_m]!r}"
        for trec_m, judge_m in measures.items()
        if not _close(res[judge_m], expected[trec_m], TOL)
    ]
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------------
# What the trec_eval 10.0 binary printed (trec_eval_test/out.*), 4 decimals
# --------------------------------------------------------------------------------------------

# out file -> (qrels, run, relevance level, -M depth); see trec_eval_test/README.md
OUT_FILES: dict[str, tuple[str, str, int, int | None]] = {
    "out.test": ("qrels.test", "results.test", 1, None),
    "out.test.a": ("qrels.test", "results.test", 1, None),
    "out.test.aq": ("qrels.test", "results.test", 1, None),
    "out.test.aqc": ("qrels.test", "results.trunc", 1, None),
    "out.test.aqcM": ("qrels.test", "results.trunc", 1, 100),
    "out.test.aql": ("qrels.rel_level", "results.test", 2, None),
    "out.test.meas_params": ("qrels.test", "results.test", 1, None),
    "out.comment.test": ("qrels.comment.test", "results.comment.test", 1, None),
}


def parse_trec_eval_output(path: Path) -> list[tuple[str, str, float]]:
    """(measure, qid or 'all', value) for every numeric line judge has a metric for."""
    rows = []
    for line in path.read_text().splitlines():
        measure, qid, value = (field.strip() for field in line.split("\t"))
        if judge_name(measure) is not None:
            rows.append((measure, qid, judge_value(measure, float(value))))
    return rows


@pytest.mark.parametrize("out_file", sorted(OUT_FILES))
def test_matches_trec_eval_binary_output(out_file: str) -> None:
    qrels_file, run_file, level, depth = OUT_FILES[out_file]
    rows = parse_trec_eval_output(TREC_EVAL_DIR / out_file)
    assert rows, f"{out_file}: no supported measure found"
    qrels = load_qrels(f"trec_eval_test/{qrels_file}")
    run = load_run(f"trec_eval_test/{run_file}")
    if depth is not None:
        run = truncate(run, depth)
    metrics = sorted({judge_name(m) for m, _, _ in rows if judge_name(m)})
    per_query = quiet_evaluate(qrels, run, metrics, relevance_level=level, per_query=True)
    mean = quiet_evaluate(qrels, run, metrics, relevance_level=level)

    problems: list[str] = []
    for measure, qid, expected in rows:
        metric = judge_name(measure)
        assert metric is not None
        got = mean.get(metric) if qid == "all" else per_query.get(qid, {}).get(metric)
        if got is None or not _close(got, expected, TOL_4DP):
            problems.append(
                f"{out_file} q={qid} {metric} ({measure}): "
                f"trec_eval printed {expected:.4f}, got {got!r}"
            )
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------------
# Readers, coverage and errors
# --------------------------------------------------------------------------------------------


def _count_lines(rel_path: str) -> int:
    return sum(1 for line in (FIXTURES / rel_path).read_text().splitlines() if line.strip())


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_readers_keep_every_line_and_types(name: str) -> None:
    ds = DATASETS[name]
    qrels, run = load_qrels(ds["qrels"]), load_run(ds["run"])
    assert sum(map(len, qrels.values())) == _count_lines(ds["qrels"])
    assert sum(map(len, run.values())) == _count_lines(ds["run"])
    assert len(qrels) == ds["topics_in_qrels"] and len(run) == ds["topics_in_run"]
    assert all(type(g) is int for docs in qrels.values() for g in docs.values())
    assert all(isinstance(s, float) for docs in run.values() for s in docs.values())


def test_read_run_ignores_rank_and_trailing_columns() -> None:
    run = load_run("trec_eval_test/results.trunc")
    # first line: "301 Q0 FBIS3-27619 99 2.138276 STANDARD more junk at"
    assert run["301"]["FBIS3-27619"] == pytest.approx(2.138276, abs=1e-12)
    assert set(run) == {"301", "303"}


def test_coverage_warning_for_missing_query() -> None:
    ds = DATASETS["trec_eval_test/qrels.test+results.trunc"]
    qrels, run = load_qrels(ds["qrels"]), load_run(ds["run"])
    with pytest.warns(CoverageWarning):
        res = evaluate(qrels, run, ["map", "P@5"])
    assert tuple(res.missing_queries) == ("302",)
    assert tuple(res.unjudged_queries) == ()
    with pytest.warns(CoverageWarning):
        per_q = evaluate(qrels, run, ["map", "P@5"], per_query=True)
    assert dict(per_q["302"]) == {"map": 0.0, "P@5": 0.0}
    assert tuple(per_q.missing_queries) == ("302",)


def test_coverage_warning_for_unjudged_queries() -> None:
    ds = DATASETS["trec_eval_test/qrels.comment.test+results.comment.test"]
    qrels, run = load_qrels(ds["qrels"]), load_run(ds["run"])
    with pytest.warns(CoverageWarning):
        res = evaluate(qrels, run, ["ndcg@10"])
    assert tuple(res.missing_queries) == ()
    assert set(res.unjudged_queries) == set(run) - set(qrels)
    assert len(res.unjudged_queries) == len(set(run) - set(qrels)) == 270


def test_no_coverage_warning_when_complete() -> None:
    qrels = load_qrels("trec_eval_test/qrels.test")
    run = load_run("trec_eval_test/results.test")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CoverageWarning)
        res = evaluate(qrels, run, ["map"])
    assert tuple(res.missing_queries) == () and tuple(res.unjudged_queries) == ()


@pytest.mark.parametrize("bad", ["bogus", "ndcg@", "P@x", "NDCG@10x"])
def test_unknown_metric_raises(bad: str) -> None:
    qrels = {"q": {"d": 1}}
    run = {"q": {"d": 1.0}}
    with pytest.raises(UnknownMetricError) as info:
        evaluate(qrels, run, ["map", bad])
    assert isinstance(info.value, JudgeError)
    assert "ndcg@k" in str(info.value)


def test_read_qrels_rejects_malformed_line(tmp_path: Path) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 1\nq1 0 d2\n")
    with pytest.raises(InputFormatError):
        read_qrels(path)


def test_read_run_rejects_non_numeric_score(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 d1 1 0.5 tag\nq1 Q0 d2 2 high tag\n")
    with pytest.raises(InputFormatError):
        read_run(path)


def test_results_are_mappings() -> None:
    qrels, run = {"q": {"d": 1}}, {"q": {"d": 1.0}}
    assert isinstance(evaluate(qrels, run, ["mrr"]), Mapping)
    assert evaluate(qrels, run, ["mrr"], per_query=True)["q"]["mrr"] == 1.0


# --------------------------------------------------------------------------------------------
# bpref and judged@k against trec_eval on random sets (trec_eval_judged/, printed to 17 digits)
# --------------------------------------------------------------------------------------------

JUDGED_DIR = FIXTURES / "trec_eval_judged"
JUDGED_SETS = sorted(
    (int(path.suffix[1:]), level) for path in JUDGED_DIR.glob("qrels.*") for level in (1, 2)
)


@pytest.mark.parametrize(("seed", "level"), JUDGED_SETS)
def test_bpref_and_judged_equal_trec_eval_to_the_last_bit(seed: int, level: int) -> None:
    rows = parse_trec_eval_output(JUDGED_DIR / f"out.{seed}.l{level}")
    metrics = sorted({name for m, _, _ in rows if (name := judge_name(m)) is not None})
    assert "bpref" in metrics and "judged@50" in metrics
    qrels, run = JUDGED_DIR / f"qrels.{seed}", JUDGED_DIR / f"run.{seed}"
    sources = {"dicts": (read_qrels(qrels), read_run(run)), "files": (qrels, run)}
    problems: list[str] = []
    for how, (judged, ranked) in sources.items():
        per_query = quiet_evaluate(judged, ranked, metrics, relevance_level=level, per_query=True)
        mean = quiet_evaluate(judged, ranked, metrics, relevance_level=level)
        for measure, qid, expected in rows:
            metric = judge_name(measure)
            assert metric is not None
            if qid == "all":  # judge's mean is correctly rounded; trec_eval adds in turn
                got, ok = mean[metric], _close(mean[metric], expected, 1e-15)
            else:
                got = per_query[qid][metric]
                ok = got == expected
            if not ok:
                problems.append(f"{how} q={qid} {metric} ({measure}): {expected!r} != {got!r}")
    assert not problems, "\n".join(problems)
