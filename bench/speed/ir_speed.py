"""Benchmark judge.ir.evaluate against pytrec_eval (and ranx, if installed) from Python dicts.

Workload (issue 2): 100,000 queries x 100 retrieved docs, 20 judged docs per query with
grades 0-3 (12 of them retrieved), computing ndcg@10, map, mrr and P@10 together.
Prints wall and CPU times in one process and the ratios judge / pytrec_eval, then the peak
memory each tool adds, each measured in a fresh process (Linux VmHWM, reset after the data is
built). The tools take turns, so a machine shared with other work slows each alike; judge's
CPU time counts all its threads. A last line times the floor of any evaluator reading the
dicts: walking every run score and grade into arrays and looking every judged doc up in its
run, which is most of judge's time.

Run: python -m bench.speed.ir_speed [--queries N] [--docs N] [--judged N] [--repeat N]
Needs: pip install -e '.[test]' (pytrec-eval-terrier); ranx is optional.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
import warnings
from itertools import chain, repeat
from operator import attrgetter, methodcaller

import numpy as np

from bench.support.peak_memory import status_kib

JUDGE_METRICS = ["ndcg@10", "map", "mrr", "P@10"]
TREC_METRICS = {"ndcg_cut.10", "map", "recip_rank", "P.10"}


def make_data(nq: int, nd: int, nj: int, seed: int = 0) -> tuple[dict, dict]:
    """Random qrels and run; half the judged docs retrieved, float scores (few ties)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 10_000_000, size=(nq, nd + nj))
    # float32-representable scores: pytrec_eval stores float32, so both tools see the same ties
    scores = rng.random((nq, nd)).astype(np.float32).astype(np.float64).tolist()
    grades = rng.choice([0, 0, 1, 2, 3], size=(nq, nj)).tolist()
    retrieved_judged = nj * 3 // 5
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q in range(nq):
        docs = [f"doc{x}" for x in dict.fromkeys(ids[q].tolist())]
        run[f"q{q}"] = dict(zip(docs[:nd], scores[q], strict=True))
        judged = docs[:retrieved_judged] + docs[nd : nd + nj - retrieved_judged]
        qrels[f"q{q}"] = dict(zip(judged, grades[q], strict=True))
    return qrels, run


def run_judge(qrels: dict, run: dict) -> dict:
    from judge.ir import evaluate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dict(evaluate(qrels, run, JUDGE_METRICS))


def run_pytrec(qrels: dict, run: dict) -> dict:
    import pytrec_eval

    per_query = pytrec_eval.RelevanceEvaluator(qrels, TREC_METRICS).evaluate(run)
    return {
        m: sum(v[m] for v in per_query.values()) / len(per_query)
        for m in next(iter(per_query.values()))
    }


def run_ranx(qrels: dict, run: dict) -> dict:
    from ranx import Qrels, Run, evaluate

    return evaluate(Qrels(qrels), Run(run), ["ndcg@10", "map", "mrr", "precision@10"])


def walk_dicts(qrels: dict, run: dict) -> dict:
    """The floor: every run score and grade into arrays, every judged doc looked up in its run.

    Done the fastest way found (judge's): per query, its run's values then the look-ups of
    its judged docs in one C-level walk, then the grades.
    """
    values = methodcaller("values")
    runs = [run.get(q, {}) for q in qrels]
    n_run, n_judged = sum(map(len, runs)), sum(map(len, qrels.values()))
    lookups = map(map, map(attrgetter("get"), runs), qrels.values(), repeat(repeat(np.nan)))
    per_query = chain.from_iterable(zip(map(values, runs), lookups, strict=True))
    both = np.fromiter(chain.from_iterable(per_query), np.float64, n_run + n_judged)
    grades = np.fromiter(chain.from_iterable(map(values, qrels.values())), np.float64, n_judged)
    return {"sizes": (both.size, grades.size)}


TOOLS = {"judge": run_judge, "pytrec_eval": run_pytrec, "ranx": run_ranx}


def timed(fn, qrels: dict, run: dict) -> tuple[float, float, dict]:
    """Wall and CPU seconds of one call, and its result."""
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(qrels, run)
    return time.perf_counter() - start, time.process_time() - cpu, out


def memory_child(tool: str, nq: int, nd: int, nj: int) -> None:
    """In a fresh process: build the data, reset the peak, run one tool, print the added peak."""
    qrels, run = make_data(nq, nd, nj)
    if tool == "judge":  # imports are not the tool's working memory
        import judge.ir  # noqa: F401
    elif tool == "pytrec_eval":
        import pytrec_eval  # noqa: F401
    gc.collect()
    before = status_kib("VmRSS") * 1024
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    TOOLS[tool](qrels, run)
    print(json.dumps({"peak_added_bytes": status_kib("VmHWM") * 1024 - before}))


def available(tool: str) -> bool:
    module = {"judge": "judge", "pytrec_eval": "pytrec_eval", "ranx": "ranx"}[tool]
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--judged", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs; the best is kept")
    parser.add_argument("--no-ranx", action="store_true", help="skip ranx (slow: compiles)")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.queries, args.docs, args.judged)
        return

    tools = [t for t in TOOLS if available(t) and not (t == "ranx" and args.no_ranx)]
    print(
        f"workload: {args.queries:,} queries x {args.docs} docs, {args.judged} judged/query; "
        f"metrics {', '.join(JUDGE_METRICS)}"
    )
    start = time.perf_counter()
    qrels, run = make_data(args.queries, args.docs, args.judged)
    print(f"data built in {time.perf_counter() - start:.1f} s")

    walls: dict[str, list[float]] = {t: [] for t in tools}
    cpus: dict[str, list[float]] = {t: [] for t in tools}
    results: dict[str, dict] = {}
    for turn in range(args.repeat):
        # Take turns, starting with a different tool each round, so load hits each alike.
        for tool in tools[turn % len(tools) :] + tools[: turn % len(tools)]:
            if tool == "ranx" and turn:
                continue  # slow: once is enough
            wall, cpu, results[tool] = timed(TOOLS[tool], qrels, run)
            walls[tool].append(wall)
            cpus[tool].append(cpu)
    best = {t: min(walls[t]) for t in tools}
    best_cpu = {t: min(cpus[t]) for t in tools}
    for tool in tools:
        print(
            f"time  {tool:<12} best {best[tool]:7.3f} s wall, {best_cpu[tool]:7.3f} s CPU   "
            "runs: " + ", ".join(f"{t:.3f}" for t in walls[tool])
        )
    if "pytrec_eval" in best:
        ratio = best["judge"] / best["pytrec_eval"]
        cpu_ratio = best_cpu["judge"] / best_cpu["pytrec_eval"]
        print(f"ratio judge / pytrec_eval = {ratio:.3f} wall (target <= 0.25), {cpu_ratio:.3f} CPU")
        ours, theirs = results["judge"], results["pytrec_eval"]
        pairs = {"ndcg@10": "ndcg_cut_10", "map": "map", "mrr": "recip_rank", "P@10": "P_10"}
        diff = max(abs(ours[a] - theirs[b]) for a, b in pairs.items())
        print(f"max |judge - pytrec_eval| over the means: {diff:.2e}")
    if "ranx" in best:
        print(f"ratio judge / ranx = {best['judge'] / best['ranx']:.3f}")
    floor = min(timed(walk_dicts, qrels, run)[:2] for _ in range(args.repeat))
    line = f"floor (walking the dicts into arrays): {floor[0]:.3f} s wall, {floor[1]:.3f} s CPU"
    if "pytrec_eval" in best:
        line += f" = {floor[0] / best['pytrec_eval']:.3f}x pytrec_eval's wall time"
    print(line)

    peaks = {}
    for tool in [t for t in tools if t != "ranx"]:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--memory-child",
                tool,
                "--queries",
                str(args.queries),
                "--docs",
                str(args.docs),
                "--judged",
                str(args.judged),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        peaks[tool] = json.loads(out.stdout.strip().splitlines()[-1])["peak_added_bytes"]
        print(f"peak memory added  {tool:<12} {peaks[tool] / 2**20:8.1f} MiB")
    if "pytrec_eval" in peaks:
        ratio = peaks["judge"] / peaks["pytrec_eval"]
        print(f"memory ratio judge / pytrec_eval = {ratio:.3f} (target <= 1)")


if __name__ == "__main__":
    main()
