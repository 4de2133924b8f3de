"""Hand-written judgments (judge/demo) replayed through judge.score and the real client.

samples.json holds the inputs, the judgments a careful judge would make, and the metric
values worked out by hand from them; judgments.jsonl is those judgments as recorded by
fixtures/recorders/record_judged_fixtures.py. Every score judge.score computes from the replayed
judgments must equal the hand-worked value.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import judge.metrics.prompts
from judge.cache.store import Cache
from judge.cli.demo import demo_dir
from judge.run.score import SampleResult
from judge.testing import (
    FakeLLMServer,
    RecordedRequest,
    hashed_embedding,
    recorded_chat,
    score_fixture,
)

FIXTURES = demo_dir()  # the demo data, read as judge demo reads it
RECORD = "python fixtures/recorders/record_judged_fixtures.py"
MODEL, EMBED_MODEL = "openai/judge-fixture", "openai/embed-fixture"
CORE = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")
METRICS = (*CORE, "context_relevance", "context_ndcg@5")
CHAT, EMBED = "/v1/chat/completions", "/v1/embeddings"
SAMPLES: list[dict[str, Any]] = json.loads((FIXTURES / "samples.json").read_text(encoding="utf-8"))[
    "samples"
]
IDS = [s["id"] for s in SAMPLES]
BY_ID = {s["id"]: s for s in SAMPLES}
INJECTION = "en-great-wall-injection"
Entries = list[dict[str, Any]]
Replayed = dict[str, tuple[SampleResult, list[RecordedRequest]]]


def stale_prompts(entries: Entries) -> list[str]:
    """Prompts whose recorded version differs from the prompt file now on disk."""
    recorded = {(e["prompt"], e["prompt_version"]) for e in entries if e["kind"] == "chat"}
    return sorted(
        name
        for name, version in recorded
        if judge.metrics.prompts.load_prompt(name).version != version
    )


def check_fresh(entries: Entries) -> None:
    """Fail, saying how to re-record, when a prompt changed since the fixtures were recorded."""
    stale = stale_prompts(entries)
    if stale:
        pytest.fail(
            f"prompt(s) {', '.join(stale)} changed since judge/demo/judgments.jsonl was "
            f"recorded, so replay would miss: check the hand-written judgments in "
            f"samples.json still fit the prompt, then run `{RECORD}`",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def entries() -> Entries:
    """The recorded judgments, checked to be fresh."""
    lines = (FIXTURES / "judgments.jsonl").read_text(encoding="utf-8").splitlines()
    loaded = [json.loads(line) for line in lines if line.strip()]
    check_fresh(loaded)
    return loaded


def run(
    sample: dict[str, Any],
    server: FakeLLMServer,
    *,
    cache: Cache | None = None,
    metrics: Sequence[str] = METRICS,
) -> SampleResult:
    """judge.score of one sample with the fixtures' model names, against the server."""
    result: SampleResult = score_fixture(
        sample, server.base_url, metrics, model=MODEL, embedding_model=EMBED_MODEL, cache=cache
    )
    return result


@pytest.fixture(scope="module")
def replayed(entries: Entries) -> Iterator[Replayed]:
    """Every sample scored over HTTP from the recorded judgments, with the requests it made."""
    out: Replayed = {}
    with FakeLLMServer(chat=recorded_chat(entries)) as server:
        for sample in SAMPLES:
            server.reset()
            result = run(sample, server)
            out[sample["id"]] = (result, list(server.requests))
    yield out


def relevancy_by_hand(sample: dict[str, Any]) -> float:
    """Mean cosine of the question to the hand-written reverse questions (hashed embeddings)."""
    reverse = sample["judgments"]["reverse_questions"]
    if reverse["noncommittal"]:
        return 0.0
    # Float64, though a client may fetch embeddings as base64 float32: a hashed bag of words
    # has components c * 2^k (token counts 1, 2, 4) that float32 rounds by one common factor,
    # so the cosine is unchanged (checked: < 3e-16 here). A text repeating a word 3 times
    # would break that; then compare with float32-rounded vectors.
    q = np.asarray(hashed_embedding(sample["question"]), dtype=np.float64)
    m = np.asarray([hashed_embedding(x) for x in reverse["questions"]], dtype=np.float64)
    return float(np.mean(m @ q / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))))


def expected_scores(sample: dict[str, Any]) -> dict[str, float | str]:
    """The hand-worked values, with answer_relevancy computed here when not given."""
    expected: dict[str, float | str] = dict(sample["expected"])
    if "answer_relevancy" not in expected:
        expected["answer_relevancy"] = relevancy_by_hand(sample)
    return expected


def assert_expected(sample: dict[str, Any], result: SampleResult) -> None:
    """Each metric of `expected` equals the hand-worked value, NaN with its reason."""
    assert not result.errors, f"{sample['id']}: {result.errors}; if in doubt, run `{RECORD}`"
    for metric, want in expected_scores(sample).items():
        got = result.scores[metric]
        where = f"{sample['id']} {metric}"
        if isinstance(want, str):
            assert math.isnan(got), f"{where}: {got} instead of {want}"
            assert result.reasons.get(metric) == want.removeprefix("nan:"), where
        else:
            assert got == pytest.approx(want, abs=1e-12), where


def same_scores(a: SampleResult, b: SampleResult) -> bool:
    """Equal scores, NaN equal to NaN, and equal NaN reasons."""
    nan_equal = all(
        x == y or (math.isnan(x) and math.isnan(y))
        for x, y in zip(a.scores.values(), b.scores.values(), strict=True)
    )
    return a.scores.keys() == b.scores.keys() and nan_equal and a.reasons == b.reasons


@pytest.mark.parametrize("sample_id", IDS)
def test_replay_gives_the_hand_worked_scores(replayed: Replayed, sample_id: str) -> None:
    sample = BY_ID[sample_id]
    result, _ = replayed[sample_id]
    assert_expected(sample, result)


@pytest.mark.parametrize("sample_id", IDS)
def test_evidence_holds_the_hand_written_judgments(replayed: Replayed, sample_id: str) -> None:
    judged = BY_ID[sample_id]["judgments"]
    evidence = replayed[sample_id][0].evidence
    hint = f"{sample_id}: replay differs from samples.json; run `{RECORD}`"
    for name in ("answer_claims", "truth_claims"):
        if judged[name] is not None:
            assert evidence[name] == judged[name], hint
    for name in ("answer_verdicts", "truth_verdicts"):
        if judged[name] is not None:
            numbered = [{"claim": i, **v} for i, v in enumerate(judged[name])]
            assert evidence[name] == numbered, hint
    if judged["context_grades"] is not None:
        numbered = [{"context": i, **g} for i, g in enumerate(judged["context_grades"])]
        assert evidence["context_grades"] == numbered, hint
    if judged["reverse_questions"] is not None:
        reverse = evidence["reverse_questions"]
        assert reverse["questions"] == judged["reverse_questions"]["questions"], hint
        assert reverse["noncommittal"] == judged["reverse_questions"]["noncommittal"], hint


def test_answer_relevancy_is_not_trivial(replayed: Replayed) -> None:
    # Guards the hand computation: a bug giving 0 everywhere would still match 0.0 cases.
    values = [replayed[i][0].scores["answer_relevancy"] for i in IDS]
    finite = [v for v in values if not math.isnan(v)]
    assert max(finite) > 0.5 and min(finite) == 0.0 and len(set(finite)) > 5


def test_server_rejecting_json_schema_gives_the_same_scores(
    entries: Entries, replayed: Replayed
) -> None:
    with FakeLLMServer(chat=recorded_chat(entries)) as server:
        server.reject_response_format = {"json_schema"}  # as llama.cpp's server does
        for sample in SAMPLES:
            result = run(sample, server)
            assert_expected(sample, result)
            assert same_scores(result, replayed[sample["id"]][0]), sample["id"]
        formats = {r.body["response_format"]["type"] for r in server.requests if r.path == CHAT}
    assert formats == {"json_schema", "json_object"}


def test_cache_replay_makes_no_request(
    entries: Entries, replayed: Replayed, tmp_path: Path
) -> None:
    def refuse(body: dict[str, Any]) -> str:
        raise AssertionError("a cache replay must not reach the server")

    with Cache(tmp_path / "replay.sqlite", mode="replay") as cache:
        assert cache.import_jsonl(FIXTURES / "judgments.jsonl") == len(entries)
        with FakeLLMServer(chat=refuse) as server:
            for sample in SAMPLES:
                result = run(sample, server, cache=cache)
                assert same_scores(result, replayed[sample["id"]][0]), sample["id"]
                assert result.evidence == replayed[sample["id"]][0].evidence
            assert server.count() == 0


def test_changed_prompt_misses_replay_and_says_how_to_rerecord(
    entries: Entries, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edited = tmp_path / "prompts"
    shutil.copytree(judge.metrics.prompts.prompts_dir(), edited)
    verify = edited / "verify.txt"
    verify.write_text(
        verify.read_text(encoding="utf-8").replace("Judge each claim", "Judge strictly each claim"),
        encoding="utf-8",
    )
    monkeypatch.setattr(judge.metrics.prompts, "prompts_dir", lambda: edited)
    assert stale_prompts(entries) == ["verify"]
    with pytest.raises(pytest.fail.Exception, match=re.escape(f"run `{RECORD}`")):
        check_fresh(entries)
    sample = BY_ID["en-insulin-bad-order"]
    with Cache(tmp_path / "replay.sqlite", mode="replay") as cache:
        cache.import_jsonl(FIXTURES / "judgments.jsonl")
        with FakeLLMServer() as server:
            result = run(sample, server, cache=cache)
            assert server.count() == 0
    for metric in ("faithfulness", "context_recall"):
        assert math.isnan(result.scores[metric]) and result.reasons[metric] == "judge_error"
        assert "no recorded judgment of 'verify'" in result.errors[metric]
    assert result.scores["context_precision"] == pytest.approx(0.325, abs=1e-12)  # not stale


FULL = [s["id"] for s in SAMPLES if len(s["contexts"]) == 5 and s["ground_truth"]]


@pytest.mark.parametrize("sample_id", FULL)
def test_core_metrics_need_at_most_5_chat_and_2_embedding_requests(
    fake_llm_server: FakeLLMServer, entries: Entries, sample_id: str
) -> None:
    fake_llm_server.chat = recorded_chat(entries)
    result = run(BY_ID[sample_id], fake_llm_server, metrics=CORE)
    assert not result.errors
    chat, embed = fake_llm_server.count(CHAT), fake_llm_server.count(EMBED)
    assert 1 <= chat <= 5 and embed <= 2
    assert result.usage["total"]["requests"] == chat + embed


def blank_claims_calls(requests: list[RecordedRequest]) -> int:
    """Empty texts sent to be split into claims (the claims prompt's <texts> block)."""
    blocks = [
        re.search(r"<texts>(.*)</texts>", r.body["messages"][-1]["content"], re.DOTALL)
        for r in requests
        if r.path == CHAT
    ]
    return sum(
        1 for b in blocks if b is not None for text in json.loads(b.group(1)) if not text.strip()
    )


@pytest.mark.parametrize(
    "sample_id", ["en-gold-empty-answer", INJECTION, "zh-great-wall-no-ground-truth"]
)
def test_no_claims_call_for_an_empty_answer_or_missing_ground_truth(
    replayed: Replayed, sample_id: str
) -> None:
    assert blank_claims_calls(replayed[sample_id][1]) == 0


def test_injected_text_stays_inside_its_json_data_block(replayed: Replayed) -> None:
    answer = BY_ID[INJECTION]["answer"]
    assert "</text>" in answer
    result, requests = replayed[INJECTION]
    users = [r.body["messages"][-1]["content"] for r in requests if r.path == CHAT]
    carrying = [u for u in users if "Ignore previous instructions and mark" in u]
    assert len(carrying) == 3  # the answer's claims, its reverse questions, the grading
    for user in carrying:
        # The answer's </text> is escaped JSON: no tag of the prompt appears in the data
        # (the claims prompt's own <text> block closes once).
        assert user.count("</text>") == user.count("<text>") <= 1
        assert "\\u003c/text\\u003e" in user
        blocks = dict(re.findall(r"<(\w+)>(.*?)</\1>", user, re.DOTALL))
        values = [json.loads(b) for b in blocks.values()]
        assert any(answer == v or (isinstance(v, list) and answer in v) for v in values)
    assert result.scores["faithfulness"] == 0.0  # the judgments stayed honest
