"""A/B comparison: statistics against independent references, the rerank workflow, the CLI."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from judge import ir
from judge.comparison.evaluations import compare, compare_one, compare_scores
from judge.comparison.many import compare_many
from judge.comparison.plan import plan_questions
from judge.comparison.trec_runs import compare_ranked_columns, compare_runs, lost_from_top_k
from judge.errors import InputFormatError
from judge.run.diagnose import diagnose
from judge.stats import bootstrap_ci, holm, permutation_p_value
from tests.helpers.cli import run

ROOT = Path(__file__).resolve().parents[2]
TREC = ROOT / "fixtures" / "ir-conformance" / "trec_eval_test"


def brute_force_p(diff: list[float]) -> float:
    observed = abs(np.mean(diff))
    flips = list(itertools.product([1.0, -1.0], repeat=len(diff)))
    extreme = sum(abs(np.mean(np.array(s) * diff)) >= observed - 1e-12 for s in flips)
    return extreme / len(flips)


@pytest.mark.parametrize(
    "diff",
    [[0.1, 0.2, -0.05, 0.3, 0.0, 0.15], [1.0, 1.0, 1.0, 1.0], [0.5, -0.5], [0.3, -0.1, 0.2] * 3],
)
def test_exact_permutation_p_matches_brute_force(diff):
    assert permutation_p_value(np.array(diff)) == pytest.approx(brute_force_p(diff), abs=1e-15)


def test_bootstrap_matches_an_independent_numpy_reference():
    diff = np.array([0.1, 0.2, -0.05, 0.3, 0.0, 0.15])
    rng = np.random.default_rng(0)  # same seed and draws, computed the plain way
    means = diff[rng.integers(0, diff.size, size=(10_000, diff.size))].mean(axis=1)
    # Hesterberg's expanded percentile interval: z at alpha'/2 = sqrt(n / (n-1)) t(0.975, n-1)
    z = math.sqrt(6 / 5) * 2.5705818356363155  # t(0.975, 5), scipy.stats.t.ppf
    tail = 0.5 * math.erfc(z / math.sqrt(2))
    assert bootstrap_ci(diff) == pytest.approx(
        tuple(np.quantile(means, [tail, 1 - tail])), rel=1e-9
    )


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01, max(0.03, 2*0.03), max(0.06, 1*0.04)
    assert holm([0.04, 0.01, 0.03]) == pytest.approx([0.06, 0.03, 0.06])
    assert math.isnan(holm([0.2, math.nan])[1]) and holm([0.2, math.nan])[0] == 0.2


def test_positive_delta_that_is_not_significant():
    a = [0.50, 0.40, 0.70, 0.60, 0.55, 0.45]
    b = [0.60, 0.35, 0.80, 0.58, 0.70, 0.47]
    result = compare_one("mrr", a, b)
    assert result.delta > 0 and result.wins == 4 and result.losses == 2
    assert result.p_value == pytest.approx(brute_force_p(list(np.subtract(b, a))))
    assert result.p_value > 0.05


def test_positive_delta_that_is_significant():
    rng = np.random.default_rng(3)
    a = rng.random(60).tolist()
    b = [x + 0.05 + rng.normal(0, 0.02) for x in a]
    result = compare_one("ndcg@10", a, b)
    assert result.delta == pytest.approx(np.mean(np.subtract(b, a)))
    assert result.p_value < 0.001 and result.ci_low > 0  # Monte Carlo: (0 + 1) / 200001
    assert result.p_value == pytest.approx(1 / 200_001)


def test_nan_pairs_and_unmatched_samples_are_left_out_and_reported():
    a = {"s1": {"m": 0.5}, "s2": {"m": math.nan}, "s3": {"m": 0.2}, "only_a": {"m": 1.0}}
    b = {"s1": {"m": 0.7}, "s2": {"m": 0.9}, "s3": {"m": 0.1}, "only_b": {"m": 0.0}}
    result = compare_scores(a, b)
    assert result.metrics["m"].n == 2 and math.isnan(result.deltas["m"][1])
    assert result.unmatched_a == ["only_a"] and result.unmatched_b == ["only_b"]
    with pytest.raises(InputFormatError, match="share no sample"):
        compare_scores({"x": {"m": 1.0}}, {"y": {"m": 1.0}})


def reranked(run: dict, qrels: dict) -> dict:
    """A simulated reranker: relevant docs get a bonus, except in query 302 where the
    top relevant doc is pushed down (the failure seed 004 warns about)."""
    out = {}
    for query, docs in run.items():
        judged = qrels.get(query, {})
        out[query] = {d: s + (1.0 if judged.get(d, 0) > 0 else 0.0) for d, s in docs.items()}
    top = next(
        d
        for d in sorted(run["302"], key=lambda d: (run["302"][d], d), reverse=True)
        if qrels["302"].get(d, 0) > 0
    )
    out["302"][top] = -100.0
    return out


def test_rerank_workflow_on_trec_eval_data():
    qrels = ir.read_qrels(TREC / "qrels.test")
    first_stage = ir.read_run(TREC / "results.test")
    second = reranked(first_stage, qrels)
    comparison = compare_runs(qrels, first_stage, second, k=10)
    assert list(comparison.metrics) == ["mrr", "ndcg@10", "P@10", "recall@10", "hit_rate@10"]
    for name, result in comparison.metrics.items():
        expected_a = ir.evaluate(qrels, first_stage, [name])[name]
        expected_b = ir.evaluate(qrels, second, [name])[name]
        assert result.mean_a == pytest.approx(expected_a, abs=1e-12)
        assert result.mean_b == pytest.approx(expected_b, abs=1e-12)
        assert result.n == 3
    assert comparison.metrics["P@10"].delta > 0
    lost = comparison.extra["lost_from_top_k"]["queries"]
    assert [q["query"] for q in lost] == ["302"]
    assert lost == lost_from_top_k(qrels, first_stage, second, 10)
    (doc,) = lost[0]["docs"]
    assert lost[0]["rank_in_b"][doc] == len(second["302"])  # now ranked last


def write_results(path: Path, scores: list[float], ids: list[str] | None = None) -> Path:
    ids = ids or [f"s{i}" for i in range(len(scores))]
    rows = [
        {
            "row": i,
            "id": k,
            "question": f"q{k}",
            "scores": {"faithfulness": s},
            "reasons": {},
            "errors": {},
            "error": None,
        }
        for i, (k, s) in enumerate(zip(ids, scores, strict=True))
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_compare_results_files_by_id_or_question(tmp_path):
    a = write_results(tmp_path / "a.jsonl", [0.5, 0.6, 0.7])
    b = write_results(tmp_path / "b.jsonl", [0.6, 0.6, 0.9])
    result = compare(a, b)
    assert result.metrics["faithfulness"].delta == pytest.approx(0.1)
    renumbered = write_results(tmp_path / "c.jsonl", [0.6, 0.6, 0.9], ids=["x", "y", "z"])
    renumbered.write_text(
        renumbered.read_text()
        .replace('"qx"', '"qs0"')
        .replace('"qy"', '"qs1"')
        .replace('"qz"', '"qs2"')
    )
    assert compare(a, renumbered).metrics["faithfulness"].n == 3  # matched by question
    (tmp_path / "bad.jsonl").write_text('{"row": 0}\n')
    with pytest.raises(InputFormatError, match=r"bad\.jsonl:1: not a judge results row"):
        compare(a, tmp_path / "bad.jsonl")


def test_ids_that_name_several_rows_never_pair_in_silence(tmp_path):
    # Two samples with one id: a pairing by id kept one row of the id on each side, and
    # the comparison went on with a sample fewer (or pairs crossed) without a word.
    a = write_results(tmp_path / "a.jsonl", [0.1, 0.9, 0.5], ids=["s0", "s0", "s1"])
    b = write_results(tmp_path / "b.jsonl", [0.9, 0.1, 0.5], ids=["s0", "s0", "s1"])
    for path in (a, b):  # questions unique: pairs by question, every sample paired
        path.write_text(path.read_text().replace('"qs0"', '"first"', 1))
    result = compare(a, b)
    assert result.metrics["faithfulness"].n == 3
    assert result.metrics["faithfulness"].wins == 1 and result.metrics["faithfulness"].losses == 1
    for path in (a, b):  # questions repeat too: nothing pairs the two s0 rows
        path.write_text(path.read_text().replace('"first"', '"qs0"'))
    with pytest.raises(InputFormatError, match=r"a\.jsonl: ids 's0' name several judged rows"):
        compare(a, b)
    done = judge_cli("compare", str(a), str(b))
    assert done.returncode == 2 and "ids 's0' name several judged rows" in done.stderr
    with pytest.raises(InputFormatError, match="name several judged rows"):
        compare_many(a, [b, b])
    with pytest.raises(InputFormatError, match="name several judged rows"):
        plan_questions(a, b, metric="faithfulness", difference=0.1)


def judge_cli(*args) -> subprocess.CompletedProcess[str]:
    return run(*args)


def test_cli_json_keys_and_fail_on_regression(tmp_path):
    rng = np.random.default_rng(1)
    base = rng.random(40)
    a = write_results(tmp_path / "a.jsonl", base.tolist())
    worse = write_results(tmp_path / "worse.jsonl", (base - 0.1).tolist())
    noisy = write_results(tmp_path / "noisy.jsonl", (base + rng.normal(-0.01, 0.2, 40)).tolist())
    done = judge_cli("compare", a, worse, "--format", "json", "--out", tmp_path / "cmp")
    doc = json.loads(done.stdout)
    assert set(doc["metrics"]["faithfulness"]) >= {
        "mean_a",
        "mean_b",
        "delta",
        "ci_low",
        "ci_high",
        "p_value",
        "p_adjusted",
        "wins",
        "ties",
        "losses",
    }
    assert (tmp_path / "cmp" / "compare.html").read_text().count("<svg") == 1
    # The library's comparison is the CLI's, diagnosis included: the command only prints it.
    api = compare(a, worse).to_dict()
    assert api["diagnosis_b"] and json.loads(json.dumps(api)) == doc
    assert json.loads((tmp_path / "cmp" / "comparison.json").read_text()) == doc
    assert judge_cli("compare", a, worse, "--fail-on-regression").returncode == 1
    noisy_run = judge_cli("compare", a, noisy, "--fail-on-regression")
    assert noisy_run.returncode == 0, noisy_run.stdout  # a drop within noise is not a failure
    assert judge_cli("compare", a, tmp_path / "none.jsonl").returncode == 2


def test_cli_runs_with_qrels_prints_lost_queries():
    done = judge_cli(
        "compare",
        ROOT / "examples/run_dense.txt",
        ROOT / "examples/run_rerank.txt",
        "--qrels",
        ROOT / "examples/qrels.txt",
        "-k",
        "3",
    )
    assert done.returncode == 0, done.stderr
    assert "mrr" in done.stdout and "ndcg@3" in done.stdout
    assert "q4: api#31 (rank in B: {'api#31': 5})" in done.stdout


@pytest.mark.parametrize(
    ("means", "expected"),
    [
        (
            {"context_recall": 0.4, "faithfulness": 0.5},
            ["retrieval: context_recall", "generation: faithfulness is 0.50, partly"],
        ),
        (
            {"context_recall": 0.9, "faithfulness": 0.6},
            ["generation: faithfulness is 0.60 although"],
        ),
        (
            {"context_precision": 0.3, "answer_relevancy": 0.5},
            ["ranking: context_precision", "generation: answer_relevancy"],
        ),
        ({"recall@10": 0.8, "mrr": 0.3}, ["ranking: relevant chunks are retrieved"]),
        ({"recall@10": 0.3, "mrr": 0.3}, ["retrieval: recall@k is 0.30"]),
        ({"faithfulness": 0.95, "context_recall": 0.9, "context_precision": 0.9}, []),
    ],
)
def test_diagnosis_reads_retrieval_first(means, expected):
    findings = diagnose(means)
    assert len(findings) == len(expected)
    for finding, start in zip(findings, expected, strict=True):
        assert finding.startswith(start), finding


def test_lower_is_better_for_hallucination_rate():
    a = [0.0] * 30
    b = [1.0] * 20 + [0.0] * 10  # B hallucinates in 20 more answers
    result = compare_scores(
        {str(i): {"hallucination_rate": x} for i, x in enumerate(a)},
        {str(i): {"hallucination_rate": y} for i, y in enumerate(b)},
    )
    rate = result.metrics["hallucination_rate"]
    assert rate.delta > 0 and not rate.higher_is_better and rate.worse
    assert (rate.wins, rate.ties, rate.losses) == (0, 10, 20)
    assert result.regressions() == [rate]


def test_two_ranked_columns_of_a_dataset(tmp_path):
    rows = [
        {
            "id": "q1",
            "question": "a",
            "first_stage": ["d3", "d1", "d2"],
            "reranked": ["d1", "d3"],
            "relevance": {"d1": 2},
        },
        {
            "id": "q2",
            "question": "b",
            "first_stage": ["d5", "d4"],
            "reranked": ["d6", "d7", "d5"],
            "relevance": ["d5"],
        },
    ]
    comparison = compare_columns_via_cli(tmp_path, rows)
    mrr = comparison["metrics"]["mrr"]
    assert (mrr["mean_a"], mrr["mean_b"]) == (0.75, (1.0 + 1 / 3) / 2)
    assert comparison["lost_from_top_k"]["queries"] == [
        {"query": "q2", "docs": ["d5"], "rank_in_b": {"d5": 3}}
    ]


def test_ranked_columns_refuse_two_rows_of_one_id(tmp_path):
    # Each row is a query of both rankings: a second row of an id replaced the first, and
    # the comparison went on with a query fewer ("Unmatched: 0").
    rows = [
        {"id": "q1", "question": "a", "relevance": ["d1"], "first": ["d1", "d2"], "second": ["d2"]},
        {"id": "q1", "question": "b", "relevance": ["d5"], "first": ["d5", "d2"], "second": ["d2"]},
        {"question": "c", "relevance": ["d3"], "first": ["d3"], "second": ["d3"]},
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = judge_cli("compare", data, "--columns", "first,second")
    assert done.returncode == 2 and "rows 0 and 1 have the same id 'q1'" in done.stderr
    rows[1]["id"] = "2"  # the third row has no id: its number, 2, names it
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputFormatError, match="rows 1 and 2 have the same id '2'"):
        compare_ranked_columns(data, "first", "second")
    rows[1]["id"] = "q2"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert compare_ranked_columns(data, "first", "second").metrics["mrr"].n == 3


@pytest.mark.parametrize("relevance", [None, {}, [], ""])
def test_ranked_columns_leave_out_rows_without_judgments_as_judge_eval_does(tmp_path, relevance):
    # Such a row scored 0 on both sides and counted as a tied pair (n 3, means 0.5), where
    # judge eval leaves it out (NaN, no_relevance_judgments).
    d1 = ["d1"]
    rows = [
        {"id": "a", "question": "q", "first": ["d1", "d2"], "rr": ["d2", "d1"], "relevance": d1},
        {"id": "b", "question": "q", "first": ["d1"], "rr": ["d2"], "relevance": relevance},
        {"id": "c", "question": "q", "first": ["d3", "d1"], "rr": ["d1", "d3"], "relevance": d1},
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    comparison = compare_ranked_columns(data, "first", "rr")
    mrr = comparison.metrics["mrr"]
    assert (mrr.n, mrr.mean_a, mrr.mean_b, mrr.ties) == (2, 0.75, 0.75, 0)
    assert comparison.extra["left_out"] == {"no_relevance_judgments": ["b"]}
    done = judge_cli("compare", data, "--columns", "first,rr")
    assert done.returncode == 0, done.stderr
    assert "2 paired samples" in done.stdout
    assert "1 row left out, without relevance judgments: 'b'" in done.stdout
    done = judge_cli("compare", data, "--columns", "first,rr", "--format", "json")
    assert json.loads(done.stdout)["left_out"] == {"no_relevance_judgments": ["b"]}
    done = judge_cli("compare", data, "--columns", "first,rr", "--out", tmp_path / "out")
    html = (tmp_path / "out" / "compare.html").read_text()
    assert "1 row left out, without relevance judgments: &#x27;b&#x27;." in html


def test_ranked_columns_of_a_csv_leave_out_a_blank_relevance_cell(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text(
        "id,question,first,rr,relevance\n"
        'a,q,"[""d1"",""d2""]","[""d2"",""d1""]","[""d1""]"\n'
        'b,q,"[""d1""]","[""d2""]",\n'
    )
    comparison = compare_ranked_columns(data, "first", "rr")
    assert comparison.keys == ["a"] and comparison.metrics["mrr"].mean_a == 1.0
    assert comparison.extra["left_out"] == {"no_relevance_judgments": ["b"]}


def test_ranked_columns_of_a_csv_refuse_a_cell_that_is_no_json_list(tmp_path):
    # A Python-style list cell ended in an internal error (a json.JSONDecodeError, exit 70).
    data = tmp_path / "data.csv"
    data.write_text(
        'id,question,first,rr,relevance\na,q,"[""d1"",""d2""]","[\'d2\',\'d1\']","[""d1""]"\n'
    )
    done = judge_cli("compare", data, "--columns", "first,rr")
    assert done.returncode == 2, done.stderr
    assert "row 0: rr must be a list of doc ids in rank order (a JSON list in CSV), got " in (
        done.stderr
    )
    assert "internal error" not in done.stderr


def test_ranked_columns_refuse_rows_of_which_none_is_judged(tmp_path):
    data = tmp_path / "data.jsonl"
    row = {"question": "q", "first": ["d1"], "rr": ["d2"], "relevance": None}
    data.write_text(json.dumps(row) + "\n")
    with pytest.raises(InputFormatError, match="no row has relevance judgments"):
        compare_ranked_columns(data, "first", "rr")


def test_ranked_columns_name_a_row_of_a_null_id_by_its_number(tmp_path):
    # "rows 0 and 1 have the same id 'None' (a row without an id is named by its number)"
    rows = [
        {"id": None, "question": "a", "relevance": ["d1"], "first": ["d1", "d2"], "rr": ["d2"]},
        {"id": None, "question": "b", "relevance": ["d2"], "first": ["d1", "d2"], "rr": ["d2"]},
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    comparison = compare_ranked_columns(data, "first", "rr")
    assert comparison.keys == ["0", "1"]
    assert comparison.metrics["mrr"].mean_a == 0.75  # (1 + 1/2) / 2
    rows[1]["id"] = "0"  # the first row, of a null id, is named 0
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = judge_cli("compare", data, "--columns", "first,rr")
    assert done.returncode == 2 and "rows 0 and 1 have the same id '0'" in done.stderr


def compare_columns_via_cli(tmp_path: Path, rows: list[dict]) -> dict:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = judge_cli(
        "compare", data, "--columns", "first_stage,reranked", "-k", "1", "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    assert judge_cli("compare", data, "--columns", "first_stage").returncode == 2
    return json.loads(done.stdout)


def pooled_case(unjudged_top: int) -> tuple[ir.Qrels, ir.Run, ir.Run]:
    """20 queries judged on A's pool (r relevant, n0..n8 not): A ranks two judged
    non-relevant docs above r; B, a new retriever, ranks `unjudged_top` docs nobody judged
    first, then r, then the rest."""
    qrels: dict[str, dict[str, int]] = {}
    run_a: dict[str, dict[str, float]] = {}
    run_b: dict[str, dict[str, float]] = {}
    for q in (f"q{i}" for i in range(20)):
        qrels[q] = {"r": 1, **{f"n{j}": 0 for j in range(9)}}
        order_a = ["n0", "n1", "r", *(f"n{j}" for j in range(2, 9))]
        order_b = [*(f"u{j}" for j in range(unjudged_top)), "r", *(f"n{j}" for j in range(9))]
        run_a[q] = {d: 100.0 - i for i, d in enumerate(order_a)}
        run_b[q] = {d: 100.0 - i for i, d in enumerate(order_b)}
    return qrels, run_a, run_b


def test_a_loss_of_the_less_judged_run_is_flagged():
    """Unjudged docs count as non-relevant: they can only lower the run holding them, so
    a loss of the less judged run may lie in them (the pool bias against a new retriever,
    Buckley & Voorhees 2004). A first version flagged the less judged run's wins instead,
    which unjudged docs cannot have made."""
    qrels, run_a, run_b = pooled_case(unjudged_top=4)
    comparison = compare_runs(qrels, run_a, run_b, k=10)
    found = comparison.extra["unjudged_losses"]
    # B loses on mrr and ndcg@10 (r at 5 against 3); P@10, recall@10, hit_rate@10 tie.
    assert [f["metric"] for f in found] == ["mrr", "ndcg@10"]
    for f in found:
        assert f["loser"] == "b" and f["k"] == 10 and f["judged_a"] == 1.0
        assert f["judged_b"] == pytest.approx(0.6)  # 4 of B's top 10 have no judgment
        assert f["new_unjudged"] == 1.0  # every doc B brings in is unjudged
        assert f["delta"] == comparison.metrics[f["metric"]].delta < 0
    assert comparison.to_dict()["unjudged_losses"] == found
    # bpref leaves the unjudged docs out: no warning for it (nor for judged@10 itself).
    names = ["bpref", "judged@10", "mrr"]
    only = compare_runs(qrels, run_a, run_b, names, k=10).extra["unjudged_losses"]
    assert [f["metric"] for f in only] == ["mrr"]
    # The same with the runs swapped: the less judged run, now A, still loses.
    swapped = compare_runs(qrels, run_b, run_a, k=10).extra["unjudged_losses"]
    assert [(f["metric"], f["loser"]) for f in swapped] == [("mrr", "a"), ("ndcg@10", "a")]


def test_no_flag_when_the_loser_is_as_judged_the_gap_small_or_the_less_judged_run_wins():
    qrels, run_a, run_b = pooled_case(unjudged_top=0)  # B wins, all judged
    assert compare_runs(qrels, run_a, run_b, k=10).extra["unjudged_losses"] == []
    qrels, run_a, run_b = pooled_case(unjudged_top=1)  # B wins, r at 2: judged@10 0.9
    assert compare_runs(qrels, run_a, run_b, k=10).extra["unjudged_losses"] == []
    qrels, run_a, run_b = pooled_case(unjudged_top=4)
    assert compare_runs(qrels, run_a, run_b, k=10, judged_gap=0.5).extra["unjudged_losses"] == []
    # B ranks r first, then unjudged docs: it wins despite them; the win stands.
    for docs in run_b.values():
        docs["r"] = 1000.0
    assert compare_runs(qrels, run_a, run_b, k=10).extra["unjudged_losses"] == []


def test_cli_warns_when_the_loss_may_lie_in_unjudged_docs(tmp_path, capsys):
    from judge.cli.main import main

    qrels, run_a, run_b = pooled_case(unjudged_top=4)
    (tmp_path / "qrels").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    for name, ranking in (("a", run_a), ("b", run_b)):
        (tmp_path / name).write_text(
            "".join(f"{q} Q0 {d} 0 {s} t\n" for q, docs in ranking.items() for d, s in docs.items())
        )
    files = [str(tmp_path / "a"), str(tmp_path / "b"), "--qrels", str(tmp_path / "qrels")]
    assert main(["compare", *files, "-k", "10"]) == 0
    err = capsys.readouterr().err
    assert "judge: warning:" in err and "loses to" in err and "on mrr (B - A -0.1333)" in err
    assert "judged@10 0.600 against 1.000" in err
    assert "100% of the docs it ranks there that" in err
    assert main(["compare", *files, "-k", "10", "-m", "P@10,bpref"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_an_error_row_does_not_stop_a_pairing_by_unique_questions(tmp_path):
    # Ids repeat and questions are unique: the runs pair by question. An error row (a
    # timeout) is no judged sample, yet it made the questions count as not unique, and
    # the comparison was refused.
    a = write_results(tmp_path / "a.jsonl", [0.1, 0.9, 0.5, 0.4], ids=["s0", "s0", "s1", "s2"])
    b = write_results(tmp_path / "b.jsonl", [0.9, 0.1, 0.5, 0.4], ids=["s0", "s0", "s1", "s2"])
    for path in (a, b):
        path.write_text(path.read_text().replace('"qs0"', '"first"', 1))
    lines = a.read_text().splitlines()
    error_row = {**json.loads(lines[3]), "scores": {}, "error": "timed out"}
    a.write_text("\n".join([*lines[:3], json.dumps(error_row)]) + "\n")
    result = compare(a, b)
    assert result.metrics["faithfulness"].n == 3  # the error row's sample is not paired
    assert result.metrics["faithfulness"].wins == 1 and result.metrics["faithfulness"].losses == 1


def test_a_query_judged_empty_is_left_out_of_the_unjudged_share_as_of_the_pairs():
    """A query judged `{}` is no judged query (as in judge.ir and trec_eval): it is left
    out of the paired values, and was still counted in the share of new unjudged docs
    (every doc the loser ranked for it counting as new and unjudged)."""
    qrels, run_a, run_b = pooled_case(unjudged_top=4)
    for q in qrels:  # B also brings in one judged doc, n9, that A ranks 11th
        qrels[q]["n9"] = 0
        run_a[q]["n9"] = 0.0
        run_b[q]["n9"] = 95.5  # just below r, at rank 6
    expected = compare_runs(qrels, run_a, run_b, k=10)
    share = [f["new_unjudged"] for f in expected.extra["unjudged_losses"]]
    assert share == [0.8, 0.8]  # of B's 5 new docs per query, 4 are unjudged
    qrels["qx"] = {}
    run_a["qx"] = {"x": 1.0}
    run_b["qx"] = {f"y{j}": 10.0 - j for j in range(10)}
    comparison = compare_runs(qrels, run_a, run_b, k=10)
    assert comparison.metrics["mrr"].n == 20 and "qx" not in comparison.keys
    found = comparison.extra["unjudged_losses"]
    assert found == expected.extra["unjudged_losses"]
    assert comparison.extra["lost_from_top_k"] == expected.extra["lost_from_top_k"]
    for side in ("a", "b"):  # its run results are reported as of an unjudged query
        assert comparison.extra["coverage"][side]["unjudged_queries"] == ["qx"]


def test_ranked_columns_of_a_dataframe_read_from_parquet(tmp_path):
    # pandas reads Parquet list columns as numpy arrays, which `judge eval` reads as lists:
    # here "value or []" asked an array its truth ("row 0: relevance: The truth value of an
    # array with more than one element is ambiguous"), and of a ranked column raised that
    # ValueError itself.
    import pandas as pd

    rows = [
        {
            "id": "a",
            "question": "x",
            "relevance": ["d1", "d2"],
            "first": ["d3", "d1"],
            "rr": ["d1"],
        },
        {
            "id": "b",
            "question": "y",
            "relevance": ["d2"],
            "first": ["d1", "d2"],
            "rr": ["d2", "d1"],
        },
        {"id": "c", "question": "z", "relevance": ["d4"], "first": None, "rr": ["d4"]},
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "rows.parquet")
    frame = pd.read_parquet(tmp_path / "rows.parquet")
    assert isinstance(frame["relevance"][0], np.ndarray)
    from_frame = compare_ranked_columns(frame, "first", "rr")
    from_dicts = compare_ranked_columns(rows, "first", "rr")
    assert from_frame.to_dict() == from_dicts.to_dict()
    assert (from_frame.metrics["mrr"].mean_a, from_frame.metrics["mrr"].mean_b) == (1 / 3, 1.0)
