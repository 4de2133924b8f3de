"""bench/quality/conversations_local.py: its labelled conversations and the single-turn
cost it measures without the model."""

from __future__ import annotations

from types import SimpleNamespace

from bench.quality.conversations_local import (
    CONVERSATIONS,
    LONG_CONVERSATIONS,
    LONG_ORDER,
    ORDER,
    claim_outcome,
    conversations,
    cut_turns,
    flattened_cost,
    labels_by_turn,
    llm_for,
    single_rows,
)


def test_every_answer_sentence_has_a_label_and_judge_reads_none_of_them():
    assert set(ORDER) == {c["id"] for c in CONVERSATIONS}
    for conv in conversations():
        for turn in conv["turns"]:
            assert not {"labels", "retention", "query_label"} & set(turn)
    labels = labels_by_turn()
    assert [r["id"] for r in single_rows()] == list(labels)
    kinds = [label for turn in labels.values() for label in turn["labels"]]
    # some claims rest on the conversation alone, some on the contexts, some on nothing
    assert {k: kinds.count(k) >= 4 for k in ("contexts", "history", "none")} == dict.fromkeys(
        ("contexts", "history", "none"), True
    )


def test_a_verdict_is_read_as_its_source():
    assert claim_outcome({"verdict": "supported", "source": "history"}) == "history"
    assert claim_outcome({"verdict": "supported", "source": "contexts"}) == "contexts"
    assert claim_outcome({"verdict": "supported"}) == "contexts"  # a single-turn row's
    assert claim_outcome({"verdict": "not_found", "source": None}) == "none"


def test_the_flattened_turns_verify_the_claims_the_model_gave_the_conversation():
    claims = {"lyon#2": ["We ship boxes anywhere in France.", "Standard shipping is slow."]}
    rows = [SimpleNamespace(id=i, evidence={"answer_claims": c}) for i, c in claims.items()]
    count, requests, characters = flattened_cost(rows, llm_for("openai/fake", "http://x/v1"))
    # one turn: its claims call and its verify call, which reads exactly those claims
    assert (count, requests) == (1, 2)
    assert characters > sum(len(c) for c in claims["lyon#2"])


def test_the_long_conversations_later_turns_are_those_the_bound_cuts():
    assert set(LONG_ORDER) == {c["id"] for c in LONG_CONVERSATIONS}
    labels = labels_by_turn(LONG_CONVERSATIONS)
    for turn in labels.values():
        assert len(turn["relevant"]) == len(turn["contexts"])
        assert set(turn["labels"]) <= {"contexts", "history", "none"}
    assert [name for name, _ in cut_turns(LONG_CONVERSATIONS)] == [
        "movers#4",
        "movers#6",
        "dinner#4",
        "dinner#6",
    ]
    # the user's first message, which the later answers rest on, is beyond the bound
    for _, sample in cut_turns(LONG_CONVERSATIONS):
        first = sample.history[0].content
        assert first in sample.question_in_context(budget=None)
        assert first not in sample.question_in_context()
    assert cut_turns(CONVERSATIONS) == []  # the short ones are read whole
