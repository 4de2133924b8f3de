"""Benchmark judge.ir.evaluate against pytrec_eval (and ranx, if installed) from Python dicts.

Workload (issue 2): 100,000 queries x 100 retrieved docs, 20 judged docs per query with
grades 0-3 (12 of them retrieved), computing ndcg@10, map, mrr and P@10 together.
Prints wall times in one process and the ratio judge / pytrec_eval, then the peak memory
each tool adds, each measured in a fresh process (Linux VmHWM, reset after the data is built).

Run: python bench/ir_speed.py [--queries N] [--docs N] [--judged N] [--repeat N]
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

import numpy as np

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


TOOLS = {"judge": run_judge, "pytrec_eval": run_pytrec, "ranx": run_ranx}


def timed(fn, qrels: dict, run: dict) -> tuple[float, dict]:
    gc.collect()
    start = time.perf_counter()
    out = fn(qrels, run)
    return time.perf_counter() - start, out


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def memory_child(tool: str, nq: int, nd: int, nj: int) -> None:
    """In a fresh process: build the data, reset the peak, run one tool, print the added peak."""
    qrels, run = make_data(nq, nd, nj)
    if tool == "judge":  # imports are not the tool's working memory
        import judge.ir  # noqa: F401
    elif tool == "pytrec_eval":
        import pytrec_eval  # noqa: F401
    gc.collect()
    before = _status("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    TOOLS[tool](qrels, run)
    print(json.dumps({"peak_added_bytes": _status("VmHWM:") - before}))


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
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the best is kept")
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

    best: dict[str, float] = {}
    results: dict[str, dict] = {}
    for tool in tools:
        times = []
        for _ in range(args.repeat if tool != "ranx" else 1):
            seconds, results[tool] = timed(TOOLS[tool], qrels, run)
            times.append(seconds)
        best[tool] = min(times)
        print(
            f"time  {tool:<12} best {best[tool]:7.3f} s   runs: "
            + ", ".join(f"{t:.3f}" for t in times)
        )
    if "pytrec_eval" in best:
        ratio = best["judge"] / best["pytrec_eval"]
        print(f"ratio judge / pytrec_eval = {ratio:.3f} (target <= 0.25)")
        ours, theirs = results["judge"], results["pytrec_eval"]
        pairs = {"ndcg@10": "ndcg_cut_10", "map": "map", "mrr": "recip_rank", "P@10": "P_10"}
        diff = max(abs(ours[a] - theirs[b]) for a, b in pairs.items())
        print(f"max |judge - pytrec_eval| over the means: {diff:.2e}")
    if "ranx" in best:
        print(f"ratio judge / ranx = {best['judge'] / best['ranx']:.3f}")

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
