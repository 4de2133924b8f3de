"""Reasons that borrow a prompt example's subject: counted in a judge cache's replies.

A small model copies its prompt's few-shot example: a verdict's reason names the example's
garden or museum for a claim about a railway. A reason borrows when it holds a content word
of the example's data (its <claims>, <contexts>, <question> lines: `Prompt.example_text`)
that the request's own data lacks (`judge.metrics.overlap.borrowed_words`). Exact copies
of a reason written in the example's JSON are counted too, compared as the judges compare
them (`judge.metrics.prompts.reason_key`: case, spacing and the final stop ignored).
Counted per prompt version, from the cached raw replies (before judge drops or caps
anything), so two versions of a prompt can be compared on the same items.

Run: python -m bench.quality.borrowed_reasons CACHE.sqlite [CACHE...] --prompt verify
     --examples judge/prompts/verify.txt [OLD_VERIFY.txt ...]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

from bench.quality.prompt_check import example_reasons
from judge.metrics.overlap import borrowed_words
from judge.metrics.prompts import load_prompt, reason_key


def replies(cache: Path, prompt: str) -> list[tuple[str, str, list[dict]]]:
    """(prompt version, the request's user message, reply items) of every cached reply."""
    found = []
    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT prompt_version, request, response FROM judgments WHERE prompt = ?", (prompt,)
        )
        for version, request, response in rows:
            user = json.loads(request)["messages"][-1]["content"]
            for choice in json.loads(response)["choices"]:
                items = next((v for v in choice.values() if isinstance(v, list)), [])
                found.append((version, user, [i for i in items if isinstance(i, dict)]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("caches", nargs="+", type=Path)
    parser.add_argument("--prompt", default="verify", help="the prompt whose replies to count")
    parser.add_argument("--examples", nargs="+", type=Path, required=True)
    parser.add_argument("--show", type=int, default=5, help="print this many borrowed reasons")
    args = parser.parse_args()
    example = "\n".join(load_prompt(path).example_text for path in args.examples)
    verbatim = example_reasons(args.examples)
    seen: set[tuple[str, str, str]] = set()
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    shown: dict[str, list[str]] = defaultdict(list)
    for cache in args.caches:
        for version, user, items in replies(cache, args.prompt):
            if (version, user, json.dumps(items)) in seen:
                continue  # the same reply in two caches
            seen.add((version, user, json.dumps(items)))
            c = counts[version]
            c["replies"] += 1
            borrowed_here = False
            for item in items:
                reason = str(item.get("reason", ""))
                c["reasons"] += 1
                borrowed = borrowed_words(reason, example, [user])
                copied = reason_key(reason) in verbatim
                c["verbatim"] += copied
                if borrowed or copied:
                    c["borrowing_reasons"] += 1
                    borrowed_here = True
                    if len(shown[version]) < args.show:
                        shown[version].append(f"{reason!r} borrows {sorted(borrowed)}")
            c["replies_borrowing"] += borrowed_here
    print(f"verbatim example reasons: {len(verbatim)}")
    for version, c in counts.items():
        print(
            f"{args.prompt} {version}: {c['replies']} replies, {c['reasons']} reasons; "
            f"replies with a borrowing reason {c['replies_borrowing']}, reasons borrowing "
            f"{c['borrowing_reasons']} (verbatim {c['verbatim']})"
        )
        for line in shown[version]:
            print("   ", line)


if __name__ == "__main__":
    main()
