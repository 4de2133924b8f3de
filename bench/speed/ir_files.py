"""Benchmark `judge ir` against the trec_eval C binary on big TREC files.

Workload (issue 14): a seeded run of 5,000 queries x 1,000 retrieved docs (5M lines) and
qrels with 30 judged docs per query (grades 0-3, two thirds of them retrieved), metrics
ndcg@10, map, mrr (recip_rank) and P@10, judged queries missing from the run scoring 0
(trec_eval -c). Builds trec_eval from ../shared/trec_eval/src in a temporary folder (its
Makefile, as the README there says), runs each tool in a fresh process and prints the wall
time and peak memory (max RSS of the child, from wait4) side by side with the ratio, then
checks that both printed the same values.

Run: python -m bench.speed.ir_files [--queries N] [--docs N] [--judged N] [--repeat N]
         [--dir DIR] [--trec-eval PATH]
Needs: a C compiler and make (or --trec-eval PATH to a built binary).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
TREC_EVAL_SRC = REPO.parent / "shared" / "trec_eval" / "src"
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


def measure(command: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS bytes (of this child alone, from wait4) and stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE)
        assert child.stderr is not None
        errors = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            sys.exit(f"{command[0]} failed ({child.returncode}): {errors.decode()}")
        out.seek(0)
        return seconds, usage.ru_maxrss * 1024, out.read().decode()


def parse_means(text: str, judge: bool) -> dict[str, float]:
    """Mean values ('all' rows) of either tool's text output, keyed by judge's metric names."""
    means = {}
    for line in text.splitlines():
        name, query, value = (part.strip() for part in line.split("\t"))
        if query == "all" and (judge or name in NAMES):
            means[name if judge else NAMES[name]] = float(value)
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--docs", type=int, default=1_000)
    parser.add_argument("--judged", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool, alternated")
    parser.add_argument("--dir", help="folder for the files (kept and reused); default a temp dir")
    parser.add_argument("--trec-eval", help="a built trec_eval binary (default: build one)")
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
        runs: dict[str, list[tuple[float, int]]] = {tool: [] for tool in commands}
        outputs = {}
        for _ in range(args.repeat):
            for tool, command in commands.items():
                seconds, peak, outputs[tool] = measure(command)
                runs[tool].append((seconds, peak))
        ours, theirs = runs["judge ir"], runs["trec_eval"]
        time_ours, time_theirs = min(s for s, _ in ours), min(s for s, _ in theirs)
        peak_ours, peak_theirs = max(p for _, p in ours), max(p for _, p in theirs)
        print(f"{'':<18}{'judge ir':>10}{'trec_eval':>11}{'ratio':>8}   goal")
        print(
            f"{'wall time (best)':<18}{time_ours:>8.2f} s{time_theirs:>9.2f} s"
            f"{time_ours / time_theirs:>8.2f}   <= 0.5"
        )
        print(
            f"{'peak memory':<18}{peak_ours / 2**20:>6.0f} MiB{peak_theirs / 2**20:>7.0f} MiB"
            f"{peak_ours / peak_theirs:>8.2f}   <= 1"
        )
        for tool, measured in runs.items():
            print(
                f"runs of {tool}: "
                + ", ".join(f"{s:.2f} s {p / 2**20:.0f} MiB" for s, p in measured)
            )
        judge_means = parse_means(outputs["judge ir"], judge=True)
        trec_means = parse_means(outputs["trec_eval"], judge=False)
        same = judge_means == trec_means
        print(f"same 4-decimal means: {same}  {judge_means}")
        if not same:
            sys.exit(f"the tools disagree: trec_eval printed {trec_means}")
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
