"""Data-driven tests: the rows of a test set as pytest parameters with readable ids."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from judge.errors import InputFormatError

_WORDS = re.compile(r"[^\w]+", re.UNICODE)


def cases(
    data: Any,
    *,
    id_column: str = "id",
    limit: int | None = None,
) -> list[Any]:
    """The rows of a test set, one `pytest.param` each, for
    `@pytest.mark.parametrize("case", judge.pytest_plugin.cases("golden.jsonl"))`.

    Args:
        data: a `judge testset` output folder (its testset.jsonl), a .jsonl, .json, .csv
            or .parquet file, a saved dataset directory, a `datasets.Dataset` or a list of
            dicts.
        id_column: the column that names each row in the test ids; a row without one is
            named by its number and the first words of its question.
        limit: only the first `limit` rows.

    Returns:
        `pytest.param(row, id=...)` per row; each row is the dict of its columns. A file
        of conversations (one per line, `{"id": ..., "turns": [...]}`) gives one case per
        conversation, for `rag_judge.assert_scores(case, ...)` or
        `rag_judge.score_conversation(case)`; so does a flat table of turns (columns
        `conversation_id` and `turn`, one row per turn: a user's question and the answer).

    Raises:
        judge.errors.InputFormatError: no rows; a flat table's row that gives no turn, or
            a turn given twice; among the cases given, a conversation of an earlier one's
            id, or a row giving an earlier row's conversation_id and turn (`judge eval`
            judges the earlier alone: pytest would make them two tests of one
            conversation).
    """
    from judge.conversations import flat_conversations, is_flat_turns
    from judge.run.data import read_records

    if (
        isinstance(data, (str, Path))
        and Path(data).is_dir()
        and (Path(data) / "testset.jsonl").is_file()
    ):
        data = Path(data) / "testset.jsonl"
    records, source = read_records(data)
    if not records:
        raise InputFormatError(f"{source}: no rows to make test cases of")
    if is_flat_turns(dict.fromkeys(k for r in records for k in r)):
        records = flat_conversations(records)  # one case per conversation, as in a file of them
    if limit is not None:
        records = records[:limit]
    _one_each(records, source)
    return [pytest.param(dict(r), id=case_id(r, n, id_column)) for n, r in enumerate(records)]


def _one_each(records: list[dict[str, Any]], source: str) -> None:
    """Refuse cases `judge eval` would not judge apart: a conversation of an earlier one's
    id, or a row giving an earlier row's conversation_id and turn (it judges the earlier
    alone, as one conversation to the intervals would be two); pytest would make them two
    tests of one conversation."""
    from judge.conversations import (
        FLAT_KEYS,
        DistinctIds,
        DistinctTurns,
        is_conversation,
        same_id,
        same_place,
    )

    if records and is_conversation(records[0]):
        ids = DistinctIds()
        for number, record in enumerate(records):
            first = ids.earlier(record, number)
            if first is not None:
                raise InputFormatError(
                    f"{source}: {same_id(record, first, number)}: `judge eval` judges "
                    f"conversation {first} alone, as one id would make them one "
                    "conversation; give each conversation its own id"
                )
        return
    if not all(any(k in r for r in records) for k in FLAT_KEYS):
        return
    places = DistinctTurns()
    for number, record in enumerate(records):
        cid, turn = record.get("conversation_id"), record.get("turn")
        first = places.earlier(cid, turn, number)
        if first is not None:
            raise InputFormatError(
                f"{source}: {same_place(cid, turn, first, number)}: `judge eval` judges row "
                f"{first} alone; give each chat its own conversation_id (a fork of one too) "
                "and each turn one row"
            )


def case_id(record: Mapping[str, Any], number: int, id_column: str = "id") -> str:
    """A row's test id: its id, else its number and the first words of its question (of a
    conversation: its conversation_id or session_id, else its first user message)."""
    from judge.conversations import ID_KEYS, is_conversation

    conversation = is_conversation(record)
    for key in (id_column, *ID_KEYS) if conversation else (id_column,):
        given = record.get(key)
        if given is not None and str(given).strip():
            return str(given).strip()
    text = _first_user_message(record) if conversation else record.get("question")
    words = _WORDS.sub("-", str(text or "")).strip("-")[:40].rstrip("-")
    return f"{number}-{words}" if words else str(number)


def _first_user_message(record: Mapping[str, Any]) -> str:
    """The text of a conversation's first user message ('' when it has none)."""
    from judge.conversations import CONVERSATION_KEYS

    messages: list[Any] = next(
        (record[k] for k in CONVERSATION_KEYS if isinstance(record.get(k), list)), []
    )
    for message in messages:
        if isinstance(message, Mapping) and (
            message.get("role") == "user" or message.get("type") == "human"
        ):
            return str(message.get("content") or "")
    return ""
