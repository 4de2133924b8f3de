"""What the judges reading a turn's question (claims, context grades and sentences) get of
the conversation before it: the last four messages, the most recent first while they fit
in QUESTION_CONTEXT_BUDGET characters, the most recent cut to its end when it alone is
longer. Single-turn rows, and turns whose conversation fits, are asked exactly what they
were asked before the bound (pinned digests of their requests and judgments)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import judge
from judge import Cache
from judge.json_values import sha256_hex
from judge.samples import QUESTION_CONTEXT_BUDGET, Message, Sample, context_before
from judge.testing import FakeLLMServer, heuristic_judge
from judge.testing.replies import data_blocks

RAG = ["faithfulness", "answer_relevancy", "context_precision", "context_recall"]


def messages(*pairs: tuple[str, str]) -> list[Message]:
    return [Message(role, content, i + 1) for i, (role, content) in enumerate(pairs)]


def test_a_short_conversation_gives_its_last_four_messages_whole():
    history = messages(
        ("user", "Hello."),
        ("assistant", "Hi, how can I help?"),
        ("user", "I live in Lyon."),
        ("assistant", "Noted."),
        ("user", "I ordered a kettle."),
        ("assistant", "It ships today."),
        ("user", "When does it arrive?"),  # the question's own message: not before it
    )
    assert context_before(history, 4) == [
        "user: I live in Lyon.",
        "assistant: Noted.",
        "user: I ordered a kettle.",
        "assistant: It ships today.",
    ]


def test_over_the_budget_the_latest_messages_are_given_and_an_older_one_too_long_ends_them():
    long_answer = "Our parcels go everywhere. " * 20  # 540 characters
    history = messages(
        ("user", "I live in Lyon."),
        ("assistant", long_answer.strip()),
        ("user", "And the kettle?"),
        ("assistant", "Kettles ship in two days."),
        ("user", "And to Lyon?"),  # the question's own message: not before it
    )
    got = context_before(history, 4, budget=100)
    # the short first message would fit, but after a gap it would read as the one before
    assert got == ["user: And the kettle?", "assistant: Kettles ship in two days."]
    assert context_before(history, 4, budget=None) == [
        f"{m.role}: {m.content}" for m in history[:-1]
    ]


def test_the_latest_message_alone_over_the_budget_is_given_as_its_end_from_a_words_start():
    answer = " ".join(f"word{i}" for i in range(300)) + " Shall I book express?"
    history = messages(("user", "I live in Lyon."), ("assistant", answer), ("user", "Yes?"))
    (line,) = context_before(history, 4, budget=120)
    assert line.startswith("assistant: ...word")
    assert line.endswith("Shall I book express?")
    assert len(line) <= 120
    kept = line.removeprefix("assistant: ...")
    assert answer.endswith(kept) and f" {kept}" in answer  # cut before a word, not inside it


def test_text_without_spaces_is_cut_anywhere_within_the_budget():
    answer = "上海到北京每天都有多班高铁，" * 60
    history = messages(("user", "你好"), ("assistant", answer), ("user", "好的"))
    (line,) = context_before(history, 4, budget=50)
    assert line.startswith("assistant: ...") and answer.endswith(line[len("assistant: ...") :])
    assert len(line) == 50


FLAGS = "\U0001f1fa\U0001f1f8\U0001f1eb\U0001f1f7"  # two flags: four regional indicators
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji of five code points


@pytest.mark.parametrize(
    "answer",
    [
        "e\u0301" * 300 + "!",  # e and a combining acute accent: one letter, two code points
        FLAGS * 150 + "!",  # a cut between a flag's two halves pairs the others wrongly
        FAMILY * 130 + "!!",
        "\u0915\u094d\u0937\u093e" * 150 + "!",  # Devanagari ksa: one cluster of four
        "line\r\n" * 100 + "!",  # a cut between CR and LF leaves a lone LF
        "word " * 100 + " \u0301" * 100 + "!",  # a space followed by an accent is one character
    ],
    ids=["combining accent", "flags", "family emoji", "indic conjunct", "crlf", "accented space"],
)
def test_a_cut_message_keeps_whole_the_characters_it_gives(answer):
    import regex

    history = messages(("user", "Hi."), ("assistant", answer), ("user", "Sure?"))
    (line,) = context_before(history, 4, budget=100)
    kept = line.removeprefix("assistant: ...")
    assert answer.endswith(kept) and len(line) <= 100 and kept.endswith("!")
    # what is given starts where a character a reader sees starts (a grapheme cluster,
    # Unicode's UAX #29), and reads as the end of the message does: the same characters
    whole, tail = regex.findall(r"\X", answer), regex.findall(r"\X", kept)
    assert tail == whole[len(whole) - len(tail) :]


# Characters that join others into one cluster, or break it, for the property below.
PIECES = [
    "a",
    " ",
    "\r",
    "\n",
    "\u0301",
    "\u200d",
    "\ufe0f",
    "\U0001f468",
    "\U0001f1fa",
    "\U0001f1f8",
    "\u1100",
    "\u1161",
    "\u11a8",
    "\uac00",
    "\u0915",
    "\u094d",
    "\u093e",
    "\u0600",
    "\x00",
    "\u0e33",
    "\u00a9",
    "中",
]


@settings(max_examples=300, deadline=None)
@given(
    answer=st.lists(st.sampled_from(PIECES), min_size=1, max_size=60).map("".join),
    budget=st.integers(min_value=15, max_value=60),
)
def test_any_cut_message_is_the_end_of_its_grapheme_clusters(answer, budget):
    import regex

    if not answer.strip():
        return  # an assistant message that says nothing is not given
    history = messages(("user", "Hi."), ("assistant", answer), ("user", "Sure?"))
    (line,) = context_before(history, 1, budget=budget)
    if line == f"assistant: {answer}":
        return  # it fit
    kept = line.removeprefix("assistant: ...")
    assert answer.endswith(kept) and len(line) <= budget
    whole, tail = regex.findall(r"\X", answer), regex.findall(r"\X", kept)
    assert tail == whole[len(whole) - len(tail) :]


def test_a_message_of_one_character_longer_than_the_budget_is_given_as_nothing_of_it():
    answer = "a" + "\u0301" * 1000  # one letter and a thousand accents: one character
    history = messages(("user", "Hi."), ("assistant", answer), ("user", "Sure?"))
    assert context_before(history, 4, budget=100) == ["assistant: ..."]


def test_a_single_turn_rows_question_is_read_alone_and_a_turns_question_whole():
    question = "Which shipping option gets my boxes to Lyon fastest? " * 40
    assert Sample(question).question_in_context() == question
    turn = Sample(
        question,
        history=tuple(
            messages(("user", "x " * 400), ("assistant", "y " * 400), ("user", question))
        ),
        turn=4,
        conversation_id="c",
    )
    read = turn.question_in_context()
    assert read.endswith(f"\nQuestion now: {question}")  # the question is never cut
    before = read.removeprefix("Conversation so far:\n").removesuffix(f"\nQuestion now: {question}")
    assert before.startswith("assistant: ...") and "user:" not in before
    assert len(before) <= QUESTION_CONTEXT_BUDGET


def recorded(data: list[dict[str, Any]], metrics: list[str]) -> tuple[list[Any], str, str]:
    """Judge `data` at a fake server with a cache: the chat requests sent, and digests of
    the requests' cache material (without the server's address) and of the judgments."""
    sent: list[dict[str, Any]] = []

    def chat(body: dict[str, Any]) -> str:
        sent.append(body)
        return heuristic_judge(body)

    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=chat) as server:
        path = str(Path(tmp) / "cache.sqlite")
        result = judge.evaluate(
            data,
            metrics=metrics,
            llm=judge.LLM(
                "openai/judge-model", api_base=server.base_url, api_key="k", max_retries=0
            ),
            embeddings=judge.Embeddings(
                "openai/embed-model", api_base=server.base_url, api_key="k"
            ),
            cache=Cache(path),
            progress=False,
        )
        material = sorted(
            json.dumps({k: v for k, v in e.request.items() if k != "server"}, sort_keys=True)
            for e in Cache(path, mode="replay").entries()
        )
    judged = [
        json.dumps({k: r.to_json().get(k) for k in ("scores", "evidence")}, sort_keys=True)
        for r in result.rows
    ]
    return sent, sha256_hex("\n".join(material)), sha256_hex("\n".join(judged))


ROW = {
    "id": "r1",
    "question": "Which option gets my three boxes to Lyon fastest?",
    "answer": "Express shipping takes one day. Standard shipping takes three days.",
    "contexts": ["Express shipping takes one day.", "Standard shipping takes three days."],
    "ground_truth": "Express shipping takes one day.",
}
SHORT_CHAT = {
    "id": "short",
    "turns": [
        {"role": "user", "content": "I live in Lyon and need to ship three boxes."},
        {
            "role": "assistant",
            "content": "Standard shipping takes three days.",
            "contexts": ["Standard shipping takes three days."],
            "ground_truth": "Standard shipping takes three days.",
        },
        {"role": "user", "content": "Which option is fastest?"},
        {
            "role": "assistant",
            "content": "Express shipping takes one day. Your boxes reach Lyon tomorrow.",
            "contexts": ["Express shipping takes one day."],
            "ground_truth": "Express shipping takes one day.",
        },
    ],
}


@pytest.mark.parametrize(
    ("data", "requests", "judgments"),
    [
        # Computed on the code before the bound; a deliberate prompt change re-pins them.
        (
            [ROW],
            "c1f4482e8537978312e2d4042336321e15289a7fc6297420b7d554e588cee44b",
            "99c0f3a483141b393e6d1e5f1c18f0a852cbef77609b3b5e27c62f1a8027b66c",
        ),
        (
            [SHORT_CHAT],
            "22795e0fcb745ea43954a9d58513063126aaa96ac12b583ee400f391aa0b84be",
            "8bf90f2421ca0551e5864f64c0d9e8b2a9add9b4973f6f94886b38a08f5582bb",
        ),
    ],
    ids=["single-turn row", "conversation within the budget"],
)
def test_rows_the_bound_does_not_cut_are_asked_and_judged_as_before(data, requests, judgments):
    _, got_requests, got_judgments = recorded(data, RAG)
    assert (got_requests, got_judgments) == (requests, judgments)


def test_a_long_chats_claims_and_grading_calls_read_its_latest_exchange_within_the_budget():
    answer = "Parcels go to every city in France. " * 25 + "Shall I book express?"
    chat = {
        "id": "long",
        "turns": [
            {"role": "user", "content": "I live in Lyon and need to ship three boxes."},
            {"role": "assistant", "content": answer, "contexts": ["Parcels go everywhere."]},
            {"role": "user", "content": "Yes, which is fastest?"},
            {
                "role": "assistant",
                "content": "Express shipping takes one day.",
                "contexts": ["Express shipping takes one day."],
                "ground_truth": "Express shipping takes one working day.",
            },
        ],
    }
    sent, _, _ = recorded([chat], RAG)
    read = [
        (b["messages"][0]["content"].split()[1], blocks["question"])
        for b in sent
        if "Yes, which is fastest?"
        in (blocks := data_blocks(b["messages"][1]["content"])).get("question", "")
    ]
    # the claims calls (the answer's, the ground truth's) and the grading call
    assert sorted(kind for kind, _ in read) == ["judge", "split", "split"]
    for _, question in read:
        before = question.removeprefix("Conversation so far:\n").removesuffix(
            "\nQuestion now: Yes, which is fastest?"
        )
        assert before.startswith("assistant: ...") and before.endswith("Shall I book express?")
        assert len(before) <= QUESTION_CONTEXT_BUDGET
        assert "I live in Lyon" not in before  # beyond the budget: the verify call has it
