"""What the model adds to `context_focus` on WikiEval's context pairs, from a recorded run.

`bench/quality/wikieval.py` scores context_v1 against context_v2 with `context_focus`: the model
names the needed sentences, then a picked sentence sharing no content word with the
question or the reference is dropped. This replays those judgments from the run's cache
(no request is sent: a judgment not recorded is reported as missing) and splits the score:
- the model's picks alone (before the rule), and how many replies name every sentence;
- the rule alone (every sentence taken as needed), which needs no model;
- both, which is what `context_focus` reports.
Accuracy: context_v1 should score higher (a tie counts 0.5).

Run: python -m bench.quality.context_focus_picks --model openai/qwen --api-base http://127.0.0.1:8089/v1
     [--n 20] [--work bench/.wikieval/focus]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import judge
from bench.quality.wikieval import WORK, load, pair_accuracy, rule_alone
from judge.errors import JudgeError


def shares(evidence: dict[str, Any]) -> tuple[float, float, bool]:
    """(share picked by the model, share kept after the rule, whether every sentence was
    picked) from a row's `context_sentences` evidence."""
    total = sum(evidence["per_context"])
    kept = evidence["needed"]
    picked = sorted([*kept, *evidence.get("not_on_topic", [])])
    return len(picked) / total, len(kept) / total, picked == list(range(total))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-base", required=True, help="the recorded run's server URL")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--work", type=Path, default=WORK)
    args = parser.parse_args()
    llm = judge.LLM(model=args.model, api_base=args.api_base, api_key="x", max_retries=0)
    cache = judge.Cache(args.work / "judge-cache.sqlite", mode="replay")
    model, both, rule = [], [], []
    every, replies, missing = 0, 0, []
    for item in load(args.n):
        sides = [item["context_v1"], item["context_v2"]]
        rows = [
            {
                "question": item["question_stripped"],
                "answer": item["answer_stripped"],
                "contexts": c,
            }
            for c in sides
        ]
        try:
            result = judge.evaluate(
                rows, metrics=["context_focus"], llm=llm, cache=cache, progress=False
            )
        except JudgeError as exc:
            missing.append(f"{item['id']} ({type(exc).__name__})")
            continue
        if any("context_sentences" not in r.evidence for r in result.rows):
            missing.append(item["id"])
            continue
        split = [shares(r.evidence["context_sentences"]) for r in result.rows]
        model.append((split[0][0], split[1][0]))
        both.append((split[0][1], split[1][1]))
        rule.append((rule_alone(item, sides[0]), rule_alone(item, sides[1])))
        every += sum(s[2] for s in split)
        replies += 2
    print(f"WikiEval context pairs, first {args.n} questions, {args.model} (replayed)")
    print(f"pairs with both sides recorded: {len(both)}; missing: {', '.join(missing) or '-'}")
    if not both:
        return
    print(f"replies naming every sentence: {every} of {replies}")
    print(f"accuracy, the model's picks alone:  {pair_accuracy(model):.2f}")
    print(f"accuracy, the rule alone (no model): {pair_accuracy(rule):.2f}")
    print(f"accuracy, context_focus (both):      {pair_accuracy(both):.2f}")


if __name__ == "__main__":
    main()
