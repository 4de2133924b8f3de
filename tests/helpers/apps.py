"""Small RAG apps for the experiment tests: a keyword retriever over five chunks and an
answer made from the best chunk, as a function, a coroutine function and a callable
object; and apps that fail in each way an app can."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

CHUNKS = {
    "c1": "Python was created by Guido van Rossum and first released in 1991.",
    "c2": "The Eiffel Tower is in Paris and was finished in 1889.",
    "c3": "Bananas are yellow when ripe and grow in tropical climates.",
    "c4": "Guido van Rossum worked at Google and Dropbox.",
    "c5": "Paris is the capital of France.",
}

QUESTIONS = [
    {
        "id": "q1",
        "question": "Who created Python?",
        "ground_truth": "Guido van Rossum created Python.",
        "relevance": {"c1": 2, "c4": 1},
    },
    {
        "id": "q2",
        "question": "Where is the Eiffel Tower?",
        "ground_truth": "The Eiffel Tower is in Paris.",
        "relevance": {"c2": 2, "c5": 1},
    },
    {
        "id": "q3",
        "question": "What colour are ripe bananas?",
        "ground_truth": "Ripe bananas are yellow.",
        "relevance": {"c3": 2},
    },
    {
        "id": "q4",
        "question": "When was Python first released?",
        "ground_truth": "Python was first released in 1991.",
        "relevance": {"c1": 2},
    },
    {
        "id": "q5",
        "question": "What is the capital of France?",
        "ground_truth": "Paris is the capital of France.",
        "relevance": {"c5": 2},
    },
]


def words(text: str) -> set[str]:
    return {w.strip("?.,").lower() for w in text.split() if len(w) > 3}


def retrieve(question: str, k: int = 3) -> list[tuple[str, float]]:
    """Chunks ranked by words shared with the question (ties by id)."""
    scored = [(cid, float(len(words(question) & words(text)))) for cid, text in CHUNKS.items()]
    return sorted(scored, key=lambda item: (-item[1], item[0]))[:k]


def answer(question: str) -> dict[str, Any]:
    """The baseline app: top 3 chunks, the answer is the best one."""
    ranked = retrieve(question)
    return {
        "answer": CHUNKS[ranked[0][0]],
        "contexts": [CHUNKS[cid] for cid, _ in ranked],
        "retrieved_ids": [cid for cid, _ in ranked],
        "retrieved_scores": [score for _, score in ranked],
        "pipeline": "baseline",
    }


def reversed_ranking(question: str) -> dict[str, Any]:
    """A worse app: the same chunks in the reverse order."""
    reply = answer(question)
    for key in ("contexts", "retrieved_ids", "retrieved_scores"):
        reply[key] = reply[key][::-1]
    reply["answer"] = reply["contexts"][0]
    return reply


async def async_answer(question: str) -> dict[str, Any]:
    await asyncio.sleep(0.01)
    return answer(question)


class Pipeline:
    """A callable object, as a configured pipeline is."""

    def __init__(self, k: int = 3):
        self.k = k

    def __call__(self, question: str) -> dict[str, Any]:
        reply = answer(question)
        return {**reply, "contexts": reply["contexts"][: self.k]}


pipeline = Pipeline(k=2)


def fails_on_bananas(question: str) -> dict[str, Any]:
    if "bananas" in question:
        raise ValueError("no banana index")
    return answer(question)


def hangs_on_bananas(question: str) -> dict[str, Any]:
    if "bananas" in question:
        time.sleep(30)
    return answer(question)


async def async_hangs_on_bananas(question: str) -> dict[str, Any]:
    if "bananas" in question:
        await asyncio.sleep(30)
    return answer(question)


def malformed_on_bananas(question: str) -> Any:
    if "bananas" in question:
        return {"answer": 42, "contexts": []}
    return answer(question)


def counted(question: str) -> dict[str, Any]:
    """The baseline app, appending each question asked to $JUDGE_TEST_CALLS."""
    with Path(os.environ["JUDGE_TEST_CALLS"]).open("a", encoding="utf-8") as log:
        log.write(question + "\n")
    time.sleep(float(os.environ.get("JUDGE_TEST_SLEEP", "0")))
    return answer(question)


def by_row(row: dict[str, Any]) -> dict[str, Any]:
    """The baseline app given the whole test set row (its parameter is named row): it
    reports the columns it saw, and changes the row (which must not reach the output)."""
    reply = answer(row["question"])
    reply["seen"] = sorted(row)
    reply["expected"] = row["ground_truth"]
    row["ground_truth"] = "changed by the app"
    row["relevance"].clear()
    return reply


async def async_by_row(row: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(0.01)
    return by_row(row)


class RowPipeline:
    """A callable object given the whole row."""

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        return by_row(row)


# An error message a terminal would act on: NUL, an OSC title sequence, a bidi override.
CONTROL_ERROR = "no \x00index \u202eevil\x1b]0;pwned\x07 here"


def fails_with_control_characters(question: str) -> dict[str, Any]:
    if "bananas" in question:
        raise ValueError(CONTROL_ERROR)
    return answer(question)
