"""`tests.helpers.cli.run` forks `judge` from a warm server: what a test sees of the child
must be what it sees of a new interpreter (`fresh=True`)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.cli import run


def both(*args: str, **kwargs) -> tuple[tuple, tuple]:
    """(returncode, stdout, stderr) of `judge ARGS` forked, and of a new interpreter."""
    forked = run(*args, **kwargs)
    fresh = run(*args, fresh=True, **kwargs)
    return (forked.returncode, forked.stdout, forked.stderr), (
        fresh.returncode,
        fresh.stdout,
        fresh.stderr,
    )


def write_qrels_and_run(folder: Path) -> None:
    (folder / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n")
    (folder / "run.txt").write_text("q1 Q0 d1 1 0.9 r\nq1 Q0 d2 2 0.5 r\nq2 Q0 d4 1 0.7 r\n")


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("no-such-command",),  # argparse's exit 2
        ("ir", "qrels.txt", "run.txt", "--metrics", "ndcg@10,mrr"),  # paths from cwd
        ("ir", "qrels.txt", "missing.txt", "--metrics", "mrr"),  # judge's own error
    ],
)
def test_a_forked_judge_answers_as_a_new_interpreter(args, tmp_path):
    write_qrels_and_run(tmp_path)
    forked, fresh = both(*args, cwd=tmp_path)
    assert forked == fresh


def test_the_child_takes_the_environment_and_cwd_given(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    data = json.dumps({"question": "q", "retrieved_ids": ["d1"], "relevance": {"d1": 1}})
    (tmp_path / "data.jsonl").write_text(data + "\n")
    for name, fresh in (("forked", False), ("fresh", True)):
        runs = tmp_path / f"{name}.sqlite"
        done = run(
            "eval", "data.jsonl", "--metrics", "mrr", "--no-progress", "--out", name,
            cwd=tmp_path, env={**os.environ, "JUDGE_RUNS": str(runs)}, fresh=fresh,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads((tmp_path / name / "summary.json").read_text())["metrics"]["mrr"]
        assert runs.exists()


def test_a_timeout_kills_the_child_as_subprocess_run_does(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("import time\ndef app(q):\n    time.sleep(60)\n")
    (tmp_path / "q.jsonl").write_text('{"question": "q", "relevance": {"d1": 1}}\n')
    args = ["experiment", "q.jsonl", "--app", f"{app}:app", "--metrics", "mrr", "--out", "o"]
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run(*args, "--app-timeout", "100", cwd=tmp_path, timeout=3)
    assert time.monotonic() - started < 30
