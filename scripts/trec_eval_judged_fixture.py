"""Write fixtures/ir-conformance/trec_eval_judged/: random qrels and runs with trec_eval's
bpref and unj values, the reference for judge's `bpref` and `judged@k` (1 - unj_k).

The sets are seeded, and made to reach the corners: score ties, grades -1 (in the pool but
not judged, for trec_eval), topics with no relevant doc, runs shorter than the cutoffs,
judged topics missing from the run and run topics not judged. No topic has only grades
below 0: trec_eval stops on one ("Can't calculate measure").

trec_eval prints 4 decimals. To compare to the last bit, build a copy whose printing alone
is changed (`sed -i 's/%6\\.4f/%.17g/g' meas_print_single.c meas_print_final.c`, then
`make`); the values it computes are the same code's.

Run: python scripts/trec_eval_judged_fixture.py TREC_EVAL_BINARY [--sets 40]
"""

from __future__ import annotations

import argparse
import random
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "ir-conformance" / "trec_eval_judged"
CUTOFFS = (1, 2, 3, 5, 10, 20, 50)
LEVELS = (1, 2)


def make(seed: int) -> tuple[str, str]:
    """One qrels file's and one run file's text."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(rng.choice([8, 15, 40]))] + ["D4", "a0", "x9", "e"]
    qrels, run = [], []
    for q in range(rng.randint(1, 8)):
        qid = f"q{q}"
        role = rng.choice(["both"] * 5 + ["judged_only", "run_only", "mostly_minus_1", "norel"])
        if role != "run_only":
            judged = rng.sample(docs, rng.randint(1, len(docs)))
            choices = [-1, 0] if role == "norel" else [-1, 0, 0, 0, 1, 2, 3]
            grades = [-1 if role == "mostly_minus_1" else rng.choice(choices) for _ in judged]
            if max(grades) < 0:
                grades[0] = 0
            qrels += [f"{qid} 0 {d} {g}" for d, g in zip(judged, grades, strict=True)]
        if role != "judged_only":
            n = rng.choice([1, 2, 3, 4, 7, 12, 25, len(docs)])
            for rank, doc in enumerate(rng.sample(docs, min(n, len(docs)))):
                score = rng.choice([rng.randint(-3, 3) * 0.5, round(rng.random(), 3)])
                run.append(f"{qid} Q0 {doc} {rank} {score} tag")
    return "\n".join(qrels or ["q0 0 d1 1"]) + "\n", "\n".join(run or ["qx Q0 d1 0 1 t"]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trec_eval", help="the trec_eval binary")
    parser.add_argument("--sets", type=int, default=40)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    unj = "unj." + ",".join(map(str, CUTOFFS))
    for seed in range(args.sets):
        qrels_text, run_text = make(seed)
        qrels, run = OUT / f"qrels.{seed}", OUT / f"run.{seed}"
        qrels.write_text(qrels_text)
        run.write_text(run_text)
        for level in LEVELS:
            command = [args.trec_eval, "-c", "-q", f"-l{level}", "-m", "bpref", "-m", unj]
            printed = subprocess.run(
                [*command, qrels.name, run.name],
                cwd=OUT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            (OUT / f"out.{seed}.l{level}").write_text(printed)


if __name__ == "__main__":
    main()
