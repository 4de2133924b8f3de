"""What the conversation before a turn says, as evidence for the turn's claims.

A turn's answer is checked against its contexts and, in its own block of the same call
(the `verify_turn` prompt), what the conversation said before it: each user, system and
tool message as written, and the claims of earlier answers that were themselves supported.
An earlier answer's claim that nothing supported is not evidence: a hallucination repeated
is still one. The verdict names the piece of evidence it rests on, so each claim's source
is `contexts` (a retrieved context), `history` (the conversation) or none.

The block is bounded (`given_for`): a long chat's whole history in every turn's call made
its prompts grow with the chat (1.63x a single-turn row's at 16 exchanges).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judge.json_values import sha256_hex
from judge.metrics.overlap import content_tokens
from judge.samples import Message, Sample, last_messages, prefix_chain, question_start, said

CONTEXTS, HISTORY = "contexts", "history"

# How each kind of message is quoted to the judge: who said it matters (a user's statement
# about themselves is evidence of what they want, a tool's result of what it returned).
# Short: the verify call carries every piece, so a long chat's prompt grows by them (a
# 40-character prefix per piece was a sixth of a 16-exchange chat's verify prompt).
_SPEAKER = {
    "user": "user: ",
    "system": "system: ",
    "tool": "tool: ",
    "assistant": "assistant, verified: ",
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
    seen: set[str] = set()  # a claim repeated in later answers is one piece, the first
    for message, claims in zip(history, supported, strict=True):
        if message.role == "assistant":
            texts = [_SPEAKER["assistant"] + c for c in claims]
        else:
            texts = [_SPEAKER[message.role] + message.content] if said(message) else []
        for text in texts:
            if text not in seen:
                seen.add(text)
                found.append(Said(text, message.role, message.turn))
    return found


class SaidSoFar:
    """`said_before` of a history grown turn by turn: a turn's is its previous turn's, then
    that turn's supported claims and the messages after it (`then`), so a long chat's turns
    cost their new messages, not their whole history each. The turns of one conversation
    share one list (each knows its length in it); a turn going on from a turn another one
    already went on from (two conversations of one id, one beginning) goes on from a copy.
    """

    def __init__(self) -> None:
        self._store: list[Said] = []
        self._seen: set[str] = set()  # the texts of the store: a claim repeated is one piece
        self._length = 0

    def items(self) -> list[Said]:
        """The evidence so far, in order (as `said_before` gives it)."""
        return self._store[: self._length]

    def then(self, history: Sequence[Message], supported: Sequence[Sequence[str]]) -> SaidSoFar:
        """The evidence of the history so far followed by `history` (`supported`, per
        message: as for `said_before`)."""
        after = SaidSoFar()
        if len(self._store) == self._length:
            after._store, after._seen = self._store, self._seen
        else:  # another turn went on from here: the shared list holds its evidence
            after._store = self._store[: self._length]
            after._seen = {item.text for item in after._store}
        for message, claims in zip(history, supported, strict=True):
            for text in _texts(message, claims):
                if text not in after._seen:
                    after._seen.add(text)
                    after._store.append(Said(text, message.role, message.turn))
        after._length = len(after._store)
        return after


def _texts(message: Message, claims: Sequence[str]) -> list[str]:
    """A message's pieces of evidence: an assistant's supported claims (`claims`), another
    speaker's message as written (when it says something)."""
    if message.role == "assistant":
        return [_SPEAKER["assistant"] + c for c in claims]
    return [_SPEAKER[message.role] + message.content] if said(message) else []


# The characters of conversation a turn's verify call is given at most (`given_for`), about
# 300 tokens: a third of a typical turn's verify prompt, so a long chat's turns cost at
# most about 1.4x a single-turn row's (bench/quality/conversation_cost.py).
CONVERSATION_BUDGET = 1200


def given_for(
    conversation: Sequence[Said], claims: Sequence[str], budget: int = CONVERSATION_BUDGET
) -> list[Said]:
    """The pieces of the conversation a turn's verify call is given, in conversation order:
    all of them when their texts fit in `budget` characters; else, whole pieces while they
    fit, those sharing the most content words (`content_tokens`) with the turn's claims
    first, the later piece first at a tie (the first chosen is given even when longer than
    the budget). A piece sharing no word with any claim can hardly be a claim's evidence;
    the user's statements of long ago stay in reach when the claims name what they said.
    """
    if sum(len(item.text) for item in conversation) <= budget:
        return list(conversation)
    wanted = frozenset().union(*(content_tokens(claim) for claim in claims))
    shared = [len(content_tokens(item.text) & wanted) for item in conversation]
    ranked = sorted(range(len(conversation)), key=lambda k: (-shared[k], -k))
    chosen: list[int] = []
    used = 0
    for k in ranked:
        size = len(conversation[k].text)
        if not chosen or used + size <= budget:
            chosen.append(k)
            used += size
    return [conversation[k] for k in sorted(chosen)]


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
    """Whether the conversation gives a turn evidence besides its question: anything said
    before the question, or since it (a tool's result, an earlier answer to it)."""
    start = question_start(history)
    return any(said(m) for k, m in enumerate(history) if k < start or m.role != "user")


# How a report's name of a piece of the conversation starts (`history_name`).
HISTORY_NAME = "conversation, turn "


def history_name(source: dict[str, Any]) -> str:
    """How a report names a piece of the conversation a claim rests on."""
    return f"{HISTORY_NAME}{source['turn']} ({source['role']})"


def conversation_lines(history: Sequence[Message], messages: int) -> list[str]:
    """The last `messages` user and assistant messages before a turn's question, each as
    "role: text" (what a judge reads as the conversation a question continues)."""
    shown = last_messages(history, question_start(history), messages, _spoken)
    return [f"{m.role}: {m.content}" for m in shown]


def _spoken(message: Message) -> bool:
    return message.role in ("user", "assistant") and said(message)


def retriever_query(extra: dict[str, Any]) -> str | None:
    """A turn's recorded retriever query (`query`), when it is a non-blank string."""
    query = extra.get("query")
    return query if isinstance(query, str) and query.strip() else None


def whole_conversation(history: Sequence[Message], answer: str) -> list[str]:
    """A conversation to its last answer as "role: text" lines (messages that say
    something), the answer last."""
    lines = [f"{m.role}: {m.content}" for m in history if said(m)]
    return [*lines, f"assistant: {answer}"]


def _link(previous: str, role: str, content: str, turn: int | None, contexts: Sequence[str]) -> str:
    """The key of a message after the messages keyed `previous`."""
    kept = list(contexts) if any(c.strip() for c in contexts) else []  # blank ones: none
    data = json.dumps([previous, role, content, turn, kept], ensure_ascii=False)
    return sha256_hex(data)


def history_keys(conversation_id: str | None, history: Sequence[Message]) -> list[str]:
    """Keys of a turn's history: the first of its conversation's id alone, then one per
    message, of every message up to it (`keys[i + 1]` ends with `history[i]`): an earlier
    answer's key is the key of the turn it answered (`turn_key`). A conversation's keys
    are computed once for all its turns (`judge.samples.prefix_chain`)."""
    root = sha256_hex(json.dumps([conversation_id], ensure_ascii=False))
    keys = prefix_chain(history, (_KEYS, conversation_id), root, _message_link)
    return keys[: len(history) + 1]


_KEYS = "judge.metrics.turns.history_keys"  # the chain's name in a conversation's thread


def _message_link(previous: str, m: Message) -> str:
    return _link(previous, m.role, m.content, m.turn, m.contexts)


def turn_key(keys: Sequence[str], sample: Sample) -> str:
    """The key of a turn: its history's (`history_keys`), then its answer and contexts."""
    return _link(keys[-1], "assistant", sample.answer or "", sample.turn, sample.contexts)
