"""More attacks on `judge eval --labels`, `judge merge --labels` and compare.html's corrected
difference (issue 42): what a careless or hostile user gives them."""

from __future__ import annotations

import pytest

from judge.testing import heuristic_judge
from tests.helpers.cli import run
from tests.helpers.corrected_runs import SAMPLE, data_file, eval_command, write_jsonl


@pytest.mark.parametrize(
    "extra", [(), ("--processes", "2"), ("--dry-run",)], ids=["one process", "processes", "dry"]
)
def test_one_labelled_row_of_the_input_is_refused_before_any_request(
    tmp_path, fake_llm_server, extra
):
    """One label of a row of the input (the others of no row) passed the check before the
    run, and the run, judged whole, then failed at its end for want of a second labelled
    row (exit 2, no results.jsonl)."""
    fake_llm_server.chat = heuristic_judge
    data = data_file(tmp_path)
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": ident, "faithful": 1, "sample": SAMPLE} for ident in ("r3", "x1", "x2")],
    )
    done = run(
        *eval_command(data, fake_llm_server, tmp_path / "out", *extra),
        "--labels",
        labels,
        "--label",
        "faithful",
    )
    assert done.returncode == 2 and fake_llm_server.requests == [], done.stderr
    assert "1 labelled row is a row of" in done.stderr
    assert "at least 2" in done.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()
