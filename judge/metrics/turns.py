"""What the conversation before a turn says, as evidence for the turn's claims.

A turn's answer is checked against its contexts and, after them in the same verify call,
what the conversation said before it: each user, system and tool message as written, and
the claims of earlier answers that were themselves supported. An earlier answer's claim
that nothing supported is not evidence: a hallucination repeated is still one. The verdict
names the piece of evidence it rests on, so each claim's source is `contexts` (a retrieved
context), `history` (the conversation) or none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judge.samples import Message, question_start, said

CONTEXTS, HISTORY = "contexts", "history"

# How each kind of message is quoted to the judge: who said it matters (a user's statement
# about themselves is evidence of what they want, a tool's result of what it returned).
_SPEAKER = {
    "user": "The user said: ",
    "system": "The system said: ",
    "tool": "A tool returned: ",
    "assistant": "The assistant said earlier (supported): ",
}


@dataclass(frozen=True)
class Said:
    """One piece of the conversation as evidence: its text as the judge reads it, who said
    it, and the message's turn."""

    text: str
    role: str
    turn: int


def said_before(history: Sequence[Message], supported: Sequence[Sequence[str]]) -> list[Said]:
    """The evidence of the conversation `history`, in order: each user, system and tool
    message, and for each assistant message its claims in `supported` (per message of
    `history`: the supported claims of the turn it answered, empty for other messages)."""
    found: list[Said] = []
    for message, claims in zip(history, supported, strict=True):
        if message.role == "assistant":
            found += [Said(_SPEAKER["assistant"] + c, "assistant", message.turn) for c in claims]
        elif said(message):
            text = _SPEAKER[message.role] + message.content
            found.append(Said(text, message.role, message.turn))
    return found


def source_of(context: int | None, contexts: int, conversation: Sequence[Said]) -> dict[str, Any]:
    """The source a verdict names (its evidence number, the turn's `contexts` numbered
    first, then the conversation's): {"source": contexts | history | None} and, for the
    conversation, the message's "turn" and "role"."""
    if context is None:
        return {"source": None}
    if context < contexts:
        return {"source": CONTEXTS}
    item = conversation[context - contexts]
    return {"source": HISTORY, "turn": item.turn, "role": item.role}


def earlier_user_messages(history: Sequence[Message]) -> list[Message]:
    """The user's messages before a turn's question (what they stated before)."""
    return [m for m in history[: question_start(history)] if m.role == "user" and said(m)]


def has_earlier_messages(history: Sequence[Message]) -> bool:
    """Whether anything was said before a turn's question (evidence besides the question)."""
    return any(said(m) for m in history[: question_start(history)])


# How a report's name of a piece of the conversation starts (`history_name`).
HISTORY_NAME = "conversation, turn "


def history_name(source: dict[str, Any]) -> str:
    """How a report names a piece of the conversation a claim rests on."""
    return f"{HISTORY_NAME}{source['turn']} ({source['role']})"
