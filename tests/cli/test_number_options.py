"""Numeric options that once slipped through: `judge compare -k` and `judge ir --digits`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QRELS, DENSE, RERANK = (EXAMPLES / n for n in ("qrels.txt", "run_dense.txt", "run_rerank.txt"))


@pytest.mark.parametrize("k", ["0", "-1", "2.5", "five"])
def test_compare_refuses_a_top_k_that_is_no_positive_whole_number(k):
    # -k 0 became k=5 in silence (`args.top_k or 5`); -k -1 failed on "ndcg@-1".
    done = run("compare", "--qrels", QRELS, DENSE, RERANK, f"--top-k={k}")
    assert done.returncode == 2, done.stdout
    assert f"argument -k/--top-k: {k!r} is not a whole number of 1 or more" in done.stderr
    assert "ndcg@" not in done.stderr


def test_compare_top_k_is_5_only_when_not_given():
    default = run("compare", "--qrels", QRELS, DENSE, RERANK)
    assert default.returncode == 0, default.stderr
    assert "ndcg@5" in default.stdout and "fell out of the top 5" in default.stdout
    one = run("compare", "--qrels", QRELS, DENSE, RERANK, "-k", "1")
    assert one.returncode == 0, one.stderr
    assert "ndcg@1" in one.stdout and "fell out of the top 1:" in one.stdout


@pytest.mark.parametrize("digits", ["-1", "1075", "1.5"])
def test_ir_refuses_digits_out_of_range_as_a_usage_error(digits):
    # --digits=-1 ended in an internal error (exit 70): "Format specifier missing precision".
    done = run("ir", QRELS, RERANK, "-m", "mrr", f"--digits={digits}")
    assert done.returncode == 2, done.stderr
    assert f"argument --digits: {digits!r} is not a whole number from 0 to 1074" in done.stderr
    assert "internal error" not in done.stderr


def test_ir_digits_bounds_print_as_asked():
    none = run("ir", QRELS, RERANK, "-m", "mrr", "--digits", "0")
    assert none.returncode == 0, none.stderr
    assert none.stdout == "mrr                   \tall\t1\n"
    every = run("ir", QRELS, RERANK, "-m", "mrr", "--digits", "1074")
    assert every.returncode == 0, every.stderr
    value = every.stdout.split("\t")[-1].strip()
    assert len(value) == 2 + 1074 and value.startswith("0.8333333333333333")
