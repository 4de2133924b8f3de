"""A run for `judge annotate`'s tests, judged through the fake server by the heuristic
judge (a sentence is a claim, word overlap with the contexts decides its support): answers
with known claims and verdicts, and one row whose question and answer are hostile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from judge import LLM, evaluate
from judge.testing import FakeLLMServer
from tests.helpers.judging import judge_handler
from tests.helpers.labels import CONTEXTS, answer

# A question and an answer that would run script if the page put them in as HTML, with an
# escape sequence, a bidi override and a NUL among them.
HOSTILE_QUESTION = "<script>window.__pwned=1</script>\x1b[31m who\u202e is \x00 it?"
HOSTILE_ANSWER = (
    '<img src=x onerror="window.__pwned=2"><b>Python was created by Guido van Rossum</b>.'
)
HOSTILE_ID = "h1"
METRICS = ["faithfulness", "context_precision"]

# (supported, unsupported) claims of each row's answer: faithfulness s / (s + u).
CLAIMS = [(2, 0), (1, 1), (0, 2), (3, 0), (1, 2), (2, 1), (0, 1), (1, 0), (2, 2), (3, 1)]


def samples() -> list[dict[str, Any]]:
    """Ten rows of known faithfulness and the hostile one."""
    rows = [
        {
            "id": f"r{i}",
            "question": f"What do you know? ({i})",
            "answer": answer(s, u),
            "contexts": CONTEXTS,
            "ground_truth": "Python was created by Guido van Rossum.",
        }
        for i, (s, u) in enumerate(CLAIMS)
    ]
    rows.append(
        {
            "id": HOSTILE_ID,
            "question": HOSTILE_QUESTION,
            "answer": HOSTILE_ANSWER,
            "contexts": CONTEXTS,
            "ground_truth": "Python was created by Guido van Rossum.",
        }
    )
    return rows


def judge_flags(server: FakeLLMServer) -> list[str]:
    """The flags of a judging command against the fake server, as the run was judged."""
    return ["--model", "openai/judge-model", "--api-base", server.base_url, "--api-key", "k"]


def judged_run(folder: Path) -> Path:
    """Judge the rows through a fake server into `folder`; returns the folder."""
    with FakeLLMServer() as server:
        server.chat = judge_handler
        llm = LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=1)
        result = evaluate(samples(), metrics=METRICS, llm=llm, progress=False)
    result.write(folder)
    return folder
