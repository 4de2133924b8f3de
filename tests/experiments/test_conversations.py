"""judge.experiments on a test set of conversations: each user message asked of a
conversational app in order, with the conversation so far; the outputs written as
conversations and judged a row per assistant turn; a failed turn and the turns after it
recorded as such; a stopped experiment resumed from its first unanswered turn."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from judge import experiment
from judge.errors import InputFormatError
from judge.experiments.app import AppError, as_app
from judge.experiments.calls import ProgressFile
from judge.experiments.chats import play_all
from judge.experiments.experiment import PROGRESS_FILE, load_testset
from tests.helpers import apps, chat_apps
from tests.helpers.chat_apps import EXPECTED, SYSTEM, said
from tests.helpers.chats import conversation, user


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def calls(path: Path) -> list[dict]:
    return read_jsonl(path) if path.exists() else []


@pytest.fixture
def logged(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv("JUDGE_TEST_CALLS", str(path))
    return path


def without_latency(lines: list[dict]) -> list[dict]:
    lines = copy.deepcopy(lines)
    for line in lines:
        for message in line["turns"]:
            message.pop("app_latency_s", None)
    return lines


def test_each_user_message_is_asked_with_the_conversation_before_it(models, logged, tmp_path):
    out = tmp_path / "out"
    result = experiment(
        chat_apps.chat,
        chat_apps.CONVERSATIONS,
        out=out,
        metrics=["faithfulness", "mrr"],
        progress=False,
        **models,
    )
    seen = {call["question"]: call["history"] for call in calls(logged)}
    assert seen == EXPECTED  # each turn once, what the app appended to it not carried on
    lines = read_jsonl(out / "app_outputs.jsonl")
    assert [line["id"] for line in lines] == ["c1", "c2"]
    assert lines[0]["topic"] == "python"  # the conversation's fields kept
    first = lines[0]["turns"]
    assert [m["role"] for m in first] == ["user", "assistant", "user", "assistant"]
    python = apps.answer("Who created Python?")
    assert first[1]["content"] == python["answer"]  # the recorded answer replaced
    assert first[1]["contexts"] == python["contexts"]
    assert first[1]["retrieved_ids"] == python["retrieved_ids"]
    assert first[1]["ground_truth"] == "Guido van Rossum created Python."  # labels kept
    assert first[1]["relevance"] == {"c1": 2, "c4": 1}
    assert first[1]["seen"] == 0 and first[3]["seen"] == 2  # the app's extra key
    assert first[1]["app_error"] is None and first[1]["app_latency_s"] >= 0
    second = lines[1]["turns"]
    assert [m["role"] for m in second] == ["system", *["user", "assistant"] * 3]
    assert second[6]["content"] == apps.answer("What is the capital of France?")["answer"]
    # One row per assistant turn, each judged with the conversation before it.
    assert [row.id for row in result.rows] == ["c1#2", "c1#4", "c2#3", "c2#5", "c2#7"]
    results = read_jsonl(out / "results.jsonl")
    assert [(r["conversation_id"], r["turn"]) for r in results] == [
        ("c1", 2),
        ("c1", 4),
        ("c2", 3),
        ("c2", 5),
        ("c2", 7),
    ]
    assert all(r["error"] is None for r in results)
    assert results[1]["question"] == "When was Python first released?"
    # The labelled turn alone has retrieval metrics, exactly as judge ir scores run.trec.
    assert result.rows[0].scores["mrr"] == 1.0
    assert (out / "qrels.txt").read_text() == "c1#2 0 c1 2\nc1#2 0 c4 1\n"
    assert "c2#7 Q0 c5 1" in (out / "run.trec").read_text()
    app = result.config.app
    assert app["input"] == "question+history" and app["conversations"] == 2
    assert app["questions"] == 5 and app["asked"] == 5 and app["errors"] == {}


def test_an_app_given_the_messages_alone_gets_the_conversation_ending_with_the_question(
    models, logged, tmp_path
):
    experiment(chat_apps.chat, chat_apps.CONVERSATIONS, out=tmp_path / "a", progress=False)
    result = experiment(
        chat_apps.async_messages, chat_apps.CONVERSATIONS, out=tmp_path / "b", progress=False
    )
    assert result.config.app["input"] == "messages"
    assert without_latency(read_jsonl(tmp_path / "b" / "app_outputs.jsonl")) == without_latency(
        read_jsonl(tmp_path / "a" / "app_outputs.jsonl")
    )
    both = calls(logged)
    assert both[5:] and {c["question"]: c["history"] for c in both[5:]} == EXPECTED


def test_a_failed_turn_is_an_error_and_the_turns_after_it_are_not_played(
    models, logged, tmp_path, monkeypatch
):
    flag = tmp_path / "fail"
    flag.touch()
    monkeypatch.setenv("JUDGE_TEST_FAIL", str(flag))
    out = tmp_path / "out"
    result = experiment(
        chat_apps.chat,
        chat_apps.CONVERSATIONS,
        out=out,
        metrics=["faithfulness"],
        progress=False,
        **models,
    )
    asked = [call["question"] for call in calls(logged)]
    assert "What is the capital of France?" not in asked  # never asked: no answer before it
    second = read_jsonl(out / "app_outputs.jsonl")[1]["turns"]
    assert second[2]["app_error"] is None
    assert second[4]["content"] == "" and second[4]["app_error"]["type"] == "ValueError"
    assert second[6]["app_error"]["type"] == "NotPlayed"
    assert "failed at turn 5" in second[6]["app_error"]["message"]
    assert second[6]["app_latency_s"] is None
    rows = {row.id: row for row in result.rows}
    assert list(rows) == ["c1#2", "c1#4", "c2#3", "c2#5", "c2#7"]  # no turn left out
    assert rows["c2#5"].error.startswith("the app failed on this question: ValueError")
    assert "NotPlayed" in rows["c2#7"].error
    assert [rows[i].error for i in ("c1#2", "c1#4", "c2#3")] == [None] * 3
    assert result.config.app["errors"] == {"NotPlayed": 1, "ValueError": 1}
    assert result.config.app["asked"] == 4 and result.config.app["questions"] == 5


def test_a_stopped_experiment_resumes_from_the_first_turn_without_an_answer(
    models, logged, tmp_path, monkeypatch
):
    # What a run stopped after the app failed on bananas leaves: its progress file.
    flag = tmp_path / "fail"
    flag.touch()
    monkeypatch.setenv("JUDGE_TEST_FAIL", str(flag))
    out = tmp_path / "out"
    out.mkdir()
    app = as_app(chat_apps.chat)
    progress = ProgressFile(out / PROGRESS_FILE, app)
    chats = load_testset(chat_apps.CONVERSATIONS).chats
    asyncio.run(play_all(app, chats, progress, concurrency=2, timeout=10))
    assert len(calls(logged)) == 4
    flag.unlink()
    logged.unlink()
    result = experiment(chat_apps.chat, chat_apps.CONVERSATIONS, out=out, progress=False)
    # The answered turns reused (their answers give the later turns' history), the failed
    # one asked again, and the one after it asked with the conversation as it is now.
    again = calls(logged)
    assert [c["question"] for c in again] == [
        "What colour are ripe bananas?",
        "What is the capital of France?",
    ]
    assert all(c["history"] == EXPECTED[c["question"]] for c in again)
    assert result.config.app["reused"] == 3 and result.config.app["asked"] == 2
    assert result.config.app["errors"] == {}
    fresh = experiment(chat_apps.chat, chat_apps.CONVERSATIONS, out=tmp_path / "b", progress=False)
    assert without_latency(read_jsonl(out / "app_outputs.jsonl")) == without_latency(
        read_jsonl(tmp_path / "b" / "app_outputs.jsonl")
    )
    assert [r.scores for r in result.rows] == [r.scores for r in fresh.rows]
    assert not (out / PROGRESS_FILE).exists()


def test_a_conversational_app_on_single_questions_gets_an_empty_history(logged, tmp_path):
    experiment(chat_apps.chat, apps.QUESTIONS[:2], out=tmp_path / "out", progress=False)
    assert [c["history"] for c in calls(logged)] == [[], []]


def test_an_app_without_history_is_refused_on_conversations_before_any_call(tmp_path):
    with pytest.raises(AppError, match=r"holds conversations, but app .* takes no conversation"):
        experiment(apps.counted, chat_apps.CONVERSATIONS, out=tmp_path / "out", progress=False)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([conversation(user("hi"), {"role": "tool", "content": "x"})], "a tool message"),
        (
            [conversation(user("hi"), said("hi"), said("hi"))],
            "an assistant message that answers no user message",
        ),
        ([conversation(SYSTEM)], "has no user message"),
        ([conversation(user(" "))], "a user message with no text"),
        ([conversation(user("hi")), conversation(user("ho"))], "the same id 'c'"),
        ([conversation(user("hi"), {"role": "robot", "content": "x"})], "role 'robot'"),
        ([conversation(user("hi")), {"id": "q", "question": "ho"}], "record 1 is not a conv"),
        ([conversation(user("a \ud800 b"))], "conversation 'c' holds a lone surrogate"),
    ],
)
def test_a_conversation_that_cannot_be_played_is_refused_naming_it(data, message):
    with pytest.raises(InputFormatError, match=message):
        load_testset(data)


def test_a_greeting_before_the_user_speaks_is_kept_and_given_in_the_history(
    models, logged, tmp_path
):
    greeting = {"role": "assistant", "content": "Hello, ask me about Python."}
    data = [conversation(greeting, user("Who created Python?"))]
    experiment(
        chat_apps.chat,
        data,
        out=tmp_path / "out",
        metrics=["faithfulness"],
        progress=False,
        **models,
    )
    assert calls(logged)[0]["history"] == [greeting]
    turns = read_jsonl(tmp_path / "out" / "app_outputs.jsonl")[0]["turns"]
    assert turns[0] == greeting and turns[2]["content"]


def test_labels_from_a_qrels_file_or_a_column_map_are_refused_for_conversations(tmp_path):
    with pytest.raises(InputFormatError, match="relevance labels on its assistant message"):
        load_testset(chat_apps.CONVERSATIONS, qrels=tmp_path / "q.txt")
    with pytest.raises(InputFormatError, match="column_map"):
        load_testset(chat_apps.CONVERSATIONS, column_map={"question": "q"})


def test_a_reply_key_the_turn_row_reads_is_the_turns_error(tmp_path):
    def overreach(question: str, history: list) -> dict[str, Any]:
        return {**apps.answer(question), "turn": 9}

    result = experiment(overreach, chat_apps.CONVERSATIONS[:1], out=tmp_path / "o", progress=False)
    assert result.config.app["errors"] == {"MalformedReply": 1, "NotPlayed": 1}


def history_first(history, question): ...
def messages_and_more(messages, k): ...
def row_and_history(row, history=None): ...
def three(question, history, k): ...


@pytest.mark.parametrize(
    ("app", "message"),
    [
        (history_first, "its first parameter, 'history', would be given the conversation"),
        (messages_and_more, "its first parameter, 'messages'"),
        (row_and_history, "is given the question, not the test set's row"),
        (three, "other parameters need defaults"),
    ],
)
def test_a_conversational_signature_judge_cannot_call_is_refused(app, message):
    with pytest.raises(AppError, match=message):
        as_app(app)


STARTED: set[str] = set()


async def waits_for_the_other_conversation(question: str, history: list) -> dict[str, Any]:
    """Each conversation's first turn answers only once the other's has started: it times
    out when conversations are asked one after the other."""
    STARTED.add(question)
    if not history:
        for _ in range(300):
            if {"A?", "B?"} <= STARTED:
                break
            await asyncio.sleep(0.01)
        else:
            raise TimeoutError("the other conversation never started")
    return {"answer": f"answer to {question}", "contexts": [], "seen": len(history)}


@pytest.mark.parametrize(
    ("concurrency", "errors"), [(2, {}), (1, {"TimeoutError": 1, "NotPlayed": 1})]
)
def test_conversations_run_concurrently_and_the_turns_of_each_in_order(
    models, tmp_path, concurrency, errors
):
    STARTED.clear()
    data = [conversation(user("A?"), user("A again?"), id="a"), conversation(user("B?"), id="b")]
    result = experiment(
        waits_for_the_other_conversation,
        data,
        out=tmp_path / "out",
        metrics=["faithfulness"],
        app_concurrency=concurrency,
        progress=False,
        **models,
    )
    assert result.config.app["errors"] == errors
    if not errors:  # the second turn asked after the first answered, with its answer
        turns = read_jsonl(tmp_path / "out" / "app_outputs.jsonl")[0]["turns"]
        assert turns[3]["seen"] == 2 and turns[1]["content"] == "answer to A?"
