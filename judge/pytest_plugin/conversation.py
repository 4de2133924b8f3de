"""A conversation in a test: its assistant turns as samples (`turn_samples`), and the
judged turns (`ConversationResult`) that `judge.assert_scores` checks turn by turn.

The turns are built by the library's own readers (`judge.conversations.turn_records`,
`judge.run.data.build_rows`), so a test judges a conversation exactly as `judge eval`
judges a line of a conversations file. Nothing here imports pytest or the LLM stack.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from judge.errors import InputFormatError

if TYPE_CHECKING:
    from judge.run.score import SampleResult
    from judge.samples import Sample

# A conversation given as its list of messages alone is named this.
UNNAMED = "conversation"


@dataclass
class ConversationResult:
    """The judged assistant turns of one conversation, in order.

    Attributes:
        id: the conversation's id.
        turns: one `SampleResult` per assistant turn, in the conversation's order; each
            sample has its `turn` (the assistant message's 1-based position among the
            messages), its `history` and its `conversation_id`.
    """

    id: str
    turns: list[SampleResult] = field(default_factory=list)

    def turn(self, position: int) -> SampleResult:
        """The judged turn at message `position` (1-based, as `Sample.turn` numbers it)."""
        for result in self.turns:
            if result.sample.turn == position:
                return result
        judged = ", ".join(str(r.sample.turn) for r in self.turns) or "none"
        raise KeyError(
            f"conversation {self.id!r} has no judged turn {position} (its turns: {judged}; "
            "a turn is an assistant message's position among all the messages, from 1)"
        )

    def means(self) -> dict[str, float]:
        """Each metric's mean over the turns where it is defined (NaN when none is)."""
        names: dict[str, None] = {}
        for result in self.turns:
            names.update(dict.fromkeys(result.scores))
        out = {}
        for metric in names:
            defined = [
                v for r in self.turns if not math.isnan(v := float(r.scores.get(metric, math.nan)))
            ]
            out[metric] = sum(defined) / len(defined) if defined else math.nan
        return out


def is_conversation_input(value: Any) -> bool:
    """Whether a value is a conversation a test can judge: a conversation record (ours,
    DeepEval's or RAGAS's shape) or a list of messages."""
    from judge.conversations import is_conversation

    if isinstance(value, Mapping):
        return is_conversation(value)
    return (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and bool(value)
        and all(isinstance(m, Mapping) and ("role" in m or "type" in m) for m in value)
    )


def turn_samples(conversation: Any, conversation_id: str | None = None) -> tuple[str, list[Sample]]:
    """The conversation's id and its assistant turns as samples, each with the messages
    before it.

    Args:
        conversation: a conversation record, `{"id": ..., "turns": [messages]}` (or
            DeepEval's or RAGAS's shape, as `judge eval` reads them), or its list of
            messages alone.
        conversation_id: its id, when the record has none (default: its `id`, else
            "conversation").

    Raises:
        InputFormatError: the conversation cannot be read, or has no assistant message
            after a user message; the message says which message and why.
    """
    from judge.conversations import CONVERSATION_ERROR, ID_KEYS, turn_records
    from judge.run.data import build_rows, resolve_columns

    if not is_conversation_input(conversation):
        raise InputFormatError(
            "a conversation is a mapping with its messages under 'turns' (e.g. {'id': 'c1', "
            "'turns': [{'role': 'user', 'content': ...}, {'role': 'assistant', 'content': "
            "..., 'contexts': [...]}]}), or the list of messages alone; got "
            f"{type(conversation).__name__}"
        )
    record = (
        dict(conversation) if isinstance(conversation, Mapping) else {"turns": list(conversation)}
    )
    if conversation_id is not None:
        record["id"] = conversation_id
    elif not any(record.get(k) not in (None, "") for k in ID_KEYS):
        record["id"] = UNNAMED
    records = turn_records(record, 0)
    cid = str(records[0]["conversation_id"])
    unreadable = records[0].get(CONVERSATION_ERROR)
    if isinstance(unreadable, str):
        raise InputFormatError(unreadable)
    names = dict.fromkeys(k for r in records for k in r)
    columns = resolve_columns(names, None, f"conversation {cid!r}")
    samples = []
    for row in build_rows(records, columns):
        if row.sample is None:
            turn = records[row.number].get("turn")
            raise InputFormatError(f"conversation {cid!r}, message {turn}: {row.error}")
        samples.append(row.sample)
    return cid, samples
