"""Conversations attacked as their worst user would: hostile files, duplicate ids, broken
judges, killed runs, split runs and an app trying to raise its own score. A defect not yet
fixed is an xfail(strict=True) saying what is wrong; the others pin what was fixed or
what holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import judge
from judge import LLM
from judge.conversations import CONVERSATION_ERROR, flat_turn_records
from judge.run.data import load_rows
from judge.testing import FakeLLMServer, heuristic_judge


def llm_at(server: FakeLLMServer) -> LLM:
    return LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=0)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str, *contexts: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "contexts": list(contexts), **extra}


def jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def results(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


# --- hostile flat tables -------------------------------------------------------------------


@pytest.mark.parametrize(
    "turn",
    ["²", "١٢x", float("inf"), float("-inf"), float("nan"), "9" * 5000, 2.5, 0, -1, True, None],
    ids=repr,
)
def test_a_flat_turn_that_is_no_positive_whole_number_is_that_rows_error(turn):
    """ "²" is a digit to str.isdigit but not to int(), inf passes `!= int(inf)` only by
    raising, and int() refuses more than 4,300 digits: each was an internal error (exit
    70) of the whole run; now the row's error, its value cut short."""
    (row,) = flat_turn_records([{"conversation_id": "c", "turn": turn, "question": "q"}])
    error = row[CONVERSATION_ERROR]
    assert error.startswith("conversation_id must be a non-blank string or integer and turn")
    assert len(error) < 300


@pytest.mark.parametrize(("turn", "number"), [("01", 1), (" 2 ", 2), (3.0, 3), ("١٢", 12)])
def test_a_flat_turn_written_otherwise_is_its_number(turn, number):
    (row,) = flat_turn_records([{"conversation_id": "c", "turn": turn, "question": "q"}])
    assert row["turn"] == number and type(row["turn"]) is int and row["history"] == []


def test_a_flat_turn_of_hundreds_of_digits_is_read_and_judged(tmp_path):
    """A huge whole turn number is a number like any other (it was made a float and
    overflowed)."""
    big = 10**400
    rows, _, _ = load_rows(
        [
            {"conversation_id": "c", "turn": big, "question": "q1", "answer": "a1"},
            {"conversation_id": "c", "turn": big + 1, "question": "q2", "answer": "a2"},
        ]
    )
    assert [r.error for r in rows] == [None, None]
    assert rows[1].sample.turn == big + 1
    assert [m.turn for m in rows[1].sample.history] == [big, big]


def test_a_flat_table_of_the_same_turn_twice_errs_those_rows_and_the_turns_after_it():
    """Two rows claiming turn 1 of conversation c: the later turns' history held both
    exchanges in table order as if both were said, and both rows shared one judgment
    (`test_two_rows_of_one_turn_are_each_judged_on_their_own_answer`). The table cannot
    say which came first: its rows and the turns after are errors saying so; another
    conversation is judged."""
    out = flat_turn_records(
        [
            {"conversation_id": "c", "turn": 1, "question": "q1", "answer": "a1"},
            {"conversation_id": "c", "turn": "1", "question": "q1b", "answer": "a1b"},
            {"conversation_id": "c", "turn": 2, "question": "q2", "answer": "a2"},
            {"conversation_id": "d", "turn": 1, "question": "q", "answer": "a"},
            {"conversation_id": "d", "turn": 2, "question": "q", "answer": "a"},
        ]
    )
    for row in out[:3]:
        assert row[CONVERSATION_ERROR] == (
            "conversation 'c' has turn 1 in rows 0, 1: a turn is one row, and the turns "
            "after it cannot say which came first"
        )
    assert [CONVERSATION_ERROR in row for row in out[3:]] == [False, False]
    assert [m["content"] for m in out[4]["history"]] == ["q", "a"]


def test_a_long_flat_conversation_makes_each_message_once():
    """The rows of a 2,000-turn flat conversation share their earlier turns' messages
    (each turn's history was made anew: 4 million dicts, seconds and gigabytes)."""
    n = 2000
    out = flat_turn_records(
        [
            {"conversation_id": "c", "turn": n - i, "question": f"q{n - i}", "answer": "a"}
            for i in range(n)
        ]
    )
    last, before = out[0], out[1]
    assert (last["turn"], len(last["history"])) == (n, 2 * (n - 1))
    assert [m["content"] for m in last["history"][:3]] == ["q1", "a", "q2"]
    assert all(a is b for a, b in zip(before["history"], last["history"], strict=False))
    messages = {id(m) for row in out for m in row["history"]}
    assert len(messages) == 2 * (n - 1)


# --- a turn's own history, from a flat table or given whole --------------------------------


def test_a_flat_table_without_contexts_is_judged_not_a_recursion_error(fake_llm_server):
    """In a flat table a turn's user message has the turn of its answer: looking the user
    message up as an earlier answer found that answer's own judgments, whose history held
    the same user message: a RecursionError, exit 70 for `judge eval` of any flat table
    whose first turn was not scored itself (no contexts: no faithfulness of its own)."""
    fake_llm_server.chat = heuristic_judge
    result = judge.evaluate(
        [
            {"conversation_id": "c", "turn": 1, "question": "Where?", "answer": "In Lyon."},
            {
                "conversation_id": "c",
                "turn": 2,
                "question": "How?",
                "answer": "In Lyon. By express.",
                "contexts": ["By express."],
            },
        ],
        metrics=["faithfulness", "supported_by_history"],
        llm=llm_at(fake_llm_server),
        progress=False,
    )
    first, second = result.rows
    assert first.reasons["faithfulness"] == "no_contexts"
    # "In Lyon." is the earlier answer's claim, itself unsupported (no contexts): no evidence
    assert second.scores == {"faithfulness": 0.5, "supported_by_history": 0.0}


@pytest.mark.parametrize(
    ("history", "why"),
    [
        (
            [
                {**user("q"), "turn": 1},
                {**assistant("Apples are red.", "Apples are red."), "turn": 2},
            ],
            "turn 2 is not in order",
        ),
        (
            [{**user("q"), "turn": 1}, {**assistant("A.", "A."), "turn": 5}],
            "turn 5 is not in order",
        ),
        (
            [{**user("q"), "turn": 1}, {**user("r"), "turn": 0}],
            "turn 0 is not in order",
        ),
        (
            [
                {**user("q"), "turn": 1},
                {**assistant("A.", "A."), "turn": 1},
                {**assistant("B.", "B."), "turn": 1},
            ],
            "a second assistant message at turn 1",
        ),
    ],
)
def test_a_given_history_out_of_order_is_the_rows_error_not_a_recursion(
    fake_llm_server, history, why
):
    """Rows given with their own `history` (turn records, as judge writes them): an answer
    numbered as the row's own turn (or after it) made the turn await its own judgments, a
    RecursionError that stopped the run (exit 70); two answers of one turn were judged as
    one. Such a history is now the row's error."""
    fake_llm_server.chat = heuristic_judge
    rows = [
        {
            "conversation_id": "c",
            "turn": 2,
            "question": "q2",
            "answer": "Apples are red.",
            "contexts": ["Pears are green."],
            "history": history,
        },
        {
            "id": "other",
            "question": "q",
            "answer": "Pears are green.",
            "contexts": ["Pears are green."],
        },
    ]
    result = judge.evaluate(
        rows, metrics=["faithfulness"], llm=llm_at(fake_llm_server), progress=False
    )
    row, other = result.rows
    assert other.scores["faithfulness"] == 1.0
    assert row.error is not None and why in row.error
