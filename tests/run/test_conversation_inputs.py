"""Conversations in each input shape become one row per assistant turn, with the
conversation before it: ours, DeepEval's, RAGAS's, a flat table of turns; through every
reader of evaluation data (the streamed one and the loaded one agree)."""

from __future__ import annotations

import json

import pytest

from judge.conversations import CONVERSATION_ERROR, turn_records
from judge.run.data import load_rows
from judge.run.digest import row_hash
from judge.run.inputs import open_input, reopen_input
from judge.run.shard import Shard
from judge.samples import Message, Sample

OURS = {
    "id": "c1",
    "turns": [
        {"role": "system", "content": "You are the parcel desk."},
        {"role": "user", "content": "I live in Lyon."},
        {"role": "user", "content": "Which options are there?"},
        {
            "role": "assistant",
            "content": "Express takes one day.",
            "contexts": ["Express delivery takes one day."],
            "retrieved_ids": ["d1"],
            "relevance": {"d1": 1},
            "ground_truth": "Express, one day.",
        },
        {"role": "user", "content": "Express then."},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "book"}]},
        {"role": "tool", "content": "booked #42"},
        {"role": "assistant", "content": "Booked as #42 to Lyon.", "query": "book express Lyon"},
    ],
    "reference": "A parcel booked express to Lyon.",
}


def test_each_assistant_turn_is_a_row_with_everything_before_it():
    first, second = turn_records(OURS, 0)
    assert first["id"] == "c1#4" and first["turn"] == 4 and first["conversation_id"] == "c1"
    assert first["question"] == "I live in Lyon.\n\nWhich options are there?"
    assert first["contexts"] == ["Express delivery takes one day."]
    assert first["retrieved_ids"] == ["d1"] and first["relevance"] == {"d1": 1}
    assert first["ground_truth"] == "Express, one day."
    assert [m["turn"] for m in first["history"]] == [1, 2, 3]
    # the tool-only assistant message is not a turn; the tool's result is in the history
    assert second["turn"] == 8 and second["question"] == "Express then."
    assert [m["role"] for m in second["history"]] == [
        "system",
        "user",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    assert second["query"] == "book express Lyon"
    assert second["conversation_reference"] == "A parcel booked express to Lyon."
    assert "ground_truth" not in second  # the conversation's reference is not a turn's


def test_deepeval_and_ragas_shapes_give_the_same_turns_as_ours():
    deepeval = {
        "name": "d",
        "turns": [
            {"role": "user", "content": "Capital of France?"},
            {
                "role": "assistant",
                "content": "Paris.",
                "retrieval_context": ["Paris is the capital of France."],
                "tools_called": [{"name": "search", "input_parameters": {"q": "France"}}],
            },
        ],
        "expected_outcome": "The user learns the capital.",
    }
    ragas = {
        "user_input": [
            {"content": "Capital of France?", "type": "human"},
            {"content": "Paris.", "type": "ai"},
        ],
        "reference": "The user learns the capital.",
    }
    (d,) = turn_records(deepeval, 0)
    (r,) = turn_records(ragas, 1)
    assert d["conversation_id"] == "0" and r["conversation_id"] == "1"  # no id: the number
    assert d["question"] == r["question"] == "Capital of France?"
    assert d["answer"] == r["answer"] == "Paris."
    assert d["contexts"] == ["Paris is the capital of France."] and r["contexts"] == []
    assert d["tools_called"][0]["name"] == "search"
    assert d["conversation_reference"] == r["conversation_reference"]
    assert d["name"] == "d"  # the conversation's other fields reach every turn


@pytest.mark.parametrize(
    ("record", "said"),
    [
        ({"id": "x", "turns": [{"role": "robot", "content": "hi"}]}, "role 'robot'"),
        ({"id": "x", "turns": [{"role": "user", "content": 3}]}, "content must be a string"),
        ({"id": "x", "turns": ["hello"]}, "must be an object"),
        ({"id": "x", "turns": [{"role": "user", "content": "hi"}]}, "no assistant message"),
        (
            {"id": "x", "turns": [{"role": "assistant", "content": "Hello!"}]},
            "no assistant message after a user message",
        ),
        (
            {
                "id": "x",
                "turns": [
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": "a", "contexts": "one"},
                ],
            },
            "contexts must be a list",
        ),
    ],
)
def test_a_conversation_that_cannot_be_read_is_one_error_row_saying_why(record, said):
    (row,) = turn_records(record, 0)
    assert said in row[CONVERSATION_ERROR] and "'x'" in row[CONVERSATION_ERROR]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_streamed_and_loaded_readers_agree_and_a_bad_conversation_does_not_stop_the_others(
    tmp_path,
):
    bad = {"id": "bad", "turns": [{"role": "user", "content": "only a question"}]}
    data = write_jsonl(tmp_path / "c.jsonl", [OURS, bad, {**OURS, "id": "c2"}])
    streamed = list(open_input(data))
    loaded, columns, _ = load_rows(data)
    assert len(streamed) == len(loaded) == 5
    assert [row_hash(r) for r in streamed] == [row_hash(r) for r in loaded]
    assert [r.number for r in streamed] == [0, 1, 2, 3, 4]
    assert streamed[2].sample is None and "no assistant message" in streamed[2].error
    turn = streamed[1].sample
    assert turn.in_conversation and turn.conversation_id == "c1" and turn.turn == 8
    assert [m.role for m in turn.history][-1] == "tool"
    assert turn.extra["query"] == "book express Lyon"
    assert "history" in columns and "turn" in columns


def test_a_shard_builds_only_its_turns_and_they_equal_the_whole_runs(tmp_path):
    data = write_jsonl(tmp_path / "c.jsonl", [OURS, {**OURS, "id": "c2"}, {**OURS, "id": "c3"}])
    rows = open_input(data)
    whole = {r.number: row_hash(r) for r in rows}
    for index in (1, 2):
        mine = {r.number: row_hash(r) for r in rows.only(Shard(index, 2))}
        assert set(mine) == {n for n in whole if n % 2 == index - 1}
        assert all(whole[n] == h for n, h in mine.items())


def test_a_flat_table_of_turns_gets_each_turns_history_from_the_earlier_rows(tmp_path):
    table = tmp_path / "turns.csv"
    table.write_text(
        "conversation_id,turn,question,answer,contexts\n"
        'c1,2,Express then.,Booked.,"[]"\n'
        'c1,1,I live in Lyon.,Noted: Lyon.,"[""Lyon is served daily.""]"\n'
        "c2,1,Hello?,Hi.,\n"
        "c2,x,Broken?,Yes.,\n",
        encoding="utf-8",
    )
    rows = list(open_input(table, {}))
    assert [r.number for r in rows] == [0, 1, 2, 3]  # the rows keep their places
    later = rows[0].sample
    assert later.turn == 2 and later.conversation_id == "c1"
    assert [(m.role, m.content) for m in later.history] == [
        ("user", "I live in Lyon."),
        ("assistant", "Noted: Lyon."),
        ("user", "Express then."),  # its own question ends it, as in a conversation
    ]
    assert [m.content for m in rows[1].sample.history] == ["I live in Lyon."]
    assert rows[3].sample is None and "turn a positive integer" in rows[3].error


def test_a_flat_table_of_mapped_columns_gets_its_history_from_those_columns(tmp_path):
    """--column question=... (column_map) names the columns of a flat table: the history
    of a later turn was read from the default names alone, so it held none of the earlier
    turns' questions, answers or contexts."""
    table = tmp_path / "turns.csv"
    table.write_text(
        "conversation_id,turn,user_text,bot_text,passages\n"
        'c1,1,I live in Lyon.,Noted: Lyon.,"[""Lyon is served daily.""]"\n'
        'c1,2,Express then.,Booked.,"[]"\n',
        encoding="utf-8",
    )
    mapping = {"question": "user_text", "answer": "bot_text", "contexts": "passages"}
    rows = list(open_input(table, mapping))
    assert [(m.role, m.content) for m in rows[1].sample.history] == [
        ("user", "I live in Lyon."),
        ("assistant", "Noted: Lyon."),
        ("user", "Express then."),
    ]
    assert rows[1].sample.history[1].contexts == ("Lyon is served daily.",)
    opened = open_input(table, mapping)
    assert opened.columns["question"] == "user_text"
    # A shard's process reopens the table with the columns the run resolved.
    reopened = reopen_input(table, opened.columns, 2, opened.records.identity())
    assert [row_hash(r) for r in reopened] == [row_hash(r) for r in rows]
    loaded, _, _ = load_rows(table, mapping)  # the loading path (Ray reads it so) too
    assert [row_hash(r) for r in loaded] == [row_hash(r) for r in rows]


def test_an_ordinary_row_hashes_as_it_did_before_conversations():
    """Data hashes (summary.json's data_sha256, checkpoints) of ordinary rows are unchanged:
    the hash is that of the sample's fields as they were."""
    from judge.json_values import sha256_hex
    from judge.run.data import Row

    sample = Sample.create("q?", "a.", ["c"], "t", 7)
    old_fields = {
        "question": "q?",
        "answer": "a.",
        "contexts": ("c",),
        "ground_truth": "t",
        "id": "7",
        "extra": {},
    }
    old = sha256_hex(
        json.dumps(
            {"sample": old_fields, "error": None, "retrieved_ids": None, "relevance": None},
            sort_keys=True,
            ensure_ascii=False,
            default=repr,
        )
    )
    assert row_hash(Row(0, sample)) == old
    turn = Sample.create(
        "q?",
        "a.",
        ["c"],
        "t",
        7,
        history=[Message("user", "hi", 1)],
        turn=2,
        conversation_id="c",
    )
    assert row_hash(Row(0, turn)) != old  # a turn's history is part of its inputs


def test_a_turns_result_row_names_its_trace_and_an_ordinary_rows_keeps_its_shape(
    fake_llm_server, tmp_path
):
    """A turn's row id is `<conversation>#<turn>`, which names no trace: its results.jsonl
    line carries the turn's `trace_id` (a conversation's or a flat table's), read back as
    it was written. An ordinary row's line is as before, a trace_id column or not (a row
    read from a trace has the trace id as its id); a trace_id that is no text is not one."""
    import judge
    from judge import LLM
    from judge.run.rows import ResultRow
    from judge.testing import heuristic_judge

    fake_llm_server.chat = heuristic_judge
    llm = LLM("openai/judge-model", api_base=fake_llm_server.base_url, api_key="k")
    t1, t2 = "1" * 32, "2" * 32
    conversations = [
        {
            "id": "c",
            "turns": [
                {"role": "user", "content": "Where?"},
                {
                    "role": "assistant",
                    "content": "In Lyon.",
                    "contexts": ["In Lyon."],
                    "trace_id": t1,
                },
                {"role": "user", "content": "When?"},
                {"role": "assistant", "content": "Today.", "trace_id": {"not": "text"}},
            ],
        }
    ]
    where = {"question": "Where?", "answer": "In Lyon.", "contexts": ["In Lyon."]}
    flat = [{"conversation_id": "f", "turn": 1, **where, "trace_id": t2}]
    ordinary = [{"id": t1, "trace_id": t1, **where}]
    lines = {}
    for name, data in (("chat", conversations), ("flat", flat), ("ordinary", ordinary)):
        result = judge.evaluate(data, metrics=["faithfulness"], llm=llm, progress=False)
        result.write(tmp_path / name, record=False)
        text = (tmp_path / name / "results.jsonl").read_text(encoding="utf-8")
        lines[name] = [json.loads(line) for line in text.splitlines()]
    assert [r.get("trace_id") for r in lines["chat"]] == [t1, None]
    assert [r["trace_id"] for r in lines["flat"]] == [t2]
    (row,) = lines["ordinary"]
    assert "trace_id" not in row and row["id"] == t1
    assert ResultRow.from_json(lines["chat"][0]).trace_id == t1
    assert ResultRow.from_json(lines["chat"][0]).json_fields()["trace_id"] == t1


def test_a_record_with_a_question_column_is_a_row_whatever_else_it_holds(tmp_path):
    """Found by Hypothesis: {"question": "", "user_input": [{}]} was read as a RAGAS
    conversation, and the whole input refused for want of a question column."""
    from judge.conversations import is_conversation

    record = {"question": "", "user_input": [{}]}
    assert not is_conversation(record)
    data = write_jsonl(tmp_path / "d.jsonl", [record])
    rows, columns, _ = load_rows(data)
    assert columns["question"] == "question"
    assert rows[0].sample is None and "question" in rows[0].error
