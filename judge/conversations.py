"""Conversations as evaluation input: each assistant turn becomes a row of its own, carrying
the conversation before it.

Three shapes are read, one conversation per record:
- ours, OpenAI-style: `{"id": "c1", "turns": [{"role": "user", "content": "..."},
  {"role": "assistant", "content": "...", "contexts": [...], "retrieved_ids": [...]}]}`;
- DeepEval's `ConversationalTestCase` (turns with `retrieval_context`, `tools_called`;
  `expected_outcome` as the conversation's reference);
- RAGAS's `MultiTurnSample` (`user_input` a list of messages typed human / ai / tool,
  `reference`).
A flat table whose rows are turns (`conversation_id` and `turn` columns beside question and
answer) is a fourth (`flat_turn_records`).

A turn record is what a row of single-turn data holds (question, answer, contexts,
ground_truth, retrieved_ids, relevance), plus `conversation_id`, `turn` (the assistant
message's 1-based position in the conversation) and `history` (every message before it,
the question's own included). The question is the user's message (several in a row:
joined) since the assistant last said something: an assistant message that only calls
tools (no content) is not a turn, and the tools' results stay in the history; every
assistant message that says something after it is a turn answering it (one saying "Let me
check." as it calls a tool, then the answer from the tool's result); the calls
made since the user's message (OpenAI's and RAGAS's `tool_calls` on assistant messages,
each given the content of the tool message answering it, by `tool_call_id` or else in
order) are the turn's `tools_called`, unless its answer gives DeepEval's. An assistant
message before any user message (a greeting) answers nothing: it stays in the history of
later turns and is not a row.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from judge.errors import InputFormatError
from judge.fields import cell_list
from judge.json_values import lone_surrogate_in
from judge.samples import ROLES, History, Message, Thread

# Keys of a conversation record.
TURNS_KEYS = ("turns", "messages")
RAGAS_MESSAGES = "user_input"
ID_KEYS = ("id", "conversation_id", "session_id")
REFERENCE_KEYS = ("reference", "expected_outcome")
# The keys a conversation record has one of.
CONVERSATION_KEYS = (*TURNS_KEYS, RAGAS_MESSAGES)
# The turn record's name for the conversation's reference: `reference` would be read as
# the turn's ground truth (RAGAS's name for it).
CONVERSATION_REFERENCE = "conversation_reference"
# The last turn of a conversation: the conversation-level metrics judge it.
FINAL_TURN = "final_turn"
# A turn's tool calls: DeepEval's field on the answer, else gathered from the assistant
# messages' `tool_calls` since the user's message, each with its tool message's result.
TOOLS_CALLED = "tools_called"
EXPECTED_TOOLS = "expected_tools"
# A conversation that cannot be read gives one record holding why: its row is an error.
CONVERSATION_ERROR = "conversation_error"
# An assistant message's record of the app's failure to answer (`judge experiment`).
APP_ERROR = "app_error"

# A message's names for its fields, ours first, then DeepEval's and RAGAS's.
_ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
_CONTEXTS_KEYS = ("contexts", "retrieved_contexts", "retrieval_context")
_TRUTH_KEYS = ("ground_truth", "reference", "expected_output")
# The reader's own marks of a turn's row: a message's or a conversation's field of one of
# these names is not copied onto its rows (an app writing `final_turn` on every answer had
# each turn's goal judged; one writing `conversation_error` hid a bad answer as an error).
_READER_KEYS = frozenset({FINAL_TURN, CONVERSATION_ERROR})
_MESSAGE_KEYS = frozenset({"role", "type", "content", *_CONTEXTS_KEYS, *_TRUTH_KEYS, *_READER_KEYS})
# Turn-record keys a conversation-level field of the same name must not overwrite.
_TURN_KEYS = frozenset(
    {
        "id",
        "question",
        "answer",
        "contexts",
        "ground_truth",
        "retrieved_ids",
        "relevance",
        "history",
        "conversation_id",
        "turn",
        CONVERSATION_REFERENCE,
    }
)


def _tool_calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An assistant message's tool calls (OpenAI's and RAGAS's `tool_calls`), copied."""
    found = message.get("tool_calls")
    if not isinstance(found, list):
        return []
    return [dict(call) for call in found if isinstance(call, Mapping)]


def _tool_result(calls: list[dict[str, Any]], message: Mapping[str, Any], content: str) -> None:
    """A tool message's content as the `output` of the call it answers: the call of its
    `tool_call_id` (OpenAI's), else the first call waiting (RAGAS's, in order); one that
    names an id no call has answers the first call without one (the calls lost their
    ids in an export, the results kept theirs)."""
    ident = message.get("tool_call_id")
    waiting = [call for call in calls if "output" not in call]
    found = next((c for c in waiting if ident is not None and c.get("id") == ident), None)
    if found is None and ident is None and waiting:
        found = waiting[0]
    elif found is None:
        found = next((c for c in waiting if c.get("id") is None), None)
    if found is not None:
        found["output"] = content


class BadConversation(ValueError):
    """A conversation record that cannot be read: its message says where and why."""


def is_conversation(record: Mapping[str, Any]) -> bool:
    """Whether a record is a whole conversation (ours, DeepEval's or RAGAS's shape)."""
    if "question" in record:  # a row's own column: a row, whatever else it holds
        return False
    return any(isinstance(record.get(k), list) for k in TURNS_KEYS) or _messages(record)


def _messages(record: Mapping[str, Any]) -> bool:
    """Whether `user_input` is a list of messages (RAGAS's multi-turn sample)."""
    value = record.get(RAGAS_MESSAGES)
    return isinstance(value, list) and bool(value) and all(isinstance(m, Mapping) for m in value)


def conversation_id(record: Mapping[str, Any], number: int) -> str:
    """The conversation's id: its id field, else its number in the input."""
    for key in ID_KEYS:
        value = record.get(key)
        if _usable_id(value):
            return str(value)
    return str(number)


def _usable_id(value: Any) -> bool:
    return (
        isinstance(value, (str, int)) and not isinstance(value, bool) and bool(str(value).strip())
    )


def _bad_id(record: Mapping[str, Any], cid: str) -> None:
    """Refuse an id field whose value is no id: falling back to the conversation's number,
    it could be another conversation's id (the third chat's "3"), and two chats one."""
    if any(_usable_id(record.get(k)) for k in ID_KEYS):
        return
    key = next((k for k in ID_KEYS if record.get(k) is not None), None)  # null: none given
    if key is not None:
        raise BadConversation(
            f"conversation {cid} (its number in the input): its {key} must be a string or an "
            f"integer, not {json.dumps(record[key], ensure_ascii=False)[:80]}; give each "
            "conversation an id of its own"
        )


def turn_records(record: Mapping[str, Any], number: int) -> list[dict[str, Any]]:
    """The rows of one conversation record (its number in the input), one per assistant
    turn that follows a user message; one record with `conversation_error` when the
    conversation cannot be read or has no such turn."""
    cid = conversation_id(record, number)
    try:
        _bad_id(record, cid)
        return _turns(record, cid)
    except BadConversation as exc:
        return [_error_row(cid, str(exc))]


def _error_row(cid: str, why: str) -> dict[str, Any]:
    """The one row of a conversation that is not judged, saying why."""
    # Its question column is there (empty): an input of conversations none of which can be
    # read is their error rows, not "no question column".
    return {"id": cid, "conversation_id": cid, "question": None, CONVERSATION_ERROR: why}


class DistinctIds:
    """`turn_records` of the conversations of one input, in input order, each id once: a
    conversation giving an earlier one's id is one error row saying so (the earlier one is
    judged, as rows are judged while the input is read). Two conversations of one id were
    one conversation to the statistics (one resampling unit) and their rows shared ids
    (`c1#2` twice) that results, `judge compare` and `judge traces export` pair rows by.

    Keeps each conversation's id and number (its first), as `RowTally` keeps each id once:
    memory grows with the conversations, not their turns."""

    def __init__(self) -> None:
        self._first: dict[str, int] = {}

    def turn_records(self, record: Mapping[str, Any], number: int) -> list[dict[str, Any]]:
        """The rows of conversation `number` (as `turn_records` gives them), or its error
        row when an earlier conversation has its id."""
        first = self.earlier(record, number)
        if first is None:
            return turn_records(record, number)
        return [
            _error_row(
                conversation_id(record, number),
                f"{same_id(record, first, number)}: one id would make them one conversation "
                f"and give their rows the same ids, so conversation {first} is judged and "
                "this one is not; give each conversation its own id",
            )
        ]

    def earlier(self, record: Mapping[str, Any], number: int) -> int | None:
        """The number of the earlier conversation of the id of conversation `number` (from
        0); None when none has it (the id is kept), or when its id is no id (its error row
        says so, under the conversation's number, which is no id it gave)."""
        if not _given_id(record) and any(record.get(k) is not None for k in ID_KEYS):
            return None
        first = self._first.setdefault(conversation_id(record, number), number)
        return None if first == number else first


def same_id(record: Mapping[str, Any], first: int, number: int) -> str:
    """Conversations `first` and `number` (this record) sharing an id, said."""
    numbered = (
        "" if _given_id(record) else f" (conversation {number} has no id: its number is its id)"
    )
    return (
        f"conversations {first} and {number} (numbered from 0 in the input) have the same id "
        f"{conversation_id(record, number)!r}{numbered}"
    )


class DistinctTurns:
    """Rows that give their own place in a conversation (`conversation_id` and `turn`,
    with their `history`, as `turn_records` writes them), each place once, in input order:
    a row at an earlier row's place (its conversation and turn) is an error row naming
    that row, and the earlier one is judged (rows are judged while the input is read).
    Two rows of one place were one conversation to the statistics (one resampling unit,
    the turn counted twice at its position): two conversations given one id, or one turn
    given twice. Rows of one conversation need not follow each other (a log of chats in
    time order interleaves them); their turns must differ.

    Keeps per conversation its id and, per row, its turn and number packed in 8 bytes,
    in one `array` sorted by turn (a plain int while the conversation has one row): 110-140
    bytes for a conversation of one row, 200-230 for one of five, 8 more a row after
    (`DistinctIds` keeps 108-135 a conversation). Rows in order of turn append to the
    array; one out of order is put in its place."""

    _ROW = (1 << 32) - 1  # a packed place's row number (its turn is above it)

    def __init__(self) -> None:
        self._turns: dict[str, int | array[int]] = {}
        self._rest: dict[tuple[str, int], int] = {}  # turns too large to pack

    def earlier(self, cid: Any, turn: Any, number: int) -> int | None:
        """The number of the earlier row at the place of row `number` (from 0), of
        conversation `cid` at `turn` as the row gives them; None when none is (the place
        is kept), or when the row gives no place `judge.run.data` reads (its error says
        so)."""
        return self._first(str(cid), turn, number) if _place(cid, turn) else None

    def _first(self, cid: str, turn: int, number: int) -> int | None:
        """The number of the earlier row at the place, else None (the place kept)."""
        if turn >= 1 << 31:  # no 8-byte place holds it (row numbers are below 2**32)
            first = self._rest.setdefault((cid, turn), number)
            return None if first == number else first
        packed = turn << 32 | number
        kept = self._turns.get(cid)
        if kept is None:
            self._turns[cid] = packed
            return None
        if isinstance(kept, int):
            if kept >> 32 == turn:
                return kept & self._ROW
            kept = self._turns[cid] = array("q", [kept])
        at = bisect.bisect_left(kept, turn << 32)
        if at < len(kept) and kept[at] >> 32 == turn:
            return kept[at] & self._ROW
        kept.insert(at, packed)
        return None


def _place(cid: Any, turn: Any) -> bool:
    """Whether a row's conversation_id and turn are a place `judge.run.data` reads (a
    string or integer id, a positive integer turn); any other is the row's error."""
    return (
        isinstance(turn, int)
        and not isinstance(turn, bool)
        and turn >= 1
        and isinstance(cid, (str, int))
        and not isinstance(cid, bool)
        and bool(str(cid).strip())
    )


def same_place(cid: Any, turn: Any, first: int, number: int) -> str:
    """Rows `first` and `number` at one place, said."""
    return (
        f"rows {first} and {number} (numbered from 0 in the input) are both turn {turn} of "
        f"conversation {str(cid)!r:.80}: two chats given one conversation_id, or one turn "
        "given twice, would be one conversation to the intervals"
    )


def distinct_turns(
    records: Iterable[tuple[int, dict[str, Any]]], columns: Mapping[str, str]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(number, record) of rows, each giving its own place in a conversation (the
    `conversation_id` and `turn` of `columns`, field -> column), a row at an earlier row's
    place given `conversation_error` naming it (`DistinctTurns`)."""
    places = DistinctTurns()
    cid_column, turn_column = columns["conversation_id"], columns["turn"]
    for number, record in records:
        cid, turn = record.get(cid_column), record.get(turn_column)
        first = places.earlier(cid, turn, number)
        if first is not None:
            why = (
                f"{same_place(cid, turn, first, number)}, so row {first} is judged and this "
                "one is not; give each chat its own conversation_id (a fork of one too) and "
                "each turn one row"
            )
            record = {**record, CONVERSATION_ERROR: why}
        yield number, record


def has_places(columns: Mapping[str, str]) -> bool:
    """Whether rows of these columns (field -> column) give their own place in a
    conversation: conversation_id and turn."""
    return all(key in columns for key in FLAT_KEYS)


def _given_id(record: Mapping[str, Any]) -> bool:
    """Whether the conversation gives an id (else its number is its id)."""
    return any(_usable_id(record.get(k)) for k in ID_KEYS)


def _turns(record: Mapping[str, Any], cid: str) -> list[dict[str, Any]]:
    if not is_conversation(record):
        raise BadConversation(
            f"record {cid!r} is a row, not a conversation (no turns, messages or user_input "
            "list): the input's first record is a conversation, and an input holds "
            "conversations or rows, not a mix of them; give each kind a file of its own"
        )
    given = [k for k in (*TURNS_KEYS, RAGAS_MESSAGES) if isinstance(record.get(k), list)]
    if len(given) > 1:
        raise BadConversation(
            f"conversation {cid!r} has both {' and '.join(given)}: which are its messages is "
            "not clear; keep one"
        )
    key = next((k for k in TURNS_KEYS if isinstance(record.get(k), list)), RAGAS_MESSAGES)
    messages = record.get(key)
    if not isinstance(messages, list):
        raise BadConversation(f"conversation {cid!r}: {key} must be a list of messages")
    reference = _first(record, REFERENCE_KEYS)
    if reference is not None and not isinstance(reference, str):
        raise BadConversation(f"conversation {cid!r}: its reference must be a string")
    if record.get(EXPECTED_TOOLS) is not None:
        # Copied onto every turn like any other field, each turn's calls would be scored
        # against the whole conversation's (one of two expected calls made: recall 0.5).
        raise BadConversation(
            f"conversation {cid!r} gives expected_tools for the whole conversation: the tool "
            "metrics score each turn's calls, so give expected_tools on the assistant "
            "message of the turn that should make them"
        )
    shared = {
        k: v
        for k, v in record.items()
        if k not in (*TURNS_KEYS, RAGAS_MESSAGES, *ID_KEYS, *REFERENCE_KEYS)
        and k not in _TURN_KEYS
        and k not in _READER_KEYS
    }
    history = _Transcript()  # every message so far, in order
    asked: list[str] = []  # the user's messages of the question being answered
    answered = False  # whether an assistant message answered `asked` already
    calls: list[dict[str, Any]] = []  # the tool calls made since then, with their results
    rows: list[dict[str, Any]] = []
    for position, message in enumerate(messages, start=1):
        role, content = role_and_content(message, cid, position)
        contexts = _contexts(message, cid, position) if role == "assistant" else []
        entry: dict[str, Any] = {"role": role, "content": content, "turn": position}
        if contexts:
            entry["contexts"] = contexts
        if role == "assistant":
            calls.extend(_tool_calls(message))
        elif role == "tool":
            _tool_result(calls, message, content)
        if role == "user":
            if answered:  # a new question
                asked, calls, answered = [], [], False
            asked.append(content)
        # An assistant message that only calls tools says nothing to judge; the tools'
        # results and the answer after them still answer the same question. One that
        # records an app's failure (`judge experiment`) is a turn: an error row says so.
        # Every assistant message that says something to the question is a turn: one
        # that calls a tool saying "Let me check.", and the answer after the tool's
        # result (which was no row, never judged), or a second chat bubble.
        elif role == "assistant" and (content.strip() or _app_failed(message)) and asked:
            rows.append(_turn_row(cid, position, message, asked, contexts, history, shared))
            if calls and rows[-1].get(TOOLS_CALLED) is None:
                # the calls so far (those made later are not this message's); each call's
                # result, when its tool message comes later, still reaches it
                rows[-1][TOOLS_CALLED] = list(calls)
            if reference is not None:
                rows[-1][CONVERSATION_REFERENCE] = reference
            answered = True
        history.add(entry, Message(role, content, position, tuple(contexts)))
    if rows:
        rows[-1][FINAL_TURN] = True
    if not rows:
        raise BadConversation(
            f"conversation {cid!r} has no assistant message after a user message: nothing to judge"
        )
    return rows


def _turn_row(
    cid: str,
    position: int,
    message: Mapping[str, Any],
    asked: list[str],
    contexts: list[str],
    history: _Transcript,
    shared: Mapping[str, Any],
) -> dict[str, Any]:
    """The row of an assistant message answering the user's messages `asked`."""
    row: dict[str, Any] = dict(shared)
    row.update({k: v for k, v in message.items() if k not in _MESSAGE_KEYS and k not in row})
    row.update(
        {
            "id": f"{cid}#{position}",
            "conversation_id": cid,
            "turn": position,
            "question": "\n\n".join(asked),
            "answer": message.get("content") or "",
            "contexts": contexts,
            "history": TurnHistory(history),
        }
    )
    truth = _first(message, _TRUTH_KEYS)
    if truth is not None:
        row["ground_truth"] = truth
    return row


class _Transcript:
    """The messages of one conversation record as its turn records' histories hold them,
    with what those share, made once per conversation: the messages as `Message`s (a
    `Thread`) and, per number of messages, the lone surrogate `lone_surrogate_in` finds in
    that many."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.thread = Thread()
        self.surrogates: list[str | None] = [None]

    def add(self, entry: dict[str, Any], message: Message) -> None:
        """The next message, as a record (`entry`) and as a `Message`."""
        self.entries.append(entry)
        self.thread.messages.append(message)
        # lone_surrogate_in(list) looks into its last item first: the last message's wins.
        where = lone_surrogate_in(entry)
        self.surrogates.append(self.surrogates[-1] if where is None else where)


class TurnHistory(list[dict[str, Any]]):
    """A turn record's `history`: its messages as dicts, as ever, made by the conversation
    reader with what the turns of a conversation share, so a long chat's rows are built
    and checked in the time of their new messages (`messages`, `lone_surrogate`). Pickled
    and copied as a plain list."""

    def __init__(self, transcript: _Transcript):
        super().__init__(transcript.entries)
        self._transcript = transcript

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))

    def _intact(self) -> bool:
        """Whether the list is still a beginning of its conversation (not changed since)."""
        made = self._transcript.entries
        return len(self) <= len(made) and (not self or self[-1] is made[len(self) - 1])

    def messages(self) -> History | None:
        """The messages as `Message`s, shared with the conversation's other turns (None
        when the list was changed since it was made)."""
        return self._transcript.thread.history(len(self)) if self._intact() else None

    def lone_surrogate(self) -> str | None:
        """`lone_surrogate_in` of the list, found once per conversation."""
        if self._intact():
            return self._transcript.surrogates[len(self)]
        return lone_surrogate_in(list(self))


def _app_failed(message: Mapping[str, Any]) -> bool:
    """Whether an assistant message records the app's failure to answer (the `app_error`
    object `judge experiment` writes: a type or a message)."""
    failure = message.get(APP_ERROR)
    return isinstance(failure, Mapping) and bool(failure.get("type") or failure.get("message"))


def _first(record: Mapping[str, Any], keys: Sequence[str]) -> Any:
    """The value of the first of `keys` the record has (None for none)."""
    return next((record[k] for k in keys if record.get(k) is not None), None)


def role_and_content(message: Any, cid: str, position: int) -> tuple[str, str]:
    """A message's role (RAGAS's type human / ai / tool mapped to ours) and text; a
    `BadConversation` says what is wrong (`position`: the message's, from 1)."""
    where = f"conversation {cid!r}, message {position}"
    if not isinstance(message, Mapping):
        raise BadConversation(f"{where}: a message must be an object with role and content")
    role = message.get("role")
    if role is None and isinstance(message.get("type"), str):
        role = _ROLE_OF_TYPE.get(message["type"].lower(), message["type"])
    if role not in ROLES:
        raise BadConversation(
            f"{where}: role {role!r} is not one of {', '.join(ROLES)} "
            "(or RAGAS's type human, ai, tool)"
        )
    content = message.get("content")
    if content is None and role != "user":
        content = ""  # an assistant message that only calls tools says nothing
    if isinstance(content, list):  # OpenAI's content parts: the text parts are the text
        content = _text_of_parts(content, where)
    if not isinstance(content, str):
        raise BadConversation(f"{where}: content must be a string, got {type(content).__name__}")
    return str(role), content


def _text_of_parts(parts: list[Any], where: str) -> str:
    """The text of OpenAI-style content parts ([{"type": "text", "text": ...}, ...]), the
    text parts joined as the API joins them; other parts (images, audio) carry no text."""
    texts = []
    for part in parts:
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise BadConversation(f"{where}: a content part must be an object with a type")
        if part["type"] == "text":
            if not isinstance(part.get("text"), str):
                raise BadConversation(f"{where}: a text part's text must be a string")
            texts.append(part["text"])
    return "".join(texts)


def _contexts(message: Mapping[str, Any], cid: str, position: int) -> list[str]:
    value = _first(message, _CONTEXTS_KEYS)
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list):
        raise BadConversation(
            f"conversation {cid!r}, message {position}: contexts must be a list of strings"
        )
    if not all(isinstance(c, str) for c in value):
        raise BadConversation(
            f"conversation {cid!r}, message {position}: contexts must be a list of strings"
        )
    return list(value)


def conversation_rows(
    records: Iterable[tuple[int, Mapping[str, Any]]],
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, turn record) of every turn of the conversations, numbered on from 0
    across conversations in input order; a conversation of an earlier one's id is one
    error row (`DistinctIds`)."""
    number = 0
    ids = DistinctIds()
    for position, record in records:
        for row in ids.turn_records(record, position):
            yield number, row
            number += 1


# A flat table's columns: a turn's conversation and position.
FLAT_KEYS = ("conversation_id", "turn")


def is_flat_turns(names: Iterable[str]) -> bool:
    """Whether a table's columns make its rows turns of conversations (conversation_id and
    turn, and no history column of its own)."""
    present = set(names)
    return all(k in present for k in FLAT_KEYS) and "history" not in present


def _flat_key(record: Mapping[str, Any]) -> tuple[str, int] | None:
    """A flat table row's (conversation_id, turn), or None when either cannot be read."""
    cid, turn = record.get("conversation_id"), _turn_number(record.get("turn"))
    ok = isinstance(cid, (str, int)) and not isinstance(cid, bool) and str(cid).strip()
    return (str(cid), turn) if ok and turn is not None else None


def flat_conversations(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A flat table of turns as conversation records (`{"id", "turns"}`), in the order of
    their first rows, each turn a user message (its question) and an assistant message
    (its answer, contexts and the row's other columns): for what takes one conversation
    at a time (`judge.pytest_plugin.cases`). A row whose conversation_id or turn cannot be
    read, or a turn given twice, is an InputFormatError naming it."""
    by_conversation: dict[str, list[tuple[int, int]]] = {}
    for index, record in enumerate(records):
        key = _flat_key(record)
        if key is None:
            raise InputFormatError(
                f"row {index + 1}: conversation_id must be a non-blank string or integer and "
                f"turn a positive integer, got {record.get('conversation_id')!r:.80} and "
                f"{record.get('turn')!r:.80}"
            )
        by_conversation.setdefault(key[0], []).append((key[1], index))
    out = []
    for cid, turns in by_conversation.items():
        turns.sort()
        messages: list[dict[str, Any]] = []
        for (turn, index), after in itertools.zip_longest(turns, turns[1:]):
            if after is not None and after[0] == turn:
                raise InputFormatError(
                    f"conversation {cid!r:.80} has turn {turn} in rows {index + 1} and "
                    f"{after[1] + 1}: a turn is one row"
                )
            record = records[index]
            exchange = _exchange(record, turn, None)
            extra = {k: v for k, v in record.items() if k not in _FLAT_OWN}
            for message in exchange:
                message.pop("turn", None)
                if message["role"] == "assistant":
                    message.update({k: v for k, v in extra.items() if k not in message})
            messages.extend(exchange)
        out.append({"id": cid, "turns": messages})
    return out


def flat_turn_units(records: Sequence[Mapping[str, Any]]) -> list[int]:
    """Each row's conversation, numbered 0, 1, ... in the order of their first rows (a row
    whose conversation cannot be read is one of its own): what a shard by conversation
    splits on, so the conversations spread over the shards round-robin."""
    numbers: dict[str, int] = {}
    units = []
    count = 0
    for record in records:
        key = _flat_key(record)
        unit = count if key is None else numbers.setdefault(key[0], count)
        count += unit == count
        units.append(unit)
    return units


def flat_turn_records(
    records: Sequence[Mapping[str, Any]], columns: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Each row of a flat table of turns with its `history`: the earlier turns of its
    conversation (by `turn`), each a user message (its question) and an assistant message
    (its answer and contexts). Rows keep their places; a row whose conversation_id or turn
    cannot be read has none, and says why (`conversation_error`), as do the rows of a turn
    given twice in a conversation and the turns after it (which of them came first is not
    known). `columns` (field -> column, resolved with the user's mapping) names the columns
    the earlier turns' questions, answers and contexts are read from; None: the usual
    names."""
    keys = [_flat_key(record) for record in records]
    by_conversation: dict[str, list[tuple[int, int]]] = {}  # (turn, row) in table order
    for index, key in enumerate(keys):
        if key is not None:
            by_conversation.setdefault(key[0], []).append((key[1], index))
    out = [{k: v for k, v in record.items() if k not in _READER_KEYS} for record in records]
    for index, key in enumerate(keys):
        if key is None:
            record = records[index]
            out[index][CONVERSATION_ERROR] = (
                "conversation_id must be a non-blank string or integer and turn a positive "
                f"integer, got {record.get('conversation_id')!r:.80} and {record.get('turn')!r:.80}"
            )
    for cid, rows in by_conversation.items():
        rows.sort()
        # Each row's history is the messages of the turns before its own: one transcript
        # grown turn by turn and shared by the rows, so the messages are made, checked and
        # hashed once per table, not once per later turn (a long chat's rows share them).
        so_far = _Transcript()
        twice: str | None = None  # why the turns from here on have no history
        last = keys[rows[-1][1]][1]  # type: ignore[index]
        for _, group in itertools.groupby(rows, key=lambda item: item[0]):
            found = [index for _, index in group]
            turn = keys[found[0]][1]  # type: ignore[index]
            if len(found) > 1 and twice is None:
                numbers = ", ".join(str(i) for i in found)
                twice = (
                    f"conversation {cid!r:.80} has turn {turn} in rows {numbers}: a turn is one "
                    "row, and the turns after it cannot say which came first"
                )
                for index in found:
                    out[index][CONVERSATION_ERROR] = twice
                continue
            for index in found:
                exchange = _exchange(records[index], turn, columns)
                if twice is not None:
                    out[index][CONVERSATION_ERROR] = twice
                elif exchange and exchange[0]["role"] == "user":
                    # ending with the row's own question, as a conversation's turn's does
                    _add_flat(so_far, exchange.pop(0))
                    out[index]["history"] = TurnHistory(so_far)
                else:  # no question: its history ends with its answer (an error, later)
                    out[index]["history"] = [*so_far.entries, *exchange[:1]]
                if twice is None:
                    out[index]["conversation_id"], out[index]["turn"] = cid, turn
                    if turn == last:
                        out[index][FINAL_TURN] = True
                for entry in exchange:
                    _add_flat(so_far, entry)
    return out


def _add_flat(transcript: _Transcript, entry: dict[str, Any]) -> None:
    """A message of a flat table's row (`_exchange`) added to its conversation's."""
    contexts = tuple(entry.get("contexts", ()))
    transcript.add(entry, Message(entry["role"], entry["content"], entry["turn"], contexts))


def _turn_number(value: Any) -> int | None:
    """A flat row's turn as a positive whole number (1, "2", 3.0), else None: so are a
    character Python calls a digit but int() cannot read ("²"), an infinite float and a
    string of more digits than int() converts (each was an internal error)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value.isdecimal():
            return None
        try:
            value = int(value)
        except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
            return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int) or value < 1:
        return None
    return value


# A flat row's fields read into its history, with the column names recognised for each
# when the table's columns were not resolved (`judge.run.data.COLUMNS` has the same).
_EXCHANGE_FIELDS = {
    "question": ("question", "user_input", "query"),
    "answer": ("answer", "response"),
    "contexts": ("contexts", "retrieved_contexts"),
}

# A flat row's columns that its exchange's messages hold (the rest go on its answer).
_FLAT_OWN = frozenset(
    {*FLAT_KEYS, "history", *(name for names in _EXCHANGE_FIELDS.values() for name in names)}
)


def _exchange(
    record: Mapping[str, Any], turn: int, columns: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    """An earlier flat row as history: its question, then its answer with its contexts,
    read from the table's columns for those fields (`columns`, as resolved with the user's
    mapping) or else from their usual names."""

    def field(name: str) -> Any:
        if columns is not None and name in columns:
            return record.get(columns[name])
        return _first(record, _EXCHANGE_FIELDS[name])

    messages: list[dict[str, Any]] = []
    question, answer = field("question"), field("answer")
    if isinstance(question, str):
        messages.append({"role": "user", "content": question, "turn": turn})
    if isinstance(answer, str):
        message: dict[str, Any] = {"role": "assistant", "content": answer, "turn": turn}
        try:
            contexts = cell_list(field("contexts"))
        except ValueError:
            contexts = None
        if isinstance(contexts, list) and all(isinstance(c, str) for c in contexts):
            message["contexts"] = list(contexts)
        messages.append(message)
    return messages
