"""bench/quality/conversation_cost.py: its synthetic conversations and its DeepEval responder."""

from __future__ import annotations

import hashlib
import json
import re

from bench.quality.conversation_cost import conversations, deepeval_answer, single_rows


def test_the_conversations_are_the_same_on_every_run_and_shorter_ones_are_prefixes():
    digest = hashlib.sha256(json.dumps(conversations(3, 4)).encode()).hexdigest()
    # Pinned: a change of generator (or of Python's seeded random) changes every figure.
    assert digest == "df2df0d17ba2c53c8bf3fb82db9c98ea9bef46ea422bf6dac027f208d1155211"
    long, short = conversations(2, 8), conversations(2, 3)
    assert [c["turns"][:6] for c in long] == [c["turns"] for c in short]
    assert conversations(2, 3, seed=1) != short


def test_the_conversations_have_the_intended_lengths():
    convs = conversations(10, 8)
    users = [t for c in convs for t in c["turns"][0::2]]
    answers = [t for c in convs for t in c["turns"][1::2]]
    assert {t["role"] for t in users} == {"user"} and {t["role"] for t in answers} == {"assistant"}
    words = lambda texts: sum(len(t.split()) for t in texts) / len(texts)  # noqa: E731
    assert 12 <= words([t["content"] for t in users]) <= 18
    assert 35 <= words([t["content"] for t in answers]) <= 50
    assert 50 <= words([c for t in answers for c in t["contexts"]]) <= 70
    assert all(len(t["contexts"]) == 3 and t["ground_truth"] for t in answers)
    assert {len(re.findall(r"\.(?:\s|$)", t["content"])) for t in answers} == {3, 4}


def test_single_rows_are_each_assistant_turn_with_the_user_message_before_it():
    conv = conversations(1, 2)[0]
    rows = single_rows([conv])
    assert [r["id"] for r in rows] == ["conv0#2", "conv0#4"]
    assert rows[1]["question"] == conv["turns"][2]["content"]
    assert rows[1]["answer"] == conv["turns"][3]["content"]
    assert rows[1]["contexts"] == conv["turns"][3]["contexts"]


def _verdicts_body(item: str, prompt: str) -> dict:
    schema = {
        "title": "Verdicts",
        "properties": {"verdicts": {"items": {"$ref": f"#/$defs/{item}"}, "type": "array"}},
    }
    return {
        "messages": [{"role": "user", "content": prompt}],
        "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
    }


def test_deepeval_faithfulness_gets_one_verdict_per_claim_by_word_overlap():
    prompt = (
        "RULES:\n- One verdict per claim.\n\nREFERENCE CONTEXT:\nParis is in France.\n\n"
        "Lyon has a river.\n\nCLAIMS:\n['Paris is in France.', 'Rome is in Spain.', "
        "'Lyon has a river.']\n\nJSON:\n"
    )
    reply = json.loads(deepeval_answer(_verdicts_body("FaithfulnessVerdict", prompt)))
    assert [v["verdict"] for v in reply["verdicts"]] == ["yes", "borderline", "yes"]


def test_deepeval_precision_gets_one_verdict_per_document():
    prompt = (
        "User Message:\nWhere is Paris?\n\nAssistant Output:\nParis is in France.\n\n"
        "Retrieval Context (3 documents):\n['Paris is in France.', 'x', 'y']\n\nJSON:\n"
    )
    reply = json.loads(deepeval_answer(_verdicts_body("ContextualPrecisionVerdict", prompt)))
    assert len(reply["verdicts"]) == 3
