"""Two conversations given one id (audit finding 4): the later one is an error row saying
so, and the earlier one is judged, however the input is read (a list, a streamed file, a
loaded one, shards) and in the dry run. They were one conversation: one resampling unit,
rows sharing ids (`c1#2` twice), `conversations: 1` in summary.json."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import judge
from judge import LLM
from judge.conversations import conversation_rows, turn_records
from judge.run.data import load_rows
from judge.run.digest import row_hash
from judge.run.inputs import open_input
from judge.run.shard import Shard
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.chats import assistant, conversation, user

SKY = conversation(
    user("What colour is the sky?"),
    assistant("The sky is blue.", "The sky is blue on a clear day."),
    id="c1",
)
PARIS = conversation(
    user("What is the capital of France?"),
    assistant("Berlin is the capital.", "Paris is the capital of France."),
    id="c1",
)
OTHER = conversation(
    user("Hello?"), assistant("Greetings are polite.", "Greetings are polite."), id="c2"
)
TWICE = "conversations 0 and 2 (numbered from 0 in the input) have the same id 'c1'"


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def llm_at(server: FakeLLMServer) -> LLM:
    return LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=0)


def test_a_later_conversation_of_an_earlier_ones_id_is_an_error_row(fake_llm_server, tmp_path):
    fake_llm_server.chat = heuristic_judge
    path = write_jsonl(tmp_path / "c.jsonl", [SKY, OTHER, PARIS])
    for data in ([SKY, OTHER, PARIS], path):
        result = judge.evaluate(
            data, metrics=["faithfulness"], llm=llm_at(fake_llm_server), progress=False
        )
        rows = result.rows
        assert [r.id for r in rows] == ["c1#2", "c2#2", "c1"]
        assert [r.scores["faithfulness"] for r in rows[:2]] == [1.0, 1.0]
        assert math.isnan(rows[2].scores["faithfulness"])
        assert rows[2].error is not None and TWICE in rows[2].error
        assert "give each conversation its own id" in rows[2].error
        assert rows[2].conversation_id is None  # no turn of conversation 0's
        # three conversations, each its own unit (was 2: the two of id c1 were one)
        assert result.tally.resampling().units == 3
        assert [c.conversation_id for c in result.tally.by_conversation(["faithfulness"])] == [
            "c1",
            "c2",
        ]


def test_every_reader_and_shard_finds_the_same_error_row(tmp_path):
    """Each shard reads every conversation (a turn's number needs those before it), so
    each knows the ids before its own: the error row is the same in one process, in each
    shard, and in the loaded input `judge.evaluate(..., ray=True)` reads."""
    chats = [SKY, OTHER, PARIS, {**OTHER, "id": "c3"}]
    path = write_jsonl(tmp_path / "c.jsonl", chats)
    streamed = open_input(path)
    whole = [(r.number, r.error, row_hash(r)) for r in streamed]
    assert [n for n, error, _ in whole if error is not None and TWICE in error] == [2]
    loaded, _, _ = load_rows(path)
    assert [(r.number, r.error, row_hash(r)) for r in loaded] == whole
    for count in (2, 3):
        parts = [r for i in range(1, count + 1) for r in streamed.only(Shard(i, count))]
        got = sorted((r.number, r.error, row_hash(r)) for r in parts)
        assert got == whole
    rows = [row for _, row in conversation_rows(enumerate(chats))]
    assert [r["id"] for r in rows] == ["c1#2", "c2#2", "c1", "c3#2"]


def test_a_conversation_without_an_id_is_numbered_and_its_number_may_not_be_taken():
    """A conversation without an id takes its number: another's explicit id "1" is then
    the same id, and their rows shared ids."""
    numbered = {"turns": SKY["turns"]}
    rows = [row for _, row in conversation_rows(enumerate([{**OTHER, "id": "1"}, numbered]))]
    assert [r["id"] for r in rows] == ["1#2", "1"]
    assert rows[1]["conversation_error"].startswith(
        "conversations 0 and 1 (numbered from 0 in the input) have the same id '1' "
        "(conversation 1 has no id: its number is its id): "
    )


@pytest.mark.parametrize("bad", [1.5, True])
def test_a_conversation_whose_id_cannot_be_read_takes_no_id_from_a_later_one(bad):
    """An id that is no id (1.5) is its own error row, under the conversation's number: a
    later conversation giving that number as its id is judged."""
    chats = [{**SKY, "id": bad}, {**OTHER, "id": "0"}]
    rows = [row for _, row in conversation_rows(enumerate(chats))]
    assert [r["id"] for r in rows] == ["0", "0#2"]
    assert "must be a string or an integer" in rows[0]["conversation_error"]
    assert "conversation_error" not in rows[1]


def test_the_dry_run_says_which_conversation_repeats_an_id(fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    dry = judge.dry_run(
        [SKY, OTHER, PARIS],
        metrics=["faithfulness"],
        llm=llm_at(fake_llm_server),
        max_error_rate=0.5,
    )
    assert fake_llm_server.count() == 0
    ((number, error),) = dry.unreadable
    assert number == 2 and TWICE in error
    assert TWICE in str(dry)


# --- rows that give their own place (conversation_id, turn and history) -----------------


def rows_of(*chats: dict[str, Any]) -> list[dict[str, Any]]:
    """Each conversation's turns as rows with their histories (`turn_records`'s)."""
    return [row for number, chat in enumerate(chats) for row in turn_records(chat, number)]


ROW_TWICE = "rows 0 and 2 (numbered from 0 in the input) are both turn 2 of conversation 'c1'"


def test_a_later_row_at_an_earlier_rows_turn_is_an_error_row(fake_llm_server, tmp_path):
    """Rows giving their own conversation_id and turn: two rows at one place (two chats
    given one id, or one turn twice) were one conversation to the intervals (one
    resampling unit, the turn counted twice at position 1)."""
    fake_llm_server.chat = heuristic_judge
    rows = rows_of(SKY, OTHER, PARIS)
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    for data in (rows, path):
        result = judge.evaluate(
            data, metrics=["faithfulness"], llm=llm_at(fake_llm_server), progress=False
        )
        judged = result.rows
        assert [r.scores["faithfulness"] for r in judged[:2]] == [1.0, 1.0]
        assert math.isnan(judged[2].scores["faithfulness"])
        assert judged[2].error is not None and ROW_TWICE in judged[2].error
        assert "give each chat its own conversation_id" in judged[2].error
        assert judged[2].conversation_id is None
        assert result.tally.resampling().units == 3  # was 2: rows 0 and 2 were one
        by_turn = [(t.position, t.turns) for t in result.tally.by_turn(["faithfulness"])]
        assert by_turn == [(1, 2)]  # was [(1, 3)]


def test_rows_of_one_conversation_need_not_follow_each_other(fake_llm_server):
    """Chats logged in time order interleave: a conversation's turns may be anywhere in
    the rows, each at a place of its own."""
    fake_llm_server.chat = heuristic_judge
    both = conversation(*SKY["turns"], *OTHER["turns"], id="c1")
    first, second = rows_of(both)
    rows = [first, *rows_of({**OTHER, "id": "c2"}), second]
    result = judge.evaluate(
        rows, metrics=["faithfulness"], llm=llm_at(fake_llm_server), progress=False
    )
    assert [(r.conversation_id, r.turn, r.error) for r in result.rows] == [
        ("c1", 2, None),
        ("c2", 2, None),
        ("c1", 4, None),
    ]
    assert result.tally.resampling().units == 2


def test_every_reader_and_shard_finds_the_same_row_at_an_earlier_place(tmp_path):
    """Each shard reads every row (the places before its own may be in any shard): the
    error row is the same in one process, in each shard and in the loaded input. The
    place is read from the columns the user maps, and a turn past 2**31 is a place too."""
    rows = rows_of(SKY, OTHER, PARIS, {**OTHER, "id": "c3"})
    big = {**rows[1], "conversation_id": "c9", "turn": 2**40}
    rows = [*rows, big, {**big, "answer": "Hi."}]
    renamed = [
        {("session" if k == "conversation_id" else k): v for k, v in row.items()} for row in rows
    ]
    for data, column_map in ((rows, None), (renamed, {"conversation_id": "session"})):
        path = write_jsonl(tmp_path / "rows.jsonl", data)
        streamed = open_input(path, column_map)
        whole = [(r.number, r.error, row_hash(r)) for r in streamed]
        assert [n for n, error, _ in whole if error is not None] == [2, 5]
        assert ROW_TWICE in str(whole[2][1])
        assert (
            "rows 4 and 5 (numbered from 0 in the input) are both turn 1099511627776 of "
            "conversation 'c9'" in str(whole[5][1])
        )
        loaded, _, _ = load_rows(path, column_map)
        assert [(r.number, r.error, row_hash(r)) for r in loaded] == whole
        for count in (2, 3):
            parts = [r for i in range(1, count + 1) for r in streamed.only(Shard(i, count))]
            assert sorted((r.number, r.error, row_hash(r)) for r in parts) == whole


def test_the_dry_run_says_which_row_repeats_a_place(fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    dry = judge.dry_run(
        rows_of(SKY, OTHER, PARIS),
        metrics=["faithfulness"],
        llm=llm_at(fake_llm_server),
        max_error_rate=0.5,
    )
    assert fake_llm_server.count() == 0
    ((number, error),) = dry.unreadable
    assert number == 2 and ROW_TWICE in error
    assert ROW_TWICE in str(dry)
