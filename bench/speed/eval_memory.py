"""Peak memory of `judge eval --replay` by the number of rows: 10k, 100k, 1,000,000.

Goal (issue 39): the memory of a run does not grow with its rows: the 1M-row peak within
1.2x of the 10k one, and each `--processes` shard holding only its own part.

The data, chosen so a million rows replay in minutes: --distinct different samples
repeated (row n is sample n % distinct, with its own id), judged by faithfulness (two
judge calls a row: claims, then their verdicts). The cache is filled by one `judge eval`
of the distinct samples against the fake server; the measured run is `judge eval --replay`
of all the rows, so every row does a replay's whole work (request keys, lookups, scoring,
the row written to the checkpoint and results.jsonl, the summary's bootstrap, the report)
without a request. Every row also has its own ranked `retrieved_ids` and `relevance`
judgments, so `--metrics faithfulness,mrr,ndcg@10` measures retrieval metrics too; they
are not in the default because judge.ir scores a row in about 0.7 ms (1M rows: minutes
of CPU more, for the same memory question).

Peak memory is the peak resident memory of the `judge eval` process since its start
(VmHWM, start-up included; not ru_maxrss, which starts from this benchmark's own peak: see
bench/support/peak_memory.py). Under `--processes 2` the parent's own peak and the largest
shard's are printed apart (each shard writes its own VmHWM when it exits). CPU is user plus
system time of the process and its children; the machine's load is printed beside each
figure.

Run: python -m bench.speed.eval_memory [--rows 10000,100000,1000000] [--distinct 100]
     [--processes-rows 100000] [--concurrency 32] [--metrics faithfulness] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.support.peak_memory import (
    MEASURED_JUDGE,
    judge_figures,
    recorded_peaks,
    recording_peaks,
)
from judge.testing import FakeLLMServer, heuristic_judge

TOPICS = ["Python", "Rust", "SQLite", "Linux", "HTTP", "Unicode", "NumPy", "Git"]
METRICS = "faithfulness"


def row(number: int, distinct: int) -> str:
    """Row `number` as a JSON line: sample number % distinct, its own retrieval."""
    i = number % distinct
    t = TOPICS[i % len(TOPICS)]
    ranked = [f"d{(number * 7 + k) % 50_000}" for k in range(10)]
    return json.dumps(
        {
            "id": f"r{number}",
            "question": f"What is {t} used for in project {i}?",
            "answer": f"{t} is used for project {i}. {t} is fast.",
            "contexts": [f"{t} is used for project {i}.", "Bananas are yellow."],
            "ground_truth": f"{t} is used for project {i}.",
            "retrieved_ids": ranked,
            "relevance": {ranked[number % 10]: 2, ranked[(number + 3) % 10]: 1, "d-miss": 1},
        }
    )


def write_rows(path: Path, rows: int, distinct: int) -> None:
    """rows.jsonl of `rows` rows."""
    with open(path, "w", encoding="utf-8") as out:
        for start in range(0, rows, 10_000):
            out.write(
                "".join(row(n, distinct) + "\n" for n in range(start, min(rows, start + 10_000)))
            )


def command(
    data: Path, server: FakeLLMServer, root: Path, out: str, *extra: str, metrics: str = METRICS
) -> list[str]:
    """The measured `judge eval` of data into root/out with root/cache.sqlite."""
    return [
        sys.executable,
        "-c",
        MEASURED_JUDGE,
        "eval",
        str(data),
        "--model",
        "openai/bench-judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "x",
        "--cache-as",
        "bench-fake",
        "--cache",
        str(root / "cache.sqlite"),
        "--metrics",
        metrics,
        "--out",
        str(root / out),
        "--no-progress",
        "--no-record",
        *extra,
    ]


def measure(cmd: list[str]) -> dict[str, float]:
    """Wall seconds, own and largest child's peak RSS (MiB), CPU seconds of one command."""
    with recording_peaks() as (env, folder):
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        wall = time.perf_counter() - start
        peaks = recorded_peaks(folder)
    if done.returncode not in (0, 1):  # 1: a gate; none here, but not a failure to measure
        raise SystemExit(f"judge eval failed ({done.returncode}):\n{done.stderr[-3000:]}")
    figures = judge_figures(done.stderr, peaks)
    return {
        "wall": wall,
        "own": figures.own_kib / 1024,
        "kids": figures.children_kib / 1024,
        "cpu": figures.cpu,
    }


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10000,100000,1000000", help="comma-separated")
    parser.add_argument("--distinct", type=int, default=100)
    parser.add_argument(
        "--processes-rows",
        default="100000",
        help="comma-separated row counts also run with --processes 2 (empty: none)",
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--metrics", default=METRICS, help=f"default {METRICS}")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it")
    args = parser.parse_args()
    sizes = [int(n) for n in args.rows.split(",") if n]
    sharded = [int(n) for n in args.processes_rows.split(",") if n]
    with contextlib.ExitStack() as stack:
        if args.keep:
            root = Path(args.keep)
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        server = stack.enter_context(FakeLLMServer(chat=heuristic_judge))
        write_rows(root / "fill.jsonl", args.distinct, args.distinct)
        measure(
            command(
                root / "fill.jsonl",
                server,
                root,
                "fill",
                "--concurrency",
                "64",
                metrics=args.metrics,
            )
        )
        recorded = server.count()
        print(f"metrics {args.metrics}; {args.distinct} distinct LLM-judged samples repeated")
        figures: dict[int, float] = {}
        for rows in sorted(set(sizes) | set(sharded)):
            data = root / f"rows{rows}.jsonl"
            write_rows(data, rows, args.distinct)
            size = data.stat().st_size / 2**20
            replay = ("--replay", "--concurrency", str(args.concurrency))
            if rows in sizes:
                before = load()
                got = measure(
                    command(data, server, root, f"out{rows}", *replay, metrics=args.metrics)
                )
                figures[rows] = got["own"]
                print(
                    f"{rows:>9,} rows ({size:,.0f} MiB of JSONL): peak RSS {got['own']:,.0f} MiB; "
                    f"{got['wall']:.1f} s wall, {got['cpu']:.1f} s CPU; load {before} -> {load()}",
                    flush=True,
                )
                (root / f"out{rows}" / "results.jsonl").unlink()
            if rows in sharded:
                before = load()
                got = measure(
                    command(
                        data,
                        server,
                        root,
                        f"proc{rows}",
                        *replay,
                        "--processes",
                        "2",
                        metrics=args.metrics,
                    )
                )
                print(
                    f"{rows:>9,} rows, --processes 2: parent peak RSS {got['own']:,.0f} MiB, "
                    f"largest shard {got['kids']:,.0f} MiB; {got['wall']:.1f} s wall, "
                    f"{got['cpu']:.1f} s CPU; load {before} -> {load()}",
                    flush=True,
                )
                (root / f"proc{rows}" / "results.jsonl").unlink()
            data.unlink()
        if server.count() != recorded:
            raise SystemExit(f"the replays sent {server.count() - recorded} requests")
        smallest = min(figures) if figures else None
        for rows in sorted(figures):
            if smallest is not None and rows != smallest:
                ratio = figures[rows] / figures[smallest]
                print(f"peak at {rows:,} rows / peak at {smallest:,}: {ratio:.2f}x (goal <= 1.2x)")


if __name__ == "__main__":
    main()
