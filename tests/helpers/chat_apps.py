"""Conversational apps for the experiment tests: the keyword retriever of `apps` asked with
the conversation so far, each call logged (question and history) to $JUDGE_TEST_CALLS when
set; one that fails on bananas while the file $JUDGE_TEST_FAIL exists."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.helpers.apps import answer
from tests.helpers.chats import user

# Two conversations: the first gives its first turn's labels on the assistant slot, and its
# second user message has none; the second has a system message and three user messages.
CONVERSATIONS = [
    {
        "id": "c1",
        "topic": "python",
        "turns": [
            {"role": "user", "content": "Who created Python?"},
            {
                "role": "assistant",
                "content": "A recorded answer, replaced by the app's.",
                "contexts": ["A recorded context."],
                "ground_truth": "Guido van Rossum created Python.",
                "relevance": {"c1": 2, "c4": 1},
            },
            {"role": "user", "content": "When was Python first released?"},
        ],
    },
    {
        "id": "c2",
        "turns": [
            {"role": "system", "content": "Answer from the chunks."},
            {"role": "user", "content": "Where is the Eiffel Tower?"},
            {"role": "user", "content": "What colour are ripe bananas?"},
            {"role": "user", "content": "What is the capital of France?"},
        ],
    },
]


def _log(question: str, history: list[dict[str, str]]) -> None:
    calls = os.environ.get("JUDGE_TEST_CALLS")
    if calls:
        with Path(calls).open("a", encoding="utf-8") as log:
            log.write(json.dumps({"question": question, "history": history}) + "\n")


def chat(question: str, history: list[dict[str, str]]) -> dict[str, Any]:
    """The baseline answer, saying how many messages came before; the history is logged."""
    _log(question, history)
    failing = os.environ.get("JUDGE_TEST_FAIL")
    if failing and Path(failing).exists() and "bananas" in question:
        raise ValueError("no banana index")
    reply = answer(question)
    history.append({"role": "user", "content": "changed by the app"})  # stays the app's
    return {**reply, "seen": len(history) - 1}


async def async_messages(messages: list[dict[str, str]]) -> dict[str, Any]:
    """An async app given the conversation ending with the question (OpenAI-style)."""
    *history, last = messages
    assert last["role"] == "user"
    return chat(last["content"], history)


SYSTEM = {"role": "system", "content": "Answer from the chunks."}


def said(question: str) -> dict[str, str]:
    """What the app answers a question with (its best chunk), as a history message."""
    return {"role": "assistant", "content": answer(question)["answer"]}


# What the app must have been given at each turn: the messages before the question, its
# own earlier answers among them.
EXPECTED = {
    "Who created Python?": [],
    "When was Python first released?": [user("Who created Python?"), said("Who created Python?")],
    "Where is the Eiffel Tower?": [SYSTEM],
    "What colour are ripe bananas?": [
        SYSTEM,
        user("Where is the Eiffel Tower?"),
        said("Where is the Eiffel Tower?"),
    ],
    "What is the capital of France?": [
        SYSTEM,
        user("Where is the Eiffel Tower?"),
        said("Where is the Eiffel Tower?"),
        user("What colour are ripe bananas?"),
        said("What colour are ripe bananas?"),
    ],
}
