"""Labelled rows and the prompts' markers shared by the tests of judge align (tests/labels/)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from judge import LLM
from judge.testing import FakeLLMServer, heuristic_judge
from judge.testing.replies import data_blocks, message_text

CANARIES = json.loads(
    (Path(__file__).resolve().parents[2] / "fixtures" / "injection" / "canaries.json").read_text(
        encoding="utf-8"
    )
)["canaries"]


def user_text(body: dict[str, Any]) -> str:
    return next(message_text(m["content"]) for m in body["messages"] if m["role"] == "user")


def shown_a_person(body: dict[str, Any]) -> str:
    """A judge that marks every claim supported unless the prompt shows it examples a
    person checked; then it checks each claim as the heuristic judge does."""
    system = message_text(body["messages"][0]["content"])
    if system.startswith("You check numbered") and "examples" not in data_blocks(user_text(body)):
        claims = data_blocks(user_text(body))["claims"]
        verdicts = [
            {"claim": i, "reason": "looks right", "verdict": "supported", "context": 0}
            for i in range(len(claims))
        ]
        return json.dumps({"verdicts": verdicts})
    return heuristic_judge(body)


def labelled(n: int) -> list[dict[str, Any]]:
    """n rows, every other one unfaithful (two of its three claims in no context); each
    row's marker (m<i>x) is in its answer, so a prompt holding it shows that row."""
    rows = []
    for i in range(n):
        faithful = i % 2 == 0
        tail = (
            "Python was created by Guido van Rossum. Paris is the capital of France."
            if faithful
            else "Python was created by Larry Wall. Paris is the capital of Spain."
        )
        rows.append(
            {
                "id": f"q{i}",
                "question": f"What holds for m{i}x?",
                "answer": f"Marker m{i}x is here. {tail}",
                "contexts": [
                    f"Marker m{i}x is here.",
                    "Python was created by Guido van Rossum.",
                    "Paris is the capital of France.",
                ],
                "human": 1 if faithful else 0,
            }
        )
    return rows


def duplicated(n: int) -> list[dict[str, Any]]:
    """n distinct rows, each twice under two ids (one question labelled by two people)."""
    rows = []
    for row in labelled(n):
        rows.append(row)
        rows.append({**row, "id": row["id"] + "-again"})
    return rows


def fake_judge(server: FakeLLMServer) -> LLM:
    """The fake server's judge model, never retried (a refused request is one request)."""
    return LLM("openai/judge", api_base=server.base_url, api_key="k", max_retries=0)


def markers(text: str) -> set[int]:
    return {int(m) for m in re.findall(r"m(\d+)x", text)}


def example_markers(server: FakeLLMServer) -> set[int]:
    """The rows shown as examples in any prompt the server received."""
    found: set[int] = set()
    for request in server.requests:
        if request.body and "messages" in request.body:
            blocks = data_blocks(user_text(request.body))
            if "examples" in blocks:
                found |= markers(json.dumps(blocks["examples"]))
    return found
