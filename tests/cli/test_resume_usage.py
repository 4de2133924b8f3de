"""A `judge eval` stopped by SIGTERM and run again resumes its checkpointed rows: what it
writes is the uninterrupted run's, summary.json's `usage` (summed over the rows) too."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.cli import run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_a_resumed_run_writes_the_uninterrupted_runs_summary(tmp_path):
    cache = tmp_path / "rec.sqlite"
    assert run("cache", "import", cache, EXAMPLES / "judgments.jsonl").returncode == 0
    rows = [json.loads(line) for line in (EXAMPLES / "data.jsonl").read_text().splitlines()]
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(json.dumps({**r, "id": f"{r['id']}-{k}"}) + "\n" for k in range(40) for r in rows),
        encoding="utf-8",
    )
    args = ["eval", data, "--model", "openai/judge-fixture", "--cache-as", "judge-fixture"]
    args += ["--cache", cache, "--replay", "--no-progress", "--no-record", "--concurrency", "1"]
    args += ["--metrics-module", EXAMPLES / "domain_accuracy.py", "--metrics-module"]
    args += [EXAMPLES / "rubric.py", "--metrics", "domain_accuracy,support_tone"]
    whole = run(*args, "--out", tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr

    out = tmp_path / "resumed"
    stopped = subprocess.Popen(
        [sys.executable, "-m", "judge", *map(str, args), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    checkpoint = out / ".checkpoint.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and stopped.poll() is None:
        if checkpoint.exists() and checkpoint.read_bytes().count(b"\n") > 20:
            break
        time.sleep(0.01)
    stopped.send_signal(signal.SIGTERM)
    assert stopped.wait(timeout=60) == 143, stopped.stderr.read()  # (SIGTERM's exit code)
    again = run(*args, "--out", out)
    assert again.returncode == 0, again.stderr

    assert (out / "results.jsonl").read_bytes() == (
        tmp_path / "whole" / "results.jsonl"
    ).read_bytes()
    a = json.loads((tmp_path / "whole" / "summary.json").read_text())
    b = json.loads((out / "summary.json").read_text())
    assert 20 < b["config"]["resumed_rows"] < 200
    totals = [json.loads(line)["usage"]["total"] for line in (out / "results.jsonl").open()]
    assert b["usage"]["cache_hits"] == sum(t["cache_hits"] for t in totals) == 400
    # The same summary, but for the wall time and the rows taken from the checkpoint.
    for summary in (a, b):
        summary["config"].pop("seconds")
        summary["config"].pop("resumed_rows")
    assert b == a
