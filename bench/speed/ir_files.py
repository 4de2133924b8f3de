"""Benchmark `judge ir` against the trec_eval C binary on big TREC files.

Workload (issue 14): a seeded run of 5,000 queries x 1,000 retrieved docs (5M lines) and
qrels with 30 judged docs per query (grades 0-3, two thirds of them retrieved), metrics
ndcg@10, map, mrr (recip_rank) and P@10, judged queries missing from the run scoring 0
(trec_eval -c). Builds trec_eval from the shared trec_eval/src in a temporary folder (its
Makefile, as the README there says), runs each tool in a fresh process and prints the wall
time, CPU time (user + system, of the child alone) and peak memory (max RSS of the child,
from wait4 in a small launcher: wait4 in this process would count this process's own peak,
see bench/support/peak_memory.py) side by side: the median of each, and the ratio of each
pair of runs (the tools run in turn, so a pair shares the machine's load) with its median
and range,
against the goal (issue 39: time at most 0.15x trec_eval's, memory at most 0.5x); then
checks that both printed the same values. A note says when judge's or its
libraries' modules have no compiled bytecode (each run would compile them). Then
the start-up cost: `judge ir` and trec_eval on a small (10-query) pair of files, best of
--repeat-small runs each (goal: judge ir under 100 ms wall).

The load of the machine (/proc/loadavg) is printed beside the figures: on a loaded
machine wall times stretch, CPU times much less.

Run: python -m bench.speed.ir_files [--queries N] [--docs N] [--judged N] [--repeat N]
         [--repeat-small N] [--dir DIR] [--trec-eval PATH]
Needs: a C compiler and make (or --trec-eval PATH to a built binary).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.support.peak_memory import run_launched

REPO = Path(__file__).resolve().parents[2]
# The shared folder beside the checkout (or beside the folder of worktrees).
TREC_EVAL_SRC = next(
    (
        p / "shared" / "trec_eval" / "src"
        for p in REPO.parents
        if (p / "shared" / "trec_eval" / "src").is_dir()
    ),
    REPO.parent / "shared" / "trec_eval" / "src",
)
JUDGE_METRICS = "ndcg@10,map,mrr,P@10"
TREC_MEASURES = ["ndcg_cut.10", "map", "recip_rank", "P.10"]
# trec_eval's output name -> judge's
NAMES = {"ndcg_cut_10": "ndcg@10", "map": "map", "recip_rank": "mrr", "P_10": "P@10"}


def generate(directory: Path, nq: int, nd: int, nj: int, seed: int = 14) -> tuple[Path, Path]:
    """Write qrels.txt and run.txt (sorted by score, as systems write them); reuse if present."""
    qrels_path, run_path = directory / "qrels.txt", directory / "run.txt"
    stamp = directory / f"made-{nq}x{nd}x{nj}-seed{seed}-v2"
    if stamp.exists() and qrels_path.exists() and run_path.exists():
        return qrels_path, run_path
    rng = np.random.default_rng(seed)
    qids = rng.choice(np.arange(1_000_000, 9_999_999), size=nq, replace=False)
    retrieved_judged = nj * 2 // 3
    weights = 1.0 / (np.arange(nd) + 10.0)
    weights /= weights.sum()
    with open(run_path, "w") as run, open(qrels_path, "w") as qrels:
        for qid in qids.tolist():
            docs = rng.choice(8_841_823, size=nd + nj, replace=False).tolist()
            # BM25-like scores with 4 decimals: a few exact ties per query, as in real runs
            scores = np.sort(np.round(rng.gamma(4.0, 3.0, size=nd), 4))[::-1].tolist()
            ranked = enumerate(zip(docs[:nd], scores, strict=True), start=1)
            run.write("".join(f"{qid} Q0 D{d} {rank} {s:.4f} bench\n" for rank, (d, s) in ranked))
            # judged docs cluster near the top, as they do for a system that works
            positions = rng.choice(nd, size=retrieved_judged, replace=False, p=weights).tolist()
            judged = [docs[p] for p in positions] + docs[nd : nd + nj - retrieved_judged]
            grades = rng.choice([0, 0, 1, 1, 2, 3], size=nj).tolist()
            qrels.write("".join(f"{qid} 0 D{d} {g}\n" for d, g in zip(judged, grades, strict=True)))
    stamp.touch()
    return qrels_path, run_path


def build_trec_eval(work: Path) -> Path:
    """Copy trec_eval's source out of the shared folder and build it with its Makefile."""
    if not TREC_EVAL_SRC.is_dir():
        sys.exit(f"trec_eval source not found at {TREC_EVAL_SRC}; pass --trec-eval PATH")
    build = work / "trec_eval"
    if not (build / "trec_eval").exists():
        shutil.copytree(TREC_EVAL_SRC, build, dirs_exist_ok=True)
        subprocess.run(["make", "-C", str(build)], check=True, capture_output=True)
    return build / "trec_eval"


def measure(command: list[str]) -> tuple[float, float, int, str]:
    """Wall seconds, CPU seconds and peak RSS bytes (of this child alone, from wait4 in a
    small launcher: see bench/support/peak_memory.py) and stdout."""
    done = run_launched(command)
    if done.code != 0:
        sys.exit(f"{command[0]} failed ({done.code}): {done.stderr.decode()}")
    return done.seconds, done.cpu, done.peak_bytes, done.stdout.decode()


def parse_means(text: str, judge: bool) -> dict[str, float]:
    """Mean values ('all' rows) of either tool's text output, keyed by judge's metric names."""
    means = {}
    for line in text.splitlines():
        name, query, value = (part.strip() for part in line.split("\t"))
        if query == "all" and (judge or name in NAMES):
            means[name if judge else NAMES[name]] = float(value)
    return means


def load() -> str:
    """The first three fields of /proc/loadavg (load over 1, 5 and 15 minutes)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def bytecode_missing() -> list[str]:
    """Modules `judge ir` imports whose compiled bytecode this interpreter will not find:
    each run then compiles them again (PYTHONDONTWRITEBYTECODE=1 with an installer that
    does not compile, as uv by default), and the figures are not an installed judge's
    (here: 0.46 s of CPU on the small files instead of 0.10 s)."""
    names = ["judge.cli.main", "judge.ir.small", "judge.ir.run_stream", "numpy", "pyarrow"]
    missing = []
    for name in names:
        spec = importlib.util.find_spec(name)
        source = spec.origin if spec else None
        if not source or not source.endswith(".py"):
            continue
        cached = importlib.util.cache_from_source(source)
        if not os.path.exists(cached) or os.path.getmtime(cached) < os.path.getmtime(source):
            missing.append(name)
    return missing


def small_start(work: Path, trec_eval: Path, repeat: int) -> None:
    """Print the start-up cost: both tools on 10 queries x 100 docs, best of `repeat`."""
    small = work / "small"
    small.mkdir(exist_ok=True)
    qrels, run = generate(small, 10, 100, 30)
    commands = {
        "trec_eval": [str(trec_eval), "-c"]
        + [x for m in TREC_MEASURES for x in ("-m", m)]
        + [str(qrels), str(run)],
        "judge ir": [
            *(sys.executable, "-m", "judge", "ir", str(qrels), str(run)),
            *("-m", JUDGE_METRICS, "--digits", "4"),
        ],
    }
    times: dict[str, list[tuple[float, float]]] = {tool: [] for tool in commands}
    outputs = {}
    for _ in range(repeat):
        for tool, command in commands.items():
            seconds, cpu, _, outputs[tool] = measure(command)
            times[tool].append((seconds, cpu))
    same = parse_means(outputs["judge ir"], judge=True) == parse_means(
        outputs["trec_eval"], judge=False
    )

    def ms(tool: str, pick: Any) -> str:
        wall, cpu = (pick(t[i] for t in times[tool]) * 1000 for i in (0, 1))
        return f"{wall:.0f} ms wall ({cpu:.0f} ms CPU)"

    best = min(t[0] for t in times["judge ir"])
    print(
        f"small file (10 queries x 100 docs), {repeat} runs each: judge ir best "
        f"{ms('judge ir', min)}, median {ms('judge ir', statistics.median)}; trec_eval best "
        f"{ms('trec_eval', min)}; goal: judge ir under 100 ms wall (best: "
        f"{'met' if best < 0.1 else 'not met'}); same means: {same}; load {load()}"
    )
    if not same:
        sys.exit("the tools disagree on the small files")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--docs", type=int, default=1_000)
    parser.add_argument("--judged", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool, alternated")
    parser.add_argument("--dir", help="folder for the files (kept and reused); default a temp dir")
    parser.add_argument("--trec-eval", help="a built trec_eval binary (default: build one)")
    parser.add_argument(
        "--repeat-small", type=int, default=10, help="runs of each tool on the small files"
    )
    args = parser.parse_args()

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="judge-ir-files-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        qrels, run = generate(work, args.queries, args.docs, args.judged)
        size = run.stat().st_size / 2**20
        print(
            f"workload: {args.queries:,} queries x {args.docs:,} docs ({size:.0f} MiB run), "
            f"{args.judged} judged/query; files ready in {time.perf_counter() - start:.1f} s"
        )
        trec_eval = Path(args.trec_eval) if args.trec_eval else build_trec_eval(work)
        commands = {
            "trec_eval": [str(trec_eval), "-c"]
            + [x for m in TREC_MEASURES for x in ("-m", m)]
            + [str(qrels), str(run)],
            "judge ir": [
                *(sys.executable, "-m", "judge", "ir", str(qrels), str(run)),
                *("-m", JUDGE_METRICS, "--digits", "4"),
            ],
        }
        missing = bytecode_missing()
        if missing:
            print(
                f"note: no compiled bytecode for {', '.join(missing)}: every run of judge ir "
                "compiles them (more CPU and wall time than an installed judge takes); "
                "compile them once: python -m compileall -q judge $(python -c "
                "'import sysconfig; print(sysconfig.get_path(\"purelib\"))')"
            )
        print(f"load before: {load()}")
        runs: dict[str, list[tuple[float, float, int]]] = {tool: [] for tool in commands}
        outputs = {}
        for _ in range(args.repeat):
            for tool, command in commands.items():
                seconds, cpu, peak, outputs[tool] = measure(command)
                runs[tool].append((seconds, cpu, peak))
        ours, theirs = runs["judge ir"], runs["trec_eval"]
        print(
            f"{'median of runs':<18}{'judge ir':>10}{'trec_eval':>11}   ratio pair by pair   goal"
        )
        figures = [
            ("wall time", 0, "s", "<= 0.15"),
            ("CPU time", 1, "s", "<= 0.15"),
            ("peak memory", 2, "MiB", "<= 0.5"),
        ]
        for label, i, unit, goal in figures:
            scale = 2**20 if unit == "MiB" else 1
            mine = statistics.median(r[i] for r in ours) / scale
            other = statistics.median(r[i] for r in theirs) / scale
            ratios = [a[i] / b[i] for a, b in zip(ours, theirs, strict=True)]
            median = statistics.median(ratios)
            met = "" if not goal else ("met" if median <= float(goal.split()[-1]) else "not met")
            print(
                f"{label:<18}{mine:>7.2f} {unit:<3}{other:>7.2f} {unit:<3}"
                f"   {median:.3f} ({min(ratios):.3f}-{max(ratios):.3f})   {goal} {met}"
            )
        for tool, measured in runs.items():
            print(
                f"runs of {tool}: "
                + ", ".join(
                    f"{w:.2f} s ({c:.2f} s CPU) {p / 2**20:.0f} MiB" for w, c, p in measured
                )
            )
        print(f"load after: {load()}")
        judge_means = parse_means(outputs["judge ir"], judge=True)
        trec_means = parse_means(outputs["trec_eval"], judge=False)
        same = judge_means == trec_means
        print(f"same 4-decimal means: {same}  {judge_means}")
        if not same:
            sys.exit(f"the tools disagree: trec_eval printed {trec_means}")
        small_start(work, trec_eval, args.repeat_small)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
