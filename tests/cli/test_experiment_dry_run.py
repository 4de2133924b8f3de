"""`judge experiment --dry-run`: the experiment's judging estimated with the app never
called (its module imported) and no request made, each question (or conversation turn)
taken as answered with an assumed reply; the test set's own fields decide what each metric
would score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import judge
from judge.experiments.dry_run import Assumed, dry_run_experiment, stand_in_text
from judge.testing import FakeLLMServer
from tests.helpers import apps, chat_apps
from tests.helpers.cli import run
from tests.helpers.judging import judge_handler

APPS = Path(apps.__file__)
CHAT_APPS = Path(chat_apps.__file__)
METRICS = "faithfulness,context_precision,context_recall"


def questions(path: Path) -> Path:
    rows = [dict(q) for q in apps.QUESTIONS]
    del rows[2]["ground_truth"]  # one question without a reference: no context_recall
    path.write_text("".join(json.dumps(q) + "\n" for q in rows), encoding="utf-8")
    return path


def dry(data: Path, app: str, *extra: str, calls: Path) -> tuple[int, str, str]:
    done = run(
        "experiment",
        str(data),
        "--app",
        app,
        "--dry-run",
        "--model",
        "openai/gpt-4o-mini",
        "--out",
        str(data.parent / "out"),
        *extra,
        env={**__import__("os").environ, "JUDGE_TEST_CALLS": str(calls)},
    )
    return done.returncode, done.stdout, done.stderr


def test_a_dry_run_estimates_the_judging_without_calling_the_app(tmp_path):
    data = questions(tmp_path / "q.jsonl")
    calls = tmp_path / "calls.log"
    code, out, err = dry(
        data, f"{APPS}:counted", "--metrics", METRICS, "--format", "json", calls=calls
    )
    assert code == 0, err
    assert not calls.exists()  # the app was never called
    assert not (tmp_path / "out").exists()  # nothing written
    shown = json.loads(out)
    assert shown["app"] == {
        "target": f"{APPS}:counted",
        "called": False,
        "assumed_reply": {"answer_chars": 300, "contexts": 4, "context_chars": 800},
        "conversations": None,
    }
    assert shown["rows"] == 5 and shown["usable"] is True
    checks = {m["name"]: m for m in shown["metrics"]}
    assert checks["context_recall"]["scored"] == 4
    assert checks["context_recall"]["not_scored"] == {"no_ground_truth": 1}
    # per row: claims + verify; one grading call; the reference's claims + verify
    assert checks["faithfulness"]["estimate"]["chat_requests"] == 10
    assert checks["context_precision"]["estimate"]["chat_requests"] == 5
    assert checks["context_recall"]["estimate"]["chat_requests"] == 8
    assert any("the app was not called" in note for note in shown["notes"])
    # bigger assumed contexts, bigger prompts; the same requests
    code, bigger, _ = dry(
        data,
        f"{APPS}:counted",
        "--metrics",
        METRICS,
        "--format",
        "json",
        "--assume-context-chars",
        "4000",
        calls=calls,
    )
    assert code == 0
    big = json.loads(bigger)["total"]
    assert big["chat_requests"] == shown["total"]["chat_requests"]
    assert big["prompt_tokens"] > 2 * shown["total"]["prompt_tokens"]
    assert not calls.exists()


def test_the_estimated_requests_are_those_of_the_experiment_run(
    fake_llm_server: FakeLLMServer, tmp_path
):
    """The requests depend on the test set and the metrics, not on the answers' sizes: the
    dry run's count is what the real experiment then sends (no cache). Each assumed answer
    is its own text, while a run sends identical requests once: q4's answer would be q1's
    (one chunk answers both), and q5's its reference word for word; so q4 is left out and
    q5's reference reworded here (the estimate is an upper bound in that respect)."""
    rows = [dict(q) for q in apps.QUESTIONS if q["id"] != "q4"]
    del rows[2]["ground_truth"]  # q3
    rows[3]["ground_truth"] = "France's capital is Paris."  # q5
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in rows), encoding="utf-8")
    estimate = dry_run_experiment(
        f"{APPS}:answer", data, metrics=METRICS.split(","), llm=judge.LLM("openai/judge")
    )
    fake_llm_server.chat = judge_handler
    done = run(
        "experiment",
        str(data),
        "--app",
        f"{APPS}:answer",
        "--metrics",
        METRICS,
        "--model",
        "openai/judge",
        "--api-base",
        fake_llm_server.base_url,
        "--api-key",
        "k",
        "--no-cache",
        "--out",
        str(tmp_path / "out"),
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    sent = fake_llm_server.count("/v1/chat/completions")
    # 4 answers' claims and 3 references' (q3 has none), 4 verify, 4 context grades
    assert sent == estimate.total.chat_requests == 15


def test_a_dry_run_of_conversations_plays_no_turn(tmp_path):
    data = tmp_path / "chats.jsonl"
    data.write_text(
        "".join(json.dumps(c) + "\n" for c in chat_apps.CONVERSATIONS), encoding="utf-8"
    )
    calls = tmp_path / "calls.log"
    code, out, err = dry(
        data,
        f"{CHAT_APPS}:chat",
        "--metrics",
        "faithfulness,knowledge_retention",
        "--format",
        "json",
        calls=calls,
    )
    assert code == 0, err
    assert not calls.exists()
    shown = json.loads(out)
    assert shown["app"]["conversations"] == 2
    assert shown["rows"] == 5  # the turns: two user messages in c1, three in c2
    checks = {m["name"]: m for m in shown["metrics"]}
    # the first turn of each conversation has nothing stated before it to keep
    assert checks["knowledge_retention"]["scored"] == 3
    assert checks["knowledge_retention"]["not_scored"] == {"no_history": 2}
    # the text table says the app was not called
    code, text, _ = dry(data, f"{CHAT_APPS}:chat", "--metrics", "faithfulness", calls=calls)
    assert code == 0
    assert text.startswith(f"experiment dry run: app {CHAT_APPS}:chat NOT called (2 conversations")
    # an app that takes no conversation is refused, as the experiment would refuse it
    code, _, err = dry(data, f"{APPS}:counted", calls=calls)
    assert code == 2
    assert "takes no conversation" in err
    assert not calls.exists()


def test_a_metric_the_test_set_cannot_feed_fails_the_dry_run(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"question": "Who created Python?"}) + "\n", encoding="utf-8")
    calls = tmp_path / "calls.log"
    code, _, err = dry(data, f"{APPS}:counted", "--metrics", "context_recall", calls=calls)
    assert code == 2
    assert "context_recall would score no row" in err and "ground_truth" in err
    code, _, err = dry(data, f"{APPS}:counted", "--assume-contexts", "-1", calls=calls)
    assert code == 2 and "--assume-contexts -1: give at least 0" in err


def test_the_python_api_never_calls_the_app():
    def app(question: str) -> dict:
        raise AssertionError("the app was called")

    result = dry_run_experiment(
        app,
        [{"question": "Who created Python?", "ground_truth": "Guido van Rossum did."}],
        metrics=["faithfulness", "answer_correctness"],
        assumed=Assumed(answer_chars=50, contexts=1, context_chars=60),
    )
    assert result.usable and result.rows == 1
    assert result.to_dict()["app"]["called"] is False
    with pytest.raises(judge.JudgeError, match="contexts=-1"):
        dry_run_experiment(app, [{"question": "Q?"}], assumed=Assumed(contexts=-1))


def test_stand_in_texts_have_the_assumed_length_and_are_each_their_own():
    for chars in (1, 50, 99, 100, 101, 300, 801):
        text = stand_in_text("answer to q1", chars)
        assert chars <= len(text) <= max(chars, 40), (chars, len(text))
    assert stand_in_text("answer to q1", 300) != stand_in_text("answer to q2", 300)
    assert stand_in_text("answer to q1", 300).count(".") == 3  # sentences of about 100
