"""The named-terms check of `faithfulness_strict` on its own, with no model: how often it
takes back a careful judge's "supported", and how well it alone tells WikiEval's grounded
answers from its ungrounded ones.

1. judge/demo/samples.json: claims with a careful (hand-written) verdict against the
   contexts. A flagged "supported" claim is a false take-back of the strict metric.
2. WikiEval (../shared/judge-quality/wikieval.jsonl, read in place): each answer's sentences
   stand in for its claims, all taken as supported (what a judge that agrees with everything
   gives), so the score is the share of sentences without unsourced terms; the grounded
   answer should score higher than the ungrounded one (ties count 0.5).

Run: python -m bench.quality.faithfulness_terms
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from judge.cli.demo import demo_dir
from judge.metrics.overlap import unsourced_terms

HERE = Path(__file__).resolve().parent
SAMPLES = demo_dir() / "samples.json"
WIKIEVAL = HERE.parents[2] / "shared" / "judge-quality" / "wikieval.jsonl"


def hand_judged() -> None:
    """Flagged claims among the careful judge's supported and unsupported ones."""
    samples = json.loads(SAMPLES.read_text(encoding="utf-8"))["samples"]
    flagged = {"supported": 0, "other": 0}
    total = {"supported": 0, "other": 0}
    examples = []
    for s in samples:
        j = s.get("judgments", {})
        for side in ("answer", "truth"):
            for claim, v in zip(
                j.get(f"{side}_claims") or [], j.get(f"{side}_verdicts") or [], strict=True
            ):
                kind = "supported" if v["verdict"] == "supported" else "other"
                terms = unsourced_terms(claim, s["contexts"])
                total[kind] += 1
                flagged[kind] += bool(terms)
                if terms and kind == "supported":
                    examples.append(f"  {s['id']}: {claim!r} -> {terms}")
    print(f"hand-judged claims ({SAMPLES.name}, {len(samples)} samples):")
    print(
        f"  supported by the careful judge, flagged (false take-backs): "
        f"{flagged['supported']} of {total['supported']}"
    )
    print(f"  not supported by the careful judge, flagged: {flagged['other']} of {total['other']}")
    print("\n".join(examples))


def sentences(text: str) -> list[str]:
    """Sentence-sized pieces of an answer."""
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def share_sourced(answer: str, contexts: list[str]) -> float:
    """Share of the answer's sentences with no unsourced number or name."""
    pieces = sentences(answer)
    return sum(not unsourced_terms(p, contexts) for p in pieces) / len(pieces)


def wikieval() -> None:
    """Pairwise accuracy of the check alone on WikiEval's faithfulness pairs."""
    if not WIKIEVAL.exists():
        print(f"{WIKIEVAL} not found: WikiEval part skipped")
        return
    items = [json.loads(x) for x in WIKIEVAL.read_text(encoding="utf-8").splitlines() if x]
    for first in (12, len(items)):
        wins = ties = 0
        for item in items[:first]:
            good = share_sourced(item["answer_stripped"], item["context_v1"])
            bad = share_sourced(item["ungrounded_answer"], item["context_v1"])
            wins += good > bad
            ties += good == bad
        accuracy = (wins + ties / 2) / first
        print(
            f"WikiEval faithfulness pairs, first {first}: check alone {accuracy:.2f} "
            f"({wins} right, {ties} tied, {first - wins - ties} wrong)"
        )


if __name__ == "__main__":
    hand_judged()
    wikieval()
