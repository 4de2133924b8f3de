"""A turn's verify call (the `verify_turn` prompt): the conversation in a block of its own,
bounded (`turns.given_for`), so a long chat's prompts stop growing with it, while a claim
only the user stated many turns before is still found in the conversation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import judge
from judge import LLM
from judge.metrics.judges import verify_turn_claims
from judge.metrics.prompts import load_prompt
from judge.metrics.turns import CONVERSATION_BUDGET, Said, given_for
from judge.testing import FakeLLMServer, heuristic_judge
from judge.testing.replies import data_blocks


def said(*texts: str) -> list[Said]:
    return [Said(f"user: {t}", "user", 2 * i + 1) for i, t in enumerate(texts)]


def test_a_conversation_that_fits_the_budget_is_given_whole():
    pieces = said("I live in Lyon.", "Which parcel options exist?")
    assert given_for(pieces, ["Nothing shared here."], budget=100) == pieces


def test_over_the_budget_the_pieces_sharing_the_claims_words_are_given_in_order():
    pieces = said(
        "I live in Lyon with my cat Felix.",  # shares Lyon, Felix
        "Which parcel options exist?",  # shares parcel
        "What about weekends?",  # shares nothing
        "Send my parcel express please.",  # shares parcel, express
    )
    claims = ["Felix lives in Lyon.", "The parcel goes express."]
    sizes = [len(p.text) for p in pieces]
    # Room for two pieces: the two sharing two words each, in conversation order.
    got = given_for(pieces, claims, budget=sizes[0] + sizes[3])
    assert got == [pieces[0], pieces[3]]
    # Room for three: the parcel question (one word) too, not the weekends (none).
    got = given_for(pieces, claims, budget=sizes[0] + sizes[3] + sizes[1])
    assert got == [pieces[0], pieces[1], pieces[3]]
    # Room for one: at a tie, the later piece.
    assert given_for(pieces, claims, budget=sizes[3]) == [pieces[3]]
    # A piece that does not fit is passed over for a smaller one that does.
    got = given_for(pieces, claims, budget=sizes[3] + sizes[2] + 1)
    assert got == [pieces[2], pieces[3]]


def test_the_most_relevant_piece_is_given_even_when_longer_than_the_budget():
    pieces = said("I live in Lyon. " + "Long story. " * 50, "Hello?")
    assert given_for(pieces, ["You live in Lyon."], budget=40) == [pieces[0]]


def test_the_chosen_pieces_never_exceed_the_budget_but_for_the_first():
    pieces = said(*(f"Message {i} about parcel {i % 7} and Lyon." for i in range(200)))
    got = given_for(pieces, ["Parcel 3 goes to Lyon."])
    assert sum(len(p.text) for p in got[1:]) <= CONVERSATION_BUDGET
    assert sum(len(p.text) for p in got) <= CONVERSATION_BUDGET
    assert [p.turn for p in got] == sorted(p.turn for p in got)


def long_chat(exchanges: int) -> dict[str, Any]:
    """A chat whose first user message says where they live, then `exchanges` more
    exchanges about other things, and a last answer resting on that first message."""
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "I live in Lyon and ordered a kettle."},
        {"role": "assistant", "content": "Thanks for your order.", "contexts": ["Orders ship."]},
    ]
    for i in range(exchanges):
        turns += [
            {"role": "user", "content": f"Question number {i} about warranty item {i}?"},
            {
                "role": "assistant",
                "content": f"Warranty item {i} lasts {i + 2} years.",
                "contexts": [f"Warranty item {i} lasts {i + 2} years."],
            },
        ]
    turns += [
        {"role": "user", "content": "Where will the kettle go?"},
        {
            "role": "assistant",
            "content": "I live in Lyon and ordered a kettle. Kettles ship in two days. "
            "Kettles are free on Sundays.",
            "contexts": ["Kettles ship in two days."],
        },
    ]
    return {"id": "long", "turns": turns}


def recording(sent: list[dict[str, Any]]):
    def chat(body: dict[str, Any]) -> str:
        sent.append(body)
        return heuristic_judge(body)

    return chat


def test_a_long_chats_turn_finds_the_first_user_message_and_its_prompt_stays_bounded():
    sent: list[dict[str, Any]] = []
    with FakeLLMServer(chat=recording(sent)) as server:
        llm = LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=0)
        result = judge.evaluate([long_chat(40)], metrics=["faithfulness"], llm=llm, progress=False)
    last = result.rows[-1]
    verdicts = last.evidence["answer_verdicts"]
    assert [(v["verdict"], v["source"]) for v in verdicts] == [
        ("supported", "history"),  # the user's first message, 41 exchanges before
        ("supported", "contexts"),
        ("not_found", None),  # invented
    ]
    assert (verdicts[0]["turn"], verdicts[0]["role"]) == (1, "user")
    turn_verifies = [
        data_blocks(b["messages"][1]["content"])
        for b in sent
        if b["messages"][0]["content"].startswith("You check each claim")
    ]
    assert len(turn_verifies) == len(result.rows)  # one per turn: nothing asked twice
    for blocks in turn_verifies:
        given = blocks["conversation"]
        assert sum(len(t) for t in given) <= CONVERSATION_BUDGET
    (final,) = [b for b in turn_verifies if "Kettles are free on Sundays." in b["claims"]]
    # 42 user messages and 41 verified claims were said; the block holds the first message
    assert "user: I live in Lyon and ordered a kettle." in final["conversation"]
    assert len(final["conversation"]) < 42
    # Every turn's whole verify prompt: below a fixed size however long the chat grew.
    sizes = [
        sum(len(m["content"]) for m in b["messages"])
        for b in sent
        if b["messages"][0]["content"].startswith("You check each claim")
    ]
    system = len(load_prompt("verify_turn").system)
    assert max(sizes) < system + 400 + CONVERSATION_BUDGET + 200  # claims, contexts, quoting


def test_the_reply_names_a_context_or_a_piece_of_the_conversation():
    replies = {
        "verdicts": [
            {"claim": 0, "reason": "r", "verdict": "supported", "context": 1, "said": 0},
            {"claim": 1, "reason": "r", "verdict": "supported", "context": None, "said": 1},
            {"claim": 2, "reason": "r", "verdict": "supported", "context": 9, "said": 7},
            {"claim": 3, "reason": "r", "verdict": "not_found", "context": None, "said": None},
        ]
    }

    class Session:
        async def chat(self, messages, output, **kwargs):
            self.schema = output.model_json_schema()
            return [output.model_validate(replies)]

    session = Session()
    found = asyncio.run(
        verify_turn_claims(
            session,  # type: ignore[arg-type]
            claims=["a", "b", "c", "d"],
            contexts=["x", "y"],
            conversation=["user: p", "user: q"],
        )
    )
    # contexts first (numbered 0, 1), then the conversation (2, 3); a number past the end
    # of its list is no evidence; both named: the turn's own context is the one kept
    assert [v.context for v in found] == [1, 3, None, None]
    item = session.schema["$defs"]["TurnVerdict"]["properties"]
    assert item["context"]["enum"] == [0, 1, None]
    assert item["said"]["enum"] == [0, 1, None]


@pytest.mark.parametrize("exchanges", [0, 3])
def test_every_turn_is_verified_with_the_turn_prompt(exchanges):
    """A turn always has its user's message before it: its verify call is the turn
    prompt's, never the single-row one (whose contexts block held the conversation too)."""
    sent: list[dict[str, Any]] = []
    with FakeLLMServer(chat=recording(sent)) as server:
        llm = LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=0)
        judge.evaluate([long_chat(exchanges)], metrics=["faithfulness"], llm=llm, progress=False)
    systems = [b["messages"][0]["content"] for b in sent]
    assert not any(s.startswith("You check numbered") for s in systems)
    assert sum(s.startswith("You check each claim") for s in systems) == exchanges + 2
