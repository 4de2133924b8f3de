"""Conversation records for tests, in the shape `judge.conversations` reads: OpenAI-style
messages (`user`, `assistant`) and a conversation holding them (`conversation`)."""

from __future__ import annotations

from typing import Any


def user(text: str) -> dict[str, Any]:
    """A user message."""
    return {"role": "user", "content": text}


def assistant(text: str, *contexts: str, **extra: Any) -> dict[str, Any]:
    """An assistant message with its contexts, then any other field (retrieved_ids,
    trace_id, ground_truth...) in the order given."""
    return {"role": "assistant", "content": text, "contexts": list(contexts), **extra}


def conversation(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A conversation record of `messages` (its id "c" unless `fields` give one)."""
    return {"id": "c", **fields, "turns": list(messages)}
