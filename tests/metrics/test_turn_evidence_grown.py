"""A turn's conversation evidence is grown from its previous turn's (`turns.SaidSoFar`):
it must be exactly `said_before` of its whole history, in the same order, with the same
texts, for every turn of random conversations, also where turns branch from one another
(two conversations of one id sharing a beginning)."""

from __future__ import annotations

import json
import random
from typing import Annotated, Any

import pytest
from pydantic import Field, WithJsonSchema, create_model

import judge
from judge import LLM
from judge.conversations import turn_records
from judge.metrics.judges import Verdict
from judge.metrics.turns import SaidSoFar, given_for, said_before
from judge.run.data import load_rows
from judge.samples import ROLES, Message
from judge.testing import FakeLLMServer, heuristic_judge
from judge.testing.replies import data_blocks, message_text
from tests.helpers.random_chats import random_chats

WORDS = ("Lyon", "daily", "nine euros", "five days", "far", "")


def random_history(rng: random.Random, length: int) -> tuple[list[Message], list[list[str]]]:
    """Messages of every role (blank ones too) and, per message, supported claims (an
    assistant's only), words repeated so that pieces repeat."""
    history, supported = [], []
    for turn in range(1, length + 1):
        role = rng.choice(ROLES)
        content = rng.choice(WORDS)
        history.append(Message(role, content, turn))
        claims = [rng.choice(WORDS[:-1]) for _ in range(rng.randint(0, 3))]
        supported.append(claims if role == "assistant" else [])
    return history, supported


@pytest.mark.parametrize("seed", range(40))
def test_evidence_grown_turn_by_turn_is_said_before_of_the_whole_history(seed):
    rng = random.Random(seed)
    history, supported = random_history(rng, rng.randint(0, 30))
    cuts = sorted(rng.sample(range(len(history) + 1), min(len(history) + 1, rng.randint(1, 6))))
    grown, start = SaidSoFar(), 0
    for cut in cuts:
        grown = grown.then(history[start:cut], supported[start:cut])
        assert grown.items() == said_before(history[:cut], supported[:cut])
        start = cut
    # Branches: two continuations of one beginning, each grown after the other had been.
    base = SaidSoFar().then(history[: len(history) // 2], supported[: len(history) // 2])
    other, others = random_history(rng, rng.randint(0, 10))
    first = base.then(history[len(history) // 2 :], supported[len(history) // 2 :])
    second = base.then(other, others)
    third = base.then(other, others)
    half = history[: len(history) // 2]
    assert first.items() == said_before(history, supported)
    assert (
        second.items()
        == third.items()
        == said_before([*half, *other], [*supported[: len(half)], *others])
    )
    assert base.items() == said_before(half, supported[: len(half)])
    assert first.then(other, others).items() == said_before(
        [*history, *other], [*supported, *others]
    )


Verify = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def recording(verifies: list[Verify]) -> Any:
    """heuristic_judge, recording each verify request's claims, contexts and conversation
    (none for a turn with nothing said before it: the single-row prompt)."""

    def chat(body: dict[str, Any]) -> str:
        for message in body.get("messages") or []:
            if message.get("role") == "user":
                blocks = data_blocks(message_text(message.get("content")))
                if {"claims", "contexts"} <= set(blocks):
                    conversation = tuple(blocks.get("conversation", ()))
                    verifies.append(
                        (tuple(blocks["claims"]), tuple(blocks["contexts"]), conversation)
                    )
                break
        return heuristic_judge(body)

    return chat


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_every_turns_verify_evidence_is_its_contexts_then_said_before(seed):
    """Each turn's verify call carries its contexts and, in its conversation block,
    `said_before` of its history (the earlier turns' supported claims as the run judged
    them) as `given_for` bounds it: prompts are what they were before evidence was grown
    turn by turn."""
    # The branches (sharing an id and their first turns with earlier conversations) given
    # ids of their own: as conversations or as rows with their histories, a conversation
    # of an earlier one's id, or a row at an earlier row's turn of it, is an error row.
    chats = [{**c, "id": f"{c['id']}/{number}"} for number, c in enumerate(random_chats(seed))]
    turns = [row for number, c in enumerate(chats) for row in turn_records(c, number)]
    verifies: list[Verify] = []
    with FakeLLMServer(chat=recording(verifies)) as server:
        llm = LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=0)
        result = judge.evaluate(turns, metrics=["faithfulness"], llm=llm, progress=False)
    rows, _, _ = load_rows(turns)
    assert not any(r.errors for r in result.rows)
    # Each turn's supported claims, by its conversation (in input order) and turn.
    expected = set()
    supported: dict[int, list[str]] = {}
    last: tuple[str | None, int] = (None, 0)
    for row, judged in zip(rows, result.rows, strict=True):
        sample = row.sample
        assert sample is not None and sample.turn is not None
        if sample.conversation_id != last[0] or sample.turn <= last[1]:  # the next one
            supported = {}
        last = (sample.conversation_id, sample.turn)
        evidence = judged.evidence
        claims = evidence.get("answer_claims", [])
        verdicts = evidence.get("answer_verdicts", [])
        supported[sample.turn] = [
            claims[v["claim"]] for v in verdicts if v["verdict"] == "supported"
        ]
        per_message = [
            supported.get(m.turn, []) if m.role == "assistant" else [] for m in sample.history
        ]
        said = given_for(said_before(sample.history, per_message), claims)
        if claims:
            expected.add((tuple(claims), tuple(sample.contexts), tuple(i.text for i in said)))
    assert expected and set(verifies) == expected


def pydantic_verify_schema(contexts: int, claims: int) -> dict[str, Any]:
    """The verify reply's JSON schema as pydantic makes it of the model judge always used:
    `claims` verdicts, each naming one of `contexts` numbers or none."""
    number: Any = Annotated[
        int | None,
        Field(ge=0, description="supporting context number"),
        WithJsonSchema(
            {"enum": [*range(contexts), None], "description": "supporting context number"}
        ),
    ]
    verdict: Any = create_model("Verdict", __base__=Verdict, context=(number, None))
    sized: Any = Annotated[list[verdict], Field(min_length=claims, max_length=claims)]
    return create_model(f"VerdictList{claims}", verdicts=(sized, ...)).model_json_schema()


def test_the_verify_schema_of_every_evidence_count_is_pydantics():
    """Rows' verify calls each list another number of contexts: their schema (in the
    request and its cache key) is made faster than pydantic makes it, and must be the
    same, byte for byte, for every count. (A turn's verify call, `verify_turn`, has its
    own schema, made by pydantic.)"""
    sent: list[tuple[int, int, dict[str, Any]]] = []

    def chat(body: dict[str, Any]) -> str:
        blocks = data_blocks(message_text(body["messages"][-1]["content"]))
        if {"claims", "contexts"} <= set(blocks):
            schema = body["response_format"]["json_schema"]["schema"]
            sent.append((len(blocks["contexts"]), len(blocks["claims"]), schema))
        return heuristic_judge(body)

    rows: list[dict[str, Any]] = []
    for i in range(12):
        answer = " ".join(f"Fact {i} {j}." for j in range(1 + i % 3))
        rows.append({"question": f"Question {i}?", "answer": answer, "contexts": [answer] * i})
    with FakeLLMServer(chat=chat) as server:
        llm = LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=0)
        judge.evaluate(rows, metrics=["faithfulness"], llm=llm, progress=False)
    assert len({(contexts, claims) for contexts, claims, _ in sent}) >= 10
    for contexts, claims, schema in sent:
        expected = pydantic_verify_schema(contexts, claims)
        assert json.dumps(schema) == json.dumps(expected), (contexts, claims)
