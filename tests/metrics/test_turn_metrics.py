"""Each assistant turn is judged with the conversation before it: a claim supported only by
what the user said earlier is supported with source `history`; an invented one is not, nor
one an earlier answer invented; a contradiction of an earlier user statement lowers
knowledge_retention. Judged through the real HTTP path (the fake server's heuristic judge:
sentences are claims, a claim is supported by the first piece of evidence holding all its
words)."""

from __future__ import annotations

import json
import math

import pytest

import judge
from judge.testing import FakeLLMServer, heuristic_judge
from judge.testing.replies import data_blocks

CHAT = {
    "id": "parcel",
    "turns": [
        {"role": "user", "content": "I live in Lyon. Which parcel options exist?"},
        {
            "role": "assistant",
            "content": "Express delivery takes one day. Mars parcels travel free.",
            "contexts": ["Express delivery takes one day."],
        },
        {"role": "user", "content": "Send it express then."},
        {
            "role": "assistant",
            "content": "You live in Lyon. Express delivery takes one day. "
            "Mars parcels travel free. Couriers collect parcels daily.",
            "contexts": ["Couriers collect parcels daily."],
        },
    ],
}


def rows_of(result):
    return {r.id: r for r in result.rows}


def test_claims_rest_on_contexts_or_on_the_conversation_and_inventions_on_neither(models):
    result = judge.evaluate(
        [CHAT],
        metrics=["faithfulness", "hallucination_rate", "supported_by_history"],
        llm=models["llm"],
        progress=False,
    )
    rows = rows_of(result)
    first, second = rows["parcel#2"], rows["parcel#4"]
    assert (first.conversation_id, first.turn, second.turn) == ("parcel", 2, 4)
    verdicts = second.evidence["answer_verdicts"]
    claims = second.evidence["answer_claims"]
    by_claim = {claims[v["claim"]]: v for v in verdicts}
    # "You live in Lyon." is in no context: only the user said it (turn 1)
    lyon = by_claim["You live in Lyon."]
    assert lyon["verdict"] == "not_found"  # the user said "I live", not "You live"
    express = by_claim["Express delivery takes one day."]
    assert express["verdict"] == "supported" and express["source"] == "history"
    assert (express["turn"], express["role"]) == (2, "assistant")
    assert express["context"] == "conversation, turn 2 (assistant)"
    # invented at turn 2, repeated at turn 4: an unsupported claim is no evidence
    assert by_claim["Mars parcels travel free."]["verdict"] == "not_found"
    couriers = by_claim["Couriers collect parcels daily."]
    assert couriers["source"] == "contexts" and couriers["context"] == 0
    assert second.scores["faithfulness"] == pytest.approx(2 / 4)
    assert second.scores["supported_by_history"] == pytest.approx(1 / 4)
    assert second.scores["hallucination_rate"] == 1.0
    assert first.scores["faithfulness"] == pytest.approx(1 / 2)
    assert first.scores["supported_by_history"] == 0.0


def test_a_claim_only_the_user_stated_is_supported_by_history(models):
    chat = {
        "id": "c",
        "turns": [
            {"role": "user", "content": "My parcel weighs four kilos."},
            {"role": "assistant", "content": "Noted.", "contexts": ["Rates depend on weight."]},
            {"role": "user", "content": "What will it cost?"},
            {
                "role": "assistant",
                "content": "My parcel weighs four kilos. Parcels cost ten euros.",
                "contexts": ["Parcels cost ten euros."],
            },
        ],
    }
    result = judge.evaluate([chat], metrics=["faithfulness"], llm=models["llm"], progress=False)
    row = rows_of(result)["c#4"]
    verdicts = row.evidence["answer_verdicts"]
    assert [(v["verdict"], v["source"]) for v in verdicts] == [
        ("supported", "history"),
        ("supported", "contexts"),
    ]
    assert verdicts[0]["turn"] == 1 and verdicts[0]["role"] == "user"
    assert row.scores["faithfulness"] == 1.0
    # the same answer as a single-turn row has nothing but its contexts to rest on
    alone = judge.evaluate(
        [
            {
                "question": "What will it cost?",
                "answer": chat["turns"][3]["content"],
                "contexts": ["Parcels cost ten euros."],
            }
        ],
        metrics=["faithfulness"],
        llm=models["llm"],
        progress=False,
    )
    assert alone.rows[0].scores["faithfulness"] == 0.5


def test_each_turn_costs_the_requests_of_a_single_turn_row(models, fake_llm_server):
    """Earlier turns' judgments, which later turns need, are their own rows' requests:
    served from the cache (or the request in flight), never made twice."""
    turns = []
    for i in range(5):
        turns += [
            {"role": "user", "content": f"Question number {i}?"},
            {
                "role": "assistant",
                "content": f"Answer number {i}.",
                "contexts": [f"Answer number {i}."],
            },
        ]
    fake_llm_server.reset()
    judge.evaluate(
        [{"id": "long", "turns": turns}],
        metrics=["faithfulness"],
        llm=models["llm"],
        progress=False,
    )
    assert fake_llm_server.count("/v1/chat/completions") == 5 * 2  # claims + verify per turn


def contradicting_judge(body: dict) -> str:
    """The heuristic judge, but an answer naming Paris contradicts an earlier Lyon."""
    system = body["messages"][0]["content"]
    if system.startswith("You check whether"):
        blocks = data_blocks(body["messages"][1]["content"])
        return json.dumps(
            {
                "verdicts": [
                    {
                        "statement": i,
                        "reason": "another city" if "Lyon" in said else "not touched",
                        "verdict": "contradicted"
                        if "Lyon" in said and "Paris" in blocks["answer"]
                        else "kept"
                        if "Lyon" in said
                        else "unrelated",
                    }
                    for i, said in enumerate(blocks["earlier"])
                ]
            }
        )
    return heuristic_judge(body)


def test_a_contradiction_of_an_earlier_user_statement_lowers_knowledge_retention(
    models, fake_llm_server: FakeLLMServer
):
    fake_llm_server.chat = contradicting_judge

    def chat(last: str) -> dict:
        return {
            "id": last,
            "turns": [
                {"role": "user", "content": "Deliver it to Lyon, please."},
                {"role": "assistant", "content": "Sure.", "contexts": ["We deliver."]},
                {"role": "user", "content": "When will it arrive?"},
                {"role": "assistant", "content": last, "contexts": ["Parcels take a day."]},
            ],
        }

    result = judge.evaluate(
        [chat("It reaches Lyon tomorrow."), chat("It reaches Paris tomorrow.")],
        metrics=["knowledge_retention"],
        llm=models["llm"],
        progress=False,
    )
    rows = [r for r in result.rows if r.turn == 4]
    assert [r.scores["knowledge_retention"] for r in rows] == [1.0, 0.0]
    assert rows[1].evidence["retention"][0]["verdict"] == "contradicted"
    first_turns = [r for r in result.rows if r.turn == 2]
    assert all(math.isnan(r.scores["knowledge_retention"]) for r in first_turns)
    assert all(r.reasons["knowledge_retention"] == "no_history" for r in first_turns)
    assert result.summary["knowledge_retention"].mean == 0.5


def test_conversation_metrics_on_ordinary_rows_are_nan_with_a_reason(models):
    result = judge.evaluate(
        [{"question": "Q?", "answer": "A.", "contexts": ["A."]}],
        metrics=["supported_by_history", "knowledge_retention", "query_rewrite_fidelity"],
        llm=models["llm"],
        progress=False,
    )
    assert result.rows[0].reasons == {
        "supported_by_history": "not_a_turn",
        "knowledge_retention": "not_a_turn",
        "query_rewrite_fidelity": "not_a_turn",
    }


def test_query_rewrite_fidelity_judges_the_recorded_query_against_the_message(
    models, fake_llm_server: FakeLLMServer
):
    def chat(cid: str, query: str | None) -> dict:
        last: dict = {"role": "assistant", "content": "It costs five euros.", "contexts": ["x"]}
        if query is not None:
            last["query"] = query
        return {
            "id": cid,
            "turns": [
                {"role": "user", "content": "I am sending a parcel to Lyon."},
                {"role": "assistant", "content": "Noted.", "contexts": ["We deliver."]},
                {"role": "user", "content": "How much is express?"},
                last,
            ],
        }

    fake_llm_server.reset()
    result = judge.evaluate(
        [
            chat("kept", "How much is express delivery to Lyon?"),
            chat("lost", "delivery price"),
            chat("none", None),
        ],
        metrics=["query_rewrite_fidelity"],
        llm=models["llm"],
        progress=False,
    )
    rows = rows_of(result)
    assert rows["kept#4"].scores["query_rewrite_fidelity"] == 1.0
    assert rows["lost#4"].scores["query_rewrite_fidelity"] == 0.0
    assert rows["lost#4"].evidence["query_rewrite"]["verdict"] == "incomplete"
    assert rows["none#4"].reasons["query_rewrite_fidelity"] == "no_query"
    assert rows["kept#2"].reasons["query_rewrite_fidelity"] == "no_query"
    # the judge read the conversation before the message, as "role: text" lines
    (asked,) = [
        r.body
        for r in fake_llm_server.requests
        if "delivery price" in r.body["messages"][1]["content"]
    ]
    blocks = data_blocks(asked["messages"][1]["content"])
    assert blocks["conversation"] == ["user: I am sending a parcel to Lyon.", "assistant: Noted."]
    assert blocks["message"] == "How much is express?"
    assert fake_llm_server.count("/v1/chat/completions") == 2  # one per turn with a query


def test_goal_accuracy_judges_the_whole_conversation_on_its_final_turn(models):
    def chat(cid: str, last: str, reference: str | None = "The parcel is booked to Lyon.") -> dict:
        record: dict = {
            "id": cid,
            "turns": [
                {"role": "user", "content": "Book my parcel to Lyon."},
                {"role": "assistant", "content": "Which day?", "contexts": ["x"]},
                {"role": "user", "content": "Monday."},
                {"role": "assistant", "content": last, "contexts": ["x"]},
            ],
        }
        if reference is not None:
            record["reference"] = reference
        return record

    result = judge.evaluate(
        [
            chat("done", "The parcel is booked to Lyon for Monday."),
            chat("missed", "Sorry, Monday is full."),
            chat("none", "Booked.", reference=None),
        ],
        metrics=["goal_accuracy"],
        llm=models["llm"],
        progress=False,
    )
    rows = rows_of(result)
    assert rows["done#4"].scores["goal_accuracy"] == 1.0
    assert rows["missed#4"].scores["goal_accuracy"] == 0.0
    assert rows["done#2"].reasons["goal_accuracy"] == "not_final_turn"
    assert rows["none#4"].reasons["goal_accuracy"] == "no_reference"
    assert rows["missed#4"].evidence["goal"]["verdict"] == "not_achieved"


def test_a_run_of_conversations_writes_each_conversations_means(models, tmp_path):
    chats = [
        {
            "id": cid,
            "reference": "Express delivery takes one day.",
            "turns": [
                {"role": "user", "content": "Which options exist?"},
                {
                    "role": "assistant",
                    "content": first,
                    "contexts": ["Express delivery takes one day."],
                },
                {"role": "user", "content": "And then?"},
                {
                    "role": "assistant",
                    "content": "Express delivery takes one day.",
                    "contexts": ["Express delivery takes one day."],
                },
            ],
        }
        for cid, first in (("b", "Express delivery takes one day."), ("a", "Mars is red."))
    ]
    out = tmp_path / "out"
    result = judge.evaluate(
        chats, metrics=["faithfulness", "goal_accuracy"], llm=models["llm"], progress=False
    )
    result.write(out)
    lines = [json.loads(line) for line in (out / "conversations.jsonl").read_text().splitlines()]
    assert [c["conversation_id"] for c in lines] == ["b", "a"]  # input order
    assert lines[0] == {
        "conversation_id": "b",
        "turns": 2,
        "scores": {"faithfulness": 1.0, "goal_accuracy": 1.0},
        "scored": {"faithfulness": 2, "goal_accuracy": 1},
    }
    assert lines[1]["scores"]["faithfulness"] == 0.5
    # an ordinary run in the same folder leaves no conversations file behind
    judge.evaluate(
        [{"question": "Q?", "answer": "A.", "contexts": ["A."]}],
        metrics=["faithfulness"],
        llm=models["llm"],
        progress=False,
    ).write(out)
    assert not (out / "conversations.jsonl").exists()


def test_a_claim_repeated_in_later_answers_is_one_piece_of_evidence(models, fake_llm_server):
    said = "Express delivery takes one day."
    turns: list[dict] = []
    for i in range(4):
        turns += [
            {"role": "user", "content": f"Tell me again, time {i}."},
            {"role": "assistant", "content": said, "contexts": [said]},
        ]
    fake_llm_server.reset()
    judge.evaluate(
        [{"id": "r", "turns": turns}], metrics=["faithfulness"], llm=models["llm"], progress=False
    )
    last = [
        data_blocks(r.body["messages"][1]["content"])["conversation"]
        for r in fake_llm_server.requests
        if r.body["messages"][0]["content"].startswith("You check each claim")
    ]
    longest = max(last, key=len)
    assert longest.count("assistant, verified: " + said) == 1
    # the four user messages, the earlier answers' claim once
    assert len(longest) == 4 + 1
