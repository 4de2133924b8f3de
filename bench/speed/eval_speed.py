"""`judge eval` speed: live against the fake server with latency, and pure replay.

Live: N samples (5 contexts each, four core metrics) against the fake server answering
after LATENCY seconds, at --concurrency C. The lower bound is requests / C x latency plus
the critical path of dependent calls (claims -> verify, reverse questions -> embeddings:
2 x latency). Prints the wall time and the ratio to that bound (target <= 1.2).
Replay: the same command with --replay on M fully cached samples, start-up included
(target < 5 s), and checks that litellm was never imported.

Run: python -m bench.speed.eval_speed [--live 500] [--replay 2000] [--latency 0.3]
     [--concurrency 32]
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


def samples(n: int) -> list[dict]:
    """Deterministic synthetic samples: 3-sentence answers, 5 contexts, a ground truth."""
    out = []
    for i in range(n):
        t = TOPICS[i % len(TOPICS)]
        out.append(
            {
                "id": f"s{i}",
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
        )
    return out


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def judge_eval(
    data: Path, server: FakeLLMServer, cache: Path, out: Path, concurrency: int, *extra: str
) -> tuple[float, subprocess.CompletedProcess[str]]:
    command = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "judge",
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
        str(cache),
        "--out",
        str(out),
        "--concurrency",
        str(concurrency),
        "--no-progress",
        *extra,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"judge eval failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=500)
    parser.add_argument("--replay", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=heuristic_judge) as server:
        root = Path(tmp)
        if args.live:
            write(root / "live.jsonl", samples(args.live))
            server.latency = args.latency
            seconds, _ = judge_eval(
                root / "live.jsonl",
                server,
                root / "live.sqlite",
                root / "live-out",
                args.concurrency,
            )
            requests = server.count()
            bound = requests / args.concurrency * args.latency + 2 * args.latency
            print(
                f"live: {args.live} samples, {requests} requests "
                f"({server.count('/v1/chat/completions')} chat), latency {args.latency} s, "
                f"concurrency {args.concurrency}: {seconds:.1f} s wall; lower bound "
                f"{bound:.1f} s; ratio {seconds / bound:.2f} (target <= 1.2)"
            )
        if args.replay:
            write(root / "replay.jsonl", samples(args.replay))
            server.latency = 0.0
            server.reset()
            fill, _ = judge_eval(
                root / "replay.jsonl", server, root / "replay.sqlite", root / "fill-out", 64
            )
            filled = server.count()
            seconds, done = judge_eval(
                root / "replay.jsonl",
                server,
                root / "replay.sqlite",
                root / "replay-out",
                args.concurrency,
                "--replay",
            )
            litellm = any(
                " litellm" in line
                for line in done.stderr.splitlines()
                if line.startswith("import time:")
            )
            print(
                f"replay: {args.replay} samples fully cached ({filled} requests recorded in "
                f"{fill:.1f} s): {seconds:.2f} s wall with start-up (target < 5 s); requests "
                f"during replay {server.count() - filled}; litellm imported: {litellm}"
            )


if __name__ == "__main__":
    main()
