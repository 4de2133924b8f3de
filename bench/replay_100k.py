"""Replay of 100,000 fully cached rows: `judge eval --replay` wall time and peak memory.

The rows are --distinct samples (5 contexts each; the four core metrics with embeddings)
repeated until there are --rows of them, each with its own id. The cache is filled by one
`judge eval` of the distinct samples against the fake server; the replay then does all of
a row's work for every row (hashing each request, an SQLite lookup, parsing and validating
each reply, scoring, writing the row, the summary and the report) without a request. With
--distinct equal to --rows every row is different (filling the cache then takes as long as
500,000 requests at the client's throughput).

Peak memory is the replay process's own maximum resident set size (start-up, input rows,
cache and output writing included). Goals: under 60 s and under 1 GB.

Run: python bench/replay_100k.py [--rows 100000] [--distinct 1000] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from judge.testing import FakeLLMServer, heuristic_judge

TOPICS = ["Python", "Rust", "SQLite", "Linux", "HTTP", "Unicode", "NumPy", "Git"]
# Runs `judge` and reports its own peak RSS (KiB on Linux) on stderr.
MEASURED = (
    "import resource, sys\n"
    "from judge.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print('MAXRSS_KIB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def sample(i: int, number: int) -> dict:
    """Distinct sample i (of the --distinct ones) as row `number`."""
    t = TOPICS[i % len(TOPICS)]
    return {
        "id": f"r{number}",
        "question": f"What is {t} used for in project {i}?",
        "answer": f"{t} is used for project {i}. {t} is fast. {t} has a large community.",
        "contexts": [
            f"{t} is used for project {i}.",
            f"{t} is fast.",
            "Bananas are yellow.",
            f"The community of {t} is large and {t} has a large community.",
            f"Project {i} started in {2000 + i % 20}.",
        ],
        "ground_truth": f"{t} is used for project {i}. It started in {2000 + i % 20}.",
    }


def judge_eval(data: Path, server: FakeLLMServer, root: Path, out: str, *extra: str) -> tuple:
    """(seconds, peak RSS in MiB, completed process) of one `judge eval`."""
    command = [
        sys.executable,
        "-c",
        MEASURED,
        "eval",
        str(data),
        "--model",
        "openai/bench-judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "x",
        "--embedding-model",
        "openai/bench-embed",
        "--cache",
        str(root / "cache.sqlite"),
        "--out",
        str(root / out),
        "--no-progress",
        *extra,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"judge eval failed ({done.returncode}):\n{done.stderr[-3000:]}")
    kib = next(
        int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("MAXRSS_KIB")
    )
    return seconds, kib / 1024, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--distinct", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=heuristic_judge) as server:
        root = Path(tmp)
        distinct = min(args.distinct, args.rows)
        with open(root / "fill.jsonl", "w", encoding="utf-8") as out:
            for i in range(distinct):
                out.write(json.dumps(sample(i, i)) + "\n")
        with open(root / "rows.jsonl", "w", encoding="utf-8") as out:
            for n in range(args.rows):
                out.write(json.dumps(sample(n % distinct, n)) + "\n")
        fill, _, _ = judge_eval(root / "fill.jsonl", server, root, "fill", "--concurrency", "64")
        recorded = server.count()
        seconds, mib, _ = judge_eval(
            root / "rows.jsonl",
            server,
            root,
            "replay",
            "--replay",
            "--concurrency",
            str(args.concurrency),
        )
        summary = json.loads((root / "replay" / "summary.json").read_text(encoding="utf-8"))
        results = (root / "replay" / "results.jsonl").stat().st_size / 2**20
        print(
            f"replay of {args.rows:,} cached rows ({distinct:,} distinct; cache filled with "
            f"{recorded:,} requests in {fill:.1f} s): {seconds:.1f} s wall with start-up "
            f"(goal < 60 s), {args.rows / seconds:,.0f} rows/s; peak RSS {mib:,.0f} MiB "
            f"(goal < 1024); requests during replay {server.count() - recorded}; "
            f"results.jsonl {results:,.0f} MiB; rows in summary {summary['rows']:,}"
        )


if __name__ == "__main__":
    main()
