"""Do the monitor's drop alerts keep their false-alarm rate, and how soon do they see a drop?

Simulated streams of per-trace scores, grouped into windows of 50 and 200 traces, each
stream against a baseline of its own (`--baseline-rows` rows drawn from the stream's
pre-drop distribution, as a pinned run or the first windows would be), through
`judge.monitor.alerts.DropDetector` exactly as the monitor runs it:

- `faithfulness`: Beta-distributed scores with mean 0.85 (Beta(3.4, 0.6): most traces
  near 1, a tail of bad ones), higher is better;
- `hallucination`: 0/1 per trace, rate 0.10, lower is better.

Stable streams (`--seeds` x `--windows` windows that never drop): false alarms per 1,000
windows, the detector starting afresh after each (goal: at most 1,000 x alpha, the
documented bound). Drops of 0.05 and 0.10 (faithfulness mean 0.85 -> 0.80, 0.75;
hallucination rate 0.10 -> 0.15, 0.20) after `--before` stable windows: the delay in
windows from the drop to the alert (1 = the first window after it), over `--seeds`
streams, with the alerts raised before the drop and the streams not alerted within
`--horizon` windows.

The machine's load (from /proc/loadavg) is printed beside the figures; only the time
depends on it.

    python -m bench.monitor.alerts_sim [--seeds 100] [--windows 1000] [--sizes 50,200]
        [--alphas 0.001,0.01,0.05] [--min-drop 0] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from judge.monitor.alerts import DropDetector

CONCENTRATION = 4.0  # Beta(mean * 4, (1 - mean) * 4): mean 0.85 is Beta(3.4, 0.6)

Draw = Callable[[np.random.Generator, float, int], np.ndarray]


def faithfulness(rng: np.random.Generator, mean: float, n: int) -> np.ndarray:
    return rng.beta(mean * CONCENTRATION, (1 - mean) * CONCENTRATION, n)


def hallucination(rng: np.random.Generator, rate: float, n: int) -> np.ndarray:
    return (rng.random(n) < rate).astype(np.float64)


# name: (draw, mean before the drop, direction of a drop, higher is better)
KINDS: dict[str, tuple[Draw, float, float, bool]] = {
    "faithfulness": (faithfulness, 0.85, -1.0, True),
    "hallucination": (hallucination, 0.10, 1.0, False),
}


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def detector(kind: str, rng: np.random.Generator, args: argparse.Namespace, alpha: float):
    draw, mean, _, higher = KINDS[kind]
    return DropDetector(
        draw(rng, mean, args.baseline_rows),
        metric=kind,
        higher_is_better=higher,
        alpha=alpha,
        min_drop=args.min_drop,
    )


def false_alarms(kind: str, size: int, alpha: float, args: argparse.Namespace) -> dict[str, Any]:
    """Alerts on streams that never drop, per 1,000 windows."""
    draw, mean, _, _ = KINDS[kind]
    alerts = 0
    for seed in range(args.seeds):
        rng = np.random.default_rng([seed, size, 1])
        found = detector(kind, rng, args, alpha)
        for _ in range(args.windows):
            alerts += found.update(draw(rng, mean, size)) is not None
    windows = args.seeds * args.windows
    return {
        "kind": kind,
        "size": size,
        "alpha": alpha,
        "windows": windows,
        "alerts": alerts,
        "per_1000": 1000 * alerts / windows,
        "bound_per_1000": 1000 * alpha,
    }


def delays(kind: str, size: int, drop: float, args: argparse.Namespace) -> dict[str, Any]:
    """Windows from a drop to its alert, over seeded streams."""
    draw, mean, sign, _ = KINDS[kind]
    after, early, missed = [], 0, 0
    for seed in range(args.seeds):
        rng = np.random.default_rng([seed, size, 2])
        found = detector(kind, rng, args, args.alpha)
        for _ in range(args.before):
            early += found.update(draw(rng, mean, size)) is not None
        for w in range(1, args.horizon + 1):
            if found.update(draw(rng, mean + sign * drop, size)) is not None:
                after.append(w)
                break
        else:
            missed += 1
    seen = np.array(after, dtype=np.float64)
    return {
        "kind": kind,
        "size": size,
        "drop": drop,
        "streams": args.seeds,
        "mean": float(seen.mean()) if seen.size else None,
        "median": float(np.median(seen)) if seen.size else None,
        "p90": float(np.quantile(seen, 0.9)) if seen.size else None,
        "max": int(seen.max()) if seen.size else None,
        "missed": missed,
        "early_alerts": early,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seeds", type=int, default=100, help="streams per figure")
    parser.add_argument("--windows", type=int, default=1000, help="windows per stable stream")
    parser.add_argument("--sizes", default="50,200", help="traces per window")
    parser.add_argument("--alphas", default="0.001,0.01,0.05", help="for the stable streams")
    parser.add_argument("--alpha", type=float, default=0.001, help="for the drops")
    parser.add_argument("--drops", default="0.05,0.10")
    parser.add_argument("--min-drop", type=float, default=0.0)
    parser.add_argument("--baseline-rows", type=int, default=1000)
    parser.add_argument("--before", type=int, default=20, help="stable windows before a drop")
    parser.add_argument("--horizon", type=int, default=500, help="windows waited after it")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = args.kinds.split(",")
    print(
        f"load {load()}; {args.seeds} streams a figure, baseline {args.baseline_rows} rows, "
        f"min_drop {args.min_drop}"
    )
    started = time.perf_counter()
    stable = []
    print(f"\nstable streams, {args.windows} windows each: false alarms per 1,000 windows")
    print(f"{'kind':<14} {'window':>6} {'alpha':>6} {'alerts':>7} {'per 1,000':>10} {'bound':>6}")
    for kind in kinds:
        for size in sizes:
            for alpha in (float(a) for a in args.alphas.split(",")):
                row = false_alarms(kind, size, alpha, args)
                stable.append(row)
                print(
                    f"{kind:<14} {size:>6} {alpha:>6} {row['alerts']:>7} "
                    f"{row['per_1000']:>10.3f} {row['bound_per_1000']:>6.3g}"
                )
    drops = []
    print(f"\ndrops after {args.before} stable windows, alpha {args.alpha}: windows to the alert")
    print(
        f"{'kind':<14} {'window':>6} {'drop':>5} {'mean':>6} {'median':>6} {'p90':>5} "
        f"{'max':>5} {'missed':>6} {'early':>5}"
    )
    for kind in kinds:
        for size in sizes:
            for drop in (float(d) for d in args.drops.split(",")):
                row = delays(kind, size, drop, args)
                drops.append(row)
                print(
                    f"{kind:<14} {size:>6} {drop:>5} {row['mean']:>6.2f} {row['median']:>6.1f} "
                    f"{row['p90']:>5.1f} {row['max']:>5} {row['missed']:>6} "
                    f"{row['early_alerts']:>5}"
                )
    elapsed = time.perf_counter() - started
    print(f"\n{elapsed:.0f} s; load {load()}")
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        figures = {"settings": settings, "stable": stable, "drops": drops, "seconds": elapsed}
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
