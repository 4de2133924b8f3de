"""Conversations of a test set played with a conversational app, turn by turn.

A test set may hold conversations (one per line, the shape `judge.conversations` reads) in
place of questions. The test set gives the user's side: each user message is asked of the
app in order, with the messages before it (the app's own earlier answers among them), and
the app's reply is the assistant message after it. An assistant message of the test set
right after a user message is that turn's slot: its labels (`ground_truth`, `relevance`,
`expected_tools`, any other field) are the turn's, and what it recorded (content,
contexts, retrieved ids, tool calls) is replaced by the app's reply. System messages and
an assistant message before the first user message (a scripted greeting) are kept as
written and given to the app in the history; tool messages are refused (the app makes its
own tool calls).

The output is the conversation in the same shape, each assistant turn filled with the
app's answer, contexts, retrieved ids and scores, extra keys, latency and error, so
`judge eval` reads it back as conversations and judges each turn with the conversation
before it. A turn the app failed on records its error, and the turns after it, which
cannot be played without its answer, record a `NotPlayed` error naming it: a conversation
is never judged as complete when it is not.

Conversations are played concurrently, each one's turns in order. Each turn's outcome goes
to the progress file as it comes, keyed by what the app was given (the question, the
messages before it, the names of the turn's columns): a rerun reuses the answered turns
(an earlier turn's stored answer gives the next turn's history, and so its key) and asks
again from the first turn without an answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.aio import gather_or_cancel
from judge.conversations import (
    CONVERSATION_KEYS,
    ID_KEYS,
    RAGAS_MESSAGES,
    TURNS_KEYS,
    BadConversation,
    conversation_id,
    is_conversation,
    role_and_content,
)
from judge.errors import InputFormatError, JudgeError
from judge.experiments.app import RESERVED, App
from judge.experiments.calls import (
    ERROR,
    LATENCY,
    AppRunner,
    CallStats,
    ProgressFile,
    TurnQuestion,
    ask,
    checked_rows,
)
from judge.json_values import lone_surrogate_in
from judge.run.progress import DEFAULT_INTERVAL, Progress

# What an assistant message of the test set recorded, replaced by the app's reply: its
# text, its contexts under every name the reader takes, its ranking, its tool calls and
# standalone query, and a run's own record of the call.
_RECORDED = frozenset(
    {
        "role",
        "type",
        "content",
        "contexts",
        "retrieved_contexts",
        "retrieval_context",
        "retrieved_ids",
        "retrieved_scores",
        "tools_called",
        "query",
        LATENCY,
        ERROR,
    }
)
# Columns of a turn's row that the conversation reader sets: a reply's extra key may not
# take one (it would be lost), nor a name judge reads as an input (`RESERVED`).
_TURN_COLUMNS = ("conversation_id", "turn", "history", "conversation_reference")
NOT_PLAYED = "NotPlayed"


@dataclass(frozen=True)
class Chat:
    """One conversation of the test set, as it is played.

    Attributes:
        number: its position in the test set, from 0.
        id: its id (its id field, else its number).
        fields: the conversation's own fields (its id first), kept on its output line.
        messages: the played conversation's messages: system messages, a greeting and
            the user's messages as written, and after each user message its slot (an
            assistant message holding the turn's labels alone, filled by the app).
        slots: the slots' 1-based positions in `messages`, in order.
    """

    number: int
    id: str
    fields: dict[str, Any]
    messages: tuple[dict[str, Any], ...]
    slots: tuple[int, ...]

    def turn_id(self, position: int) -> str:
        """The id of the turn at a slot's position, as `judge eval` names its row."""
        return f"{self.id}#{position}"

    def columns(self, position: int) -> dict[str, Any]:
        """The turn's columns: its labels and the conversation's fields, and the names the
        reader gives its row (a reply's extra key may not take one)."""
        return {
            **self.fields,
            **self.messages[position - 1],
            **dict.fromkeys(("content", *_TURN_COLUMNS)),
        }

    def played(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The output line: the conversation with its slots filled from the app's part of
        each turn's row (in order; a turn without one, after a failure, not played)."""
        messages = [dict(m) for m in self.messages]
        failed: tuple[int, str] | None = None
        for index, position in enumerate(self.slots):
            labels = {k: v for k, v in self.messages[position - 1].items() if k != "role"}
            row = rows[index] if index < len(rows) and failed is None else None
            if row is None:
                why = (
                    f"the app failed at turn {failed[0]} of this conversation ({failed[1]}), "
                    "so the conversation could not go on"
                    if failed is not None
                    else "the conversation was not played this far"
                )
                error = {"type": NOT_PLAYED, "message": f"not asked: {why}; rerun to ask it"}
                filled = {"content": "", **labels, LATENCY: None, ERROR: error}
            elif row.get(ERROR) is not None:
                failed = position, str(row[ERROR].get("type"))
                filled = {"content": "", **labels, LATENCY: row.get(LATENCY), ERROR: row[ERROR]}
            else:
                own = {
                    k: v
                    for k, v in row.items()
                    if k not in ("answer", LATENCY, ERROR)
                    and k not in labels
                    and k not in _NOT_THE_APPS
                }
                filled = {"content": row["answer"], **own, **labels}
                filled.update({LATENCY: row[LATENCY], ERROR: None})
            messages[position - 1] = {"role": "assistant", **filled}
        return {**self.fields, "turns": messages}


_NOT_THE_APPS = frozenset(RESERVED) - {LATENCY, ERROR} | frozenset(_TURN_COLUMNS)


def read_chat(number: int, record: Mapping[str, Any]) -> Chat:
    """A conversation of the test set as it is played; `BadConversation` says what keeps
    it from being played (no user message, a tool message, two answers to one message).

    Args:
        number: its position in the test set, from 0.
        record: the conversation (ours, DeepEval's or RAGAS's shape).
    """
    cid = conversation_id(record, number)
    if not is_conversation(record):
        raise BadConversation(
            f"record {number} is not a conversation (no list of messages under "
            f"{', '.join(map(repr, CONVERSATION_KEYS))}), as the test set's first one is: "
            "give conversations alone, one per line"
        )
    where = lone_surrogate_in(record)
    if where is not None:  # no file can hold it: refused, not played
        raise BadConversation(
            f"conversation {cid!r} holds a lone surrogate ({where}): text that is not "
            "Unicode (half of a UTF-16 pair, from a broken \\u escape or a wrong decoding)"
        )
    key = next((k for k in TURNS_KEYS if isinstance(record.get(k), list)), RAGAS_MESSAGES)
    given = record.get(key)
    if not isinstance(given, list):
        raise BadConversation(f"conversation {cid!r}: {key} must be a list of messages")
    fields = {k: v for k, v in record.items() if k not in (*TURNS_KEYS, RAGAS_MESSAGES)}
    if not any(k in fields for k in ID_KEYS):
        fields = {"id": cid, **fields}
    messages: list[dict[str, Any]] = []
    slots: list[int] = []
    open_slot = False  # the last message is a user message's slot, no labels given yet
    for position, message in enumerate(given, start=1):
        role, content = role_and_content(message, cid, position)
        where = f"conversation {cid!r}, message {position}"
        if role == "user":
            if not content.strip():
                raise BadConversation(f"{where}: a user message with no text to ask")
            kept = {k: v for k, v in message.items() if k not in ("role", "type", "content")}
            messages.append({"role": "user", "content": content, **kept})
            messages.append({"role": "assistant"})
            slots.append(len(messages))
            open_slot = True
        elif role == "assistant" and open_slot:  # this turn's labels; its text is replaced
            messages[-1].update({k: v for k, v in message.items() if k not in _RECORDED})
            open_slot = False
        elif role == "assistant" and not slots:  # a greeting, before the user says anything
            messages.append({"role": "assistant", "content": content})
        elif role == "assistant":
            raise BadConversation(
                f"{where}: an assistant message that answers no user message (the app gives "
                "one answer to each user message, in the slot right after it): leave it out"
            )
        elif role == "tool":
            raise BadConversation(
                f"{where}: a tool message: a test set gives the user's side of a "
                "conversation, and the app makes its own tool calls; leave it out"
            )
        else:  # system
            messages.append({"role": role, "content": content})
            open_slot = False
    if not slots:
        raise BadConversation(f"conversation {cid!r} has no user message: nothing to ask")
    return Chat(number, cid, fields, tuple(messages), tuple(slots))


def read_chats(records: Sequence[Mapping[str, Any]], source: str) -> list[Chat]:
    """Every conversation of a test set as it is played; an `InputFormatError` names the
    first that cannot be, and two conversations with one id."""
    chats: list[Chat] = []
    seen: dict[str, int] = {}
    for number, record in enumerate(records):
        try:
            chat = read_chat(number, record)
        except BadConversation as exc:
            raise InputFormatError(f"{source}: {exc}") from None
        first = seen.setdefault(chat.id, number)
        if first != number:
            raise InputFormatError(
                f"{source}: conversations {first} and {number} have the same id {chat.id!r}: "
                "give each conversation its own id"
            )
        chats.append(chat)
    return chats


async def play_all(
    app: App,
    chats: Sequence[Chat],
    progress_file: ProgressFile,
    *,
    concurrency: int,
    timeout: float,
    progress: bool = True,
    progress_interval: float = DEFAULT_INTERVAL,
) -> tuple[list[list[int]], CallStats]:
    """Where each conversation's turns are in the progress file (in order, up to the first
    that failed), and the call figures (asked and reused; the rest is counted as the
    outputs are written: `write_played`). Turns answered in the progress file are reused.

    Args:
        app: the loaded conversational app.
        chats: the test set's conversations.
        progress_file: where finished turns go as they finish.
        concurrency: conversations in flight at once (each has one call in flight).
        timeout: seconds one call may take.
        progress, progress_interval: as for `judge.evaluate`.
    """
    if concurrency < 1:
        raise JudgeError(f"app_concurrency={concurrency}: give at least 1")
    if not timeout > 0:
        raise JudgeError(f"app_timeout={timeout}: give a positive number of seconds")
    done = progress_file.load()
    stats = CallStats()
    offsets: list[list[int]] = [[] for _ in chats]
    bar = Progress(
        sum(len(chat.slots) for chat in chats),
        None,
        mode=None if progress else "off",
        interval=progress_interval,
        unit="turns asked of the app",
    )
    runner = AppRunner()
    pending = iter(enumerate(chats))
    numbers = iter(range(1 << 62))  # the turns' numbers, across conversations

    async def play(index: int, chat: Chat) -> None:
        messages = [dict(m) for m in chat.messages]
        for count, position in enumerate(chat.slots):
            history = tuple((m["role"], m["content"]) for m in messages[: position - 2])
            question = TurnQuestion(
                next(numbers),
                chat.turn_id(position),
                messages[position - 2]["content"],
                chat.columns(position),
                history,
            )
            row: Mapping[str, Any] | None = None
            found = done.get(progress_file.key_of(question))
            if found is not None and found[1].isdisjoint(question.columns):
                row = checked_rows(progress_file, [found[0]])[0]
                if row.get(ERROR) is None:
                    offsets[index].append(found[0])
                    stats.reused += 1
                else:  # its line changed since: asked again
                    row = None
            if row is None:
                offset = progress_file.write(question, await ask(app, question, timeout, runner))
                row = checked_rows(progress_file, [offset])[0]  # as written: maybe an error
                offsets[index].append(offset)
                stats.asked += 1
            bar.advance()
            if row.get(ERROR) is not None:  # the later turns cannot be played
                bar.advance(len(chat.slots) - count - 1)
                return
            messages[position - 1] = {"role": "assistant", "content": row["answer"]}

    async def worker() -> None:
        for index, chat in pending:
            await play(index, chat)

    started = time.monotonic()
    bar.start()
    try:
        progress_file.open()
        await gather_or_cancel(worker() for _ in range(min(concurrency, len(chats))))
    finally:
        runner.close()
        bar.close()
        progress_file.close()
    stats.seconds = time.monotonic() - started
    return offsets, stats


def played(
    chats: Sequence[Chat],
    progress_file: ProgressFile,
    offsets: Sequence[Sequence[int]],
    stats: CallStats,
) -> Iterator[dict[str, Any]]:
    """Each conversation's output line, in the test set's order, its turns read back from
    the progress file; each turn's latency and error counted in `stats` as it goes."""
    for chat, where in zip(chats, offsets, strict=True):
        line = chat.played(checked_rows(progress_file, where))
        for position in chat.slots:
            turn = line["turns"][position - 1]
            if turn[LATENCY] is not None:
                stats.latencies.append(turn[LATENCY])
            if turn[ERROR] is not None:
                stats.errors[turn[ERROR]["type"]] += 1
        yield line


def stand_in_lines(chats: Sequence[Chat], reply: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Each conversation's output line as the app's replies would make it, every turn
    answered with `reply` (a stand-in: the test set is checked before the app is asked)."""
    row = {**reply, LATENCY: 0.0, ERROR: None}
    for chat in chats:
        yield chat.played([row] * len(chat.slots))
