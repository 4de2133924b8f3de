"""Fault soak: `judge eval` on many samples against a fake server that misbehaves at random.

Faults injected into chat requests (seeded): 10% 429 with Retry-After, 5% 500, 5% malformed
JSON, 2% truncated output, 2% responses slower than the timeout. Checks that every input
row is in results.jsonl exactly once, scored or with an explicit error; then runs again
with the same cache and no faults, and checks that work already done is not redone.

Run: python -m bench.robustness.fault_soak [--samples 1000] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.speed.eval_speed import samples, write
from judge.testing import FakeLLMServer, Fault, heuristic_judge

FAULTS = [
    (Fault.status(429, retry_after=0.2), 0.10),
    (Fault.status(500), 0.05),
    (Fault.malformed(), 0.05),
    (Fault.truncated(), 0.02),
    (Fault.delay(3.0), 0.02),
]


def run(data: Path, server: FakeLLMServer, root: Path, out: str, concurrency: int) -> float:
    command = [
        sys.executable,
        "-m",
        "judge",
        "eval",
        str(data),
        "--model",
        "openai/soak",
        "--api-base",
        server.base_url,
        "--api-key",
        "x",
        "--embedding-model",
        "openai/soak-embed",
        "--cache",
        str(root / "cache.sqlite"),
        "--out",
        str(root / out),
        "--concurrency",
        str(concurrency),
        "--timeout",
        "1",
        "--max-retries",
        "4",
        "--max-error-rate",  # judge errors are what the soak provokes and counts itself
        "1",
        "--no-progress",
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"judge eval failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def check(path: Path, n: int) -> dict[str, int]:
    """Every row once, in order; counts of fully scored rows and rows with judge errors."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    numbers = [r["row"] for r in rows]
    assert numbers == list(range(n)), "rows missing, duplicated or out of order"
    with_errors = sum(1 for r in rows if r["errors"])
    for r in rows:  # a NaN always says why
        assert all(v is not None or m in r["reasons"] for m, v in r["scores"].items()), r
    return {
        "rows": len(rows),
        "rows_with_judge_errors": with_errors,
        "rows_fully_scored": len(rows) - with_errors,
    }


def soak(n: int, concurrency: int) -> dict[str, object]:
    """Run the soak; return the figures (asserting the invariants on the way)."""
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=heuristic_judge) as server:
        root = Path(tmp)
        write(root / "data.jsonl", samples(n))
        server.chaos(FAULTS, seed=7)
        first_seconds = run(root / "data.jsonl", server, root, "first", concurrency)
        first = check(root / "first" / "results.jsonl", n)
        figures: dict[str, object] = {
            "requests": server.count(),
            "faults": dict(server.faults_injected),
            "wall_s": round(first_seconds, 1),
            **first,
        }
        summary = json.loads((root / "first" / "summary.json").read_text())
        figures["retries"] = summary["usage"].get("retries")
        figures["reasks"] = summary["usage"].get("reasks")
        server.reset()  # no faults now: the second run completes the failed work only
        second_seconds = run(root / "data.jsonl", server, root, "second", concurrency)
        second = check(root / "second" / "results.jsonl", n)
        figures.update(
            {
                "rerun_requests": server.count(),
                "rerun_wall_s": round(second_seconds, 1),
                "rerun_rows_fully_scored": second["rows_fully_scored"],
            }
        )
        assert second["rows_with_judge_errors"] == 0, "the rerun left errors"
        # Only judgments missing after the first run are requested again.
        assert server.count() <= 6 * first["rows_with_judge_errors"], figures
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    figures = soak(args.samples, args.concurrency)
    for key, value in figures.items():
        print(f"{key:<26} {value}")


if __name__ == "__main__":
    main()
