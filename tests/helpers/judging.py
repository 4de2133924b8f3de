"""One sample about Python and a scripted judge for it: the heuristic judge of judge.testing
with a way to answer one verdict short."""

from __future__ import annotations

import json

from judge.testing import heuristic_judge

QUESTION = "Who created Python?"
ANSWER = "Guido van Rossum created Python. Python was released in 1991. It runs on Mars."
CONTEXTS = [
    "Python was created by Guido van Rossum.",
    "Python was first released in 1991.",
    "Bananas are yellow.",
]
TRUTH = "Guido van Rossum created Python."
GOOD = {"question": QUESTION, "answer": ANSWER, "contexts": CONTEXTS, "ground_truth": TRUTH}


def which(body: dict) -> str:
    system = body["messages"][0]["content"]
    prefixes = {
        "You split": "claims",
        "You check numbered": "verify",
        "You write": "reverse",
        "You judge": "grade",
        "You check citations": "citations",
    }
    return next(kind for prefix, kind in prefixes.items() if system.startswith(prefix))


def judge_handler(body: dict, *, drop_verdict: bool = False) -> str:
    """heuristic_judge (sentences are claims, word overlap decides support), optionally
    answering one verdict short."""
    reply = heuristic_judge(body)
    if drop_verdict and which(body) == "verify":
        verdicts = json.loads(reply)["verdicts"]
        return json.dumps({"verdicts": verdicts[:-1]})
    return reply
