"""How close does `judge experiment` come to the lower bound of asking a slow app?

An app that takes 100 ms per question (a sync one sleeping in its thread, and an async
one awaiting), 500 questions, `--app-concurrency 32`: the lower bound of the asking is
ceil(500 / 32) x 0.1 s = 1.6 s; the target is at most 1.1x it. Each run is a child
process running `judge.experiments` (the test set read from a JSON-lines file, the asking,
app_outputs.jsonl, then retrieval metrics against the questions' labels, no judge model),
so its peak memory is its own. Each size in `--questions` is run in turn: the peak should
stay flat in the number of questions (no row is held but those in flight; what grows is a
few numbers a question).

    python -m bench.speed.experiment_speed [--questions 500,5000,50000] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.support.peak_memory import own_peak_kib

SLEEP = 0.1


def sync_app(question: str) -> dict:
    time.sleep(SLEEP)
    return reply(question)


async def async_app(question: str) -> dict:
    await asyncio.sleep(SLEEP)
    return reply(question)


def reply(question: str) -> dict:
    n = int(question.rsplit(" ", 1)[1])
    ids = [f"d{(n + i) % 50}" for i in range(10)]
    return {
        "answer": f"answer {n}",
        "contexts": [f"text of {d}" for d in ids],
        "retrieved_ids": ids,
    }


def child(kind: str, questions: int, concurrency: int) -> None:
    """One experiment in this process; prints its figures as JSON."""
    from judge.experiments.experiment import experiment

    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "testset.jsonl"
        with data.open("w", encoding="utf-8") as out:
            for n in range(questions):
                row = {"id": f"q{n}", "question": f"question {n}", "relevance": {f"d{n % 50}": 1}}
                out.write(json.dumps(row) + "\n")
        app = sync_app if kind == "sync" else async_app
        started = time.perf_counter()
        result = experiment(
            app, data, out=Path(folder) / "run", app_concurrency=concurrency, progress=False
        )
        wall = time.perf_counter() - started
    peak_kib = own_peak_kib()  # not ru_maxrss: see bench/support/peak_memory.py
    print(
        json.dumps(
            {
                "asking_s": result.config.app["seconds"],
                "wall_s": wall,
                "peak_mib": peak_kib / 1024,
                "errors": result.config.app["errors"],
            }
        )
    )


def measure(kind: str, questions: int, concurrency: int) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.speed.experiment_speed",
            "--child",
            kind,
            "--questions",
            str(questions),
            "--concurrency",
            str(concurrency),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--questions",
        default="500,5000",
        help="comma-separated numbers of questions, each run in turn (default 500,5000)",
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--child", choices=["sync", "async"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, int(args.questions), args.concurrency)
        return
    sizes = [int(n) for n in args.questions.split(",")]
    print(f"app 100 ms a call, app concurrency {args.concurrency}; lower bound of the asking:")
    print(f"ceil(questions/{args.concurrency}) x 0.1 s (target <= 1.1x)\n")
    print(
        f"{'app':6} {'questions':>9} {'asking s':>9} {'x bound':>8} {'whole s':>8} {'peak MiB':>9}"
    )
    for kind in ("sync", "async"):
        for questions in sizes:
            figures = measure(kind, questions, args.concurrency)
            low = math.ceil(questions / args.concurrency) * SLEEP
            assert not figures["errors"], figures
            print(
                f"{kind:6} {questions:>9,} {figures['asking_s']:>9.2f} "
                f"{figures['asking_s'] / low:>8.3f} {figures['wall_s']:>8.2f} "
                f"{figures['peak_mib']:>9.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
