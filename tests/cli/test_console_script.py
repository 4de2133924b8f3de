"""The `judge` command, run as a user runs it (`tests.helpers.cli.run`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import run

ROOT = Path(__file__).resolve().parents[2]
TREC = ROOT / "fixtures" / "ir-conformance" / "trec_eval_test"
DEMO = ROOT / "examples"


def judge(*args: str) -> subprocess.CompletedProcess[str]:
    return run(*args)


def trec_eval_output(name: str) -> dict[tuple[str, str], str]:
    """(measure, query) -> value text, from an output file of the trec_eval binary."""
    rows = (line.split("\t") for line in (TREC / name).read_text().splitlines())
    return {(m.strip(), q): v for m, q, v in rows}


def test_text_output_matches_trec_eval_digit_for_digit():
    result = judge(
        "ir",
        TREC / "qrels.test",
        TREC / "results.trunc",
        "-q",
        "-m",
        "P@5,P@10,map",
        "-m",
        "ndcg@10",
        "-m",
        "r_precision",
    )
    assert result.returncode == 0, result.stderr
    expected = trec_eval_output("out.test.aqc")  # trec_eval -c -q qrels.test results.trunc
    names = {
        "P@5": "P_5",
        "P@10": "P_10",
        "map": "map",
        "ndcg@10": "ndcg_cut_10",
        "r_precision": "Rprec",
    }
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert len(rows) == 5 * 4  # 3 queries (302 is missing and scores 0) + "all"
    for name, query, value in rows:
        assert name.endswith(" " * (22 - len(name.strip())))  # padded like trec_eval
        assert value == expected[names[name.strip()], query], (name, query)
    # The missing topic is reported on stderr, never silently.
    assert "1 of 3 judged queries have no results in the run" in result.stderr


def test_relevance_level_flag_matches_trec_eval_l2():
    result = judge(
        "ir",
        TREC / "qrels.rel_level",
        TREC / "results.test",
        "-l",
        "2",
        "-q",
        "-m",
        "P@10,recall@10,map,mrr",
    )
    expected = trec_eval_output("out.test.aql")
    names = {"P@10": "P_10", "recall@10": "recall_10", "map": "map", "mrr": "recip_rank"}
    for name, query, value in (line.split("\t") for line in result.stdout.splitlines()):
        assert value == expected[names[name.strip()], query]


def test_json_output_has_means_per_query_and_coverage():
    result = judge(
        "ir",
        DEMO / "qrels.txt",
        DEMO / "run_rerank.txt",
        "-m",
        "mrr,ndcg@5",
        "-q",
        "--format",
        "json",
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc["metrics"]) == {"mrr", "ndcg@5"}
    assert doc["num_queries"] == 6 and doc["relevance_level"] == 1
    assert doc["unjudged_queries"] == ["q7"] and doc["missing_queries"] == []
    per_query = doc["per_query"]
    assert sorted(per_query) == [f"q{i}" for i in range(1, 7)]
    mean = sum(v["mrr"] for v in per_query.values()) / 6
    assert doc["metrics"]["mrr"] == pytest.approx(mean, abs=1e-15)
    assert per_query["q4"]["mrr"] == 1.0 and per_query["q6"]["mrr"] == 0.0  # q6: none relevant


def test_default_metrics_and_digits():
    result = judge("ir", DEMO / "qrels.txt", DEMO / "run_dense.txt", "--digits", "6")
    names = [line.split("\t")[0].strip() for line in result.stdout.splitlines()]
    assert names == [
        "P@5",
        "P@10",
        "recall@10",
        "hit_rate@10",
        "mrr",
        "map",
        "ndcg@10",
        "r_precision",
    ]
    assert all(len(line.split("\t")[2]) == 8 for line in result.stdout.splitlines())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "ndcg_cut_10"], "did you mean 'ndcg@10'?"),
        (["-m", "map", "--format", "json"], None),
    ],
)
def test_metric_errors_exit_2_with_a_message(args, message):
    result = judge("ir", DEMO / "qrels.txt", DEMO / "run_dense.txt", *args)
    if message is None:
        assert result.returncode == 0
    else:
        assert result.returncode == 2
        assert result.stdout == "" and message in result.stderr
        assert "Traceback" not in result.stderr


def test_bad_files_exit_2_naming_file_and_line(tmp_path):
    bad = tmp_path / "run.txt"
    bad.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2\n")
    result = judge("ir", DEMO / "qrels.txt", bad)
    assert result.returncode == 2
    assert f"{bad}:2: expected 'query_id Q0 doc_id rank score tag'" in result.stderr
    result = judge("ir", tmp_path / "none.txt", bad)
    assert result.returncode == 2 and "cannot open" in result.stderr


def test_help_lists_commands_and_metrics():
    top = judge("--help")
    assert top.returncode == 0 and "ir" in top.stdout
    sub = judge("ir", "--help")
    assert "ndcg_exp" in sub.stdout and "r_precision" in sub.stdout and "-c" in sub.stdout
