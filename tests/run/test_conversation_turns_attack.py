"""Conversations attacked again (issue 40): what an assistant says after its first answer
to a question, and the places where a conversation's turns are put in order."""

from __future__ import annotations

from typing import Any

import judge
from judge import LLM
from judge.conversations import CONVERSATION_ERROR, flat_turn_records, turn_records
from judge.samples import Message, Sample
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.chats import assistant, user

TRACK = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "track", "arguments": '{"parcel": 7}'},
}
# RAGAS's and OpenAI's agent shape: the assistant says something while it calls a tool, the
# tool answers, and the assistant answers the user from the tool's result.
AGENT = {
    "id": "agent",
    "turns": [
        user("Where is parcel 7?"),
        {"role": "assistant", "content": "Let me check.", "tool_calls": [TRACK]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Parcel 7 is in Lyon."},
        assistant(
            "Parcel 7 is on Mars.",
            "Parcel 7 is in Lyon.",
            expected_tools=[{"name": "track", "arguments": {"parcel": 7}}],
        ),
    ],
}


def llm_at(server: FakeLLMServer) -> LLM:
    return LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=0)


def by_turn(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r["turn"]: r for r in records}


def test_the_answer_after_a_tool_call_with_words_is_a_turn_with_its_calls():
    """The answer given from the tool's result was no row: the message calling the tool
    said "Let me check.", so it was the turn, and the answer after it answered no user
    message (it was never judged: a hallucinated answer went unseen)."""
    rows = by_turn(turn_records(AGENT, 0))
    assert sorted(rows) == [2, 4]
    final = rows[4]
    assert final["question"] == "Where is parcel 7?" and final["answer"] == "Parcel 7 is on Mars."
    assert final["expected_tools"] == [{"name": "track", "arguments": {"parcel": 7}}]
    ((called,),) = [final["tools_called"]]
    assert called["function"]["name"] == "track" and called["output"] == "Parcel 7 is in Lyon."
    assert final.get("final_turn") is True and not rows[2].get("final_turn")


def test_a_second_assistant_message_in_a_row_is_judged(fake_llm_server):
    """Two assistant messages after one user message (two chat bubbles): the second was no
    row, so whatever it invented counted nowhere."""
    chat = {
        "id": "b",
        "turns": [
            user("Where is parcel 7?"),
            assistant("Parcel 7 is in Lyon.", "Parcel 7 is in Lyon."),
            assistant("Parcel 7 is on Mars.", "Parcel 7 is in Lyon."),
        ],
    }
    fake_llm_server.chat = heuristic_judge
    result = judge.evaluate(
        [chat], metrics=["faithfulness"], llm=llm_at(fake_llm_server), progress=False
    )
    scores = {row.id: row.scores["faithfulness"] for row in result.rows}
    assert scores == {"b#2": 1.0, "b#3": 0.0}
    assert [row.question for row in result.rows] == ["Where is parcel 7?"] * 2


def test_an_earlier_turn_is_read_back_from_a_history_as_its_own_row_holds_it():
    """A later turn rests on the earlier turns' judgments, rebuilt from its history
    (`Sample.earlier_turn`): each earlier answer of the agent is the turn its row is."""
    later = {**AGENT, "turns": [*AGENT["turns"], user("Thanks."), assistant("Bye.", "Bye.")]}
    rows = by_turn(turn_records(later, 0))
    history = [
        Message(m["role"], m["content"], m["turn"], tuple(m.get("contexts", ())))
        for m in rows[6]["history"]
    ]
    sample = Sample("Thanks.", "Bye.", ("Bye.",), history=history, turn=6, conversation_id="agent")
    for index, message in enumerate(history):
        rebuilt = sample.earlier_turn(index)
        if message.turn in rows:
            assert rebuilt is not None, message
            row = rows[message.turn]
            assert (rebuilt.question, rebuilt.answer) == (row["question"], row["answer"])
        else:
            assert rebuilt is None, message


def test_an_answer_from_a_tools_result_alone_is_judged_against_it(fake_llm_server):
    """A first exchange whose answer rests on a tool's result (the agent retrieved
    nothing): the tool's message is evidence, yet the turn was not judged (no_contexts), as
    nothing was said before the user's question. Nor was a second answer to the question,
    the first answer's supported claims being its evidence."""
    called = {"role": "assistant", "content": "", "tool_calls": [TRACK]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "Parcel 7 is in Lyon."}
    chats = [
        {
            "id": "t",
            "turns": [
                user("Where is parcel 7?"),
                called,
                result,
                assistant("Parcel 7 is in Lyon."),
            ],
        },
        {
            "id": "b",
            "turns": [
                user("Where is parcel 7?"),
                assistant("Parcel 7 is in Lyon.", "Parcel 7 is in Lyon."),
                assistant("Parcel 7 is in Lyon."),
            ],
        },
    ]
    fake_llm_server.chat = heuristic_judge
    rows = judge.evaluate(
        chats, metrics=["faithfulness"], llm=llm_at(fake_llm_server), progress=False
    ).rows
    assert {row.id: row.scores["faithfulness"] for row in rows} == {
        "t#4": 1.0,
        "b#2": 1.0,
        "b#3": 1.0,
    }
    (verdict,) = rows[0].evidence["answer_verdicts"]
    assert (verdict["source"], verdict["role"], verdict["turn"]) == ("history", "tool", 3)


def test_two_conversations_of_one_id_are_not_one_conversation_of_twice_the_turns(
    fake_llm_server,
):
    """Two forks of one chat (one id, one beginning, then each its own answer): their
    second turns were positions 3 and 4 of the mean by turn position, turns neither
    conversation has. Given as conversations or as rows with their histories, the second
    fork's turns are error rows (each at the first fork's place); given ids of their own,
    each fork's turns are positions 1 and 2."""
    fake_llm_server.chat = heuristic_judge
    start = [user("Parcel goes to Lyon."), assistant("Parcel goes to Lyon.", "Lyon.")]
    forks = [
        {"id": "c", "turns": [*start, user("Ok?"), assistant("Express takes one day.", "x")]},
        {"id": "c", "turns": [*start, user("Ok?"), assistant("Mars is red.", "y")]},
    ]
    turns = [row for number, fork in enumerate(forks) for row in turn_records(fork, number)]
    own = [{**forks[0], "id": "c-a"}, {**forks[1], "id": "c-b"}]
    for data in (forks, turns):
        result = judge.evaluate(
            data, metrics=["faithfulness"], llm=llm_at(fake_llm_server), progress=False
        )
        by_turn = [(t.position, t.turns) for t in result.tally.by_turn(["faithfulness"])]
        assert by_turn == [(1, 1), (2, 1)]
    result = judge.evaluate(
        own, metrics=["faithfulness"], llm=llm_at(fake_llm_server), progress=False
    )
    by_turn = [(t.position, t.turns) for t in result.tally.by_turn(["faithfulness"])]
    assert by_turn == [(1, 2), (2, 2)]


def test_a_message_cannot_make_its_turn_final_or_an_error(fake_llm_server):
    """The reader's own marks were copied from a message (or the conversation) onto its
    row like any other field: an app writing `final_turn` on every answer had each turn's
    goal judged (the goal's mean is a share of conversations), and one writing
    `conversation_error` on a bad answer made it an error row, left out of the means."""
    fake_llm_server.chat = heuristic_judge
    chat = {
        "id": "c",
        "final_turn": True,
        "reference": "Parcel goes to Lyon.",
        "turns": [
            user("Parcel goes to Lyon."),
            assistant("Parcel goes to Lyon.", "Parcel goes to Lyon.", final_turn=True),
            user("Ok?"),
            assistant("Mars is red.", "Lyon.", conversation_error="not a real error"),
        ],
    }
    rows = judge.evaluate(
        [chat],
        metrics=["faithfulness", "goal_accuracy"],
        llm=llm_at(fake_llm_server),
        progress=False,
    ).rows
    assert [row.error for row in rows] == [None, None]
    assert rows[0].reasons.get("goal_accuracy") == "not_final_turn"
    assert rows[1].scores["faithfulness"] == 0.0


def test_a_flat_tables_own_marks_are_not_the_readers():
    table = [
        {"conversation_id": "c", "turn": 1, "question": "q1", "answer": "a1", "final_turn": True},
        {"conversation_id": "c", "turn": 2, "question": "q2", "answer": "a2"},
        {
            "conversation_id": "d",
            "turn": 1,
            "question": "q",
            "answer": "a",
            "conversation_error": "x",
        },
    ]
    rows = flat_turn_records(table)
    assert [r.get("final_turn") for r in rows] == [None, True, True]
    assert [r.get("conversation_error") for r in rows] == [None, None, None]


def test_a_tool_result_naming_a_call_id_the_calls_lost_answers_the_next_call():
    """An export kept the tool messages' tool_call_id but not the calls' ids (RAGAS's
    ToolCall has none): each result was dropped, and the trajectory judge saw calls
    without their outputs. A call without an id is answered in order, whatever id the
    answer names."""
    chat = {
        "id": "r",
        "turns": [
            user("Weather in Lyon?"),
            {"role": "assistant", "content": "", "tool_calls": [{"name": "geo"}, {"name": "sky"}]},
            {"role": "tool", "tool_call_id": "call_a", "content": "45.76, 4.84"},
            {"role": "tool", "tool_call_id": "call_b", "content": "Sunny."},
            assistant("Sunny.", "Sunny."),
        ],
    }
    (row,) = turn_records(chat, 0)
    assert [c.get("output") for c in row["tools_called"]] == ["45.76, 4.84", "Sunny."]


def test_an_id_that_is_no_string_or_integer_is_an_error_not_the_conversations_number():
    """An id of 1.5, true or a list fell back to the conversation's number in the file:
    "3" for the third, which is another conversation's id too, so two chats were one."""
    chat = [user("I live in Lyon."), assistant("Noted.", "Lyon is in France.")]
    for bad in (1.5, True, ["c1"], {"id": 1}, "  "):
        (row,) = turn_records({"id": bad, "turns": chat}, 3)
        assert "must be a string or an integer" in row[CONVERSATION_ERROR], bad
        assert row["conversation_id"] == "3"
    (ok,) = turn_records({"conversation_id": 7, "turns": chat}, 3)
    assert ok["conversation_id"] == "7" and CONVERSATION_ERROR not in ok
    (none,) = turn_records({"turns": chat}, 3)  # no id at all: its number, as documented
    assert none["conversation_id"] == "3" and CONVERSATION_ERROR not in none


def test_expected_tools_on_the_conversation_is_an_error_not_every_turns_labels():
    """A conversation-level expected_tools (RAGAS keeps a conversation's expected calls
    there, as reference_tool_calls) was copied onto every turn like any other field: each
    turn's calls were scored against the whole conversation's (a turn making one of two
    expected calls: recall 0.5, though it made all it should)."""
    chat = [
        user("Find my order."),
        assistant("It is order 17.", "Order 17: shipped.", tools_called=[{"name": "search"}]),
        user("Book a pickup."),
        assistant("Booked.", "Pickups: daily.", tools_called=[{"name": "book"}]),
    ]
    record = {"id": "c", "turns": chat, "expected_tools": [{"name": "search"}, {"name": "book"}]}
    (row,) = turn_records(record, 0)
    assert "expected_tools" in row[CONVERSATION_ERROR]
    assert "assistant message" in row[CONVERSATION_ERROR]
    per_turn = [dict(m) for m in chat]
    per_turn[1]["expected_tools"] = [{"name": "search"}]
    per_turn[3]["expected_tools"] = [{"name": "book"}]
    rows = turn_records({"id": "c", "turns": per_turn}, 0)
    assert [r["expected_tools"] for r in rows] == [[{"name": "search"}], [{"name": "book"}]]
