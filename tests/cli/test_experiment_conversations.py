"""`judge experiment` on a test set of conversations, as a user runs it: a subprocess asking
a conversational app in a file, judged by the fake server; its outputs judged again by
`judge eval`, and the judging replayed from the cache byte for byte."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from judge.testing import FakeLLMServer
from tests.helpers import chat_apps
from tests.helpers.chat_apps import EXPECTED
from tests.helpers.cli import run
from tests.helpers.judging import judge_handler

CHAT_APPS = Path(chat_apps.__file__)


@pytest.fixture
def server(fake_llm_server: FakeLLMServer) -> FakeLLMServer:
    fake_llm_server.chat = judge_handler
    return fake_llm_server


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def conversations(path: Path) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in chat_apps.CONVERSATIONS), "utf-8")
    return path


def args(data: Path, server: FakeLLMServer, out: Path, *extra: str) -> list[str]:
    return [
        "experiment",
        str(data),
        "--app",
        f"{CHAT_APPS}:chat",
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "k",
        "--metrics",
        "faithfulness,supported_by_history,mrr",
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def test_a_conversational_app_is_played_judged_per_turn_and_replayed_byte_for_byte(
    server, tmp_path
):
    data = conversations(tmp_path / "conversations.jsonl")
    calls = tmp_path / "calls.jsonl"
    env = {**os.environ, "JUDGE_TEST_CALLS": str(calls)}
    cache = ["--cache", str(tmp_path / "cache.sqlite")]
    done = run(*args(data, server, tmp_path / "live", *cache), env=env)
    assert done.returncode == 0, done.stderr
    assert "2 conversations, 5 turns (5 asked, 0 answered before); 0 app errors" in done.stderr
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    assert {c["question"]: c["history"] for c in seen} == EXPECTED and len(seen) == 5
    results = read_jsonl(tmp_path / "live" / "results.jsonl")
    assert [(r["id"], r["conversation_id"], r["turn"]) for r in results] == [
        ("c1#2", "c1", 2),
        ("c1#4", "c1", 4),
        ("c2#3", "c2", 3),
        ("c2#5", "c2", 5),
        ("c2#7", "c2", 7),
    ]
    assert all(r["scores"]["faithfulness"] == 1.0 for r in results)
    summary = json.loads((tmp_path / "live" / "summary.json").read_text())
    assert summary["config"]["app"]["conversations"] == 2
    # The outputs are conversations: judge eval judges them again without the app.
    made = server.count("/v1/chat/completions")
    again = run(
        "eval",
        tmp_path / "live" / "app_outputs.jsonl",
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "k",
        "--metrics",
        "faithfulness,supported_by_history,mrr",
        *cache,
        "--out",
        tmp_path / "eval",
        "--no-progress",
        env=env,
    )
    assert again.returncode == 0, again.stderr
    assert len(calls.read_text().splitlines()) == 5  # no app call
    assert server.count("/v1/chat/completions") == made  # every judgment from the cache
    scores = [(r["id"], r["scores"]) for r in read_jsonl(tmp_path / "eval" / "results.jsonl")]
    assert scores == [(r["id"], r["scores"]) for r in results]
    # Replayed from the cache: no request, and the same bytes twice.
    for name in ("replay-1", "replay-2"):
        replayed = run(*args(data, server, tmp_path / name, *cache, "--replay"), env=env)
        assert replayed.returncode == 0, replayed.stderr
    assert server.count("/v1/chat/completions") == made
    first, second = (tmp_path / n / "results.jsonl" for n in ("replay-1", "replay-2"))
    assert first.read_bytes() == second.read_bytes()
    assert [(r["id"], r["scores"]) for r in read_jsonl(first)] == [
        (r["id"], r["scores"]) for r in results
    ]


def test_a_failed_turn_counts_against_the_error_rate_with_the_turns_it_kept_from_playing(
    server, tmp_path
):
    data = conversations(tmp_path / "conversations.jsonl")
    flag = tmp_path / "fail"
    flag.touch()
    env = {**os.environ, "JUDGE_TEST_FAIL": str(flag)}
    done = run(*args(data, server, tmp_path / "out", "--no-cache"), env=env)
    assert done.returncode == 3, done.stderr  # 2 of 5 turns failed: over the default rate
    assert "2 conversations, 5 turns (4 asked, 0 answered before)" in done.stderr
    assert "2 app errors (NotPlayed 1, ValueError 1; see app_error" in done.stderr
    results = {r["id"]: r for r in read_jsonl(tmp_path / "out" / "results.jsonl")}
    assert "ValueError: no banana index" in results["c2#5"]["error"]
    assert "failed at turn 5" in results["c2#7"]["error"]
