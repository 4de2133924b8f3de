"""A test set built by a real model (fixtures/real-testset), replayed through the fake server.

The recording is Qwen2.5-Coder-0.5B's: a weak model whose drafts mostly fail judge's checks.
Replaying it pins what the checks did with real output, byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge import LLM
from judge.metrics.prompts import load_prompt
from judge.testing import FakeLLMServer, recorded_chat
from judge.testset import build
from tests.helpers.testset import write_corpus

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "real-testset"
ENTRIES = [json.loads(line) for line in (HERE / "judgments.jsonl").read_text("utf-8").splitlines()]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("real-testset")
    corpus = write_corpus(folder / "corpus")
    with FakeLLMServer(chat=recorded_chat(ENTRIES)) as server:
        llm = LLM("openai/qwen", api_base=server.base_url, api_key="x", max_retries=0)
        result = build(
            corpus,
            llm=llm,
            n=4,
            mix="single_hop=0.5,multi_hop=0.25,unanswerable=0.25",
            pool_depth=3,
            chunk_size=400,
            seed=0,
        )
        requests = server.count()
    result.write(folder / "out")
    return result, folder / "out", requests


def test_the_recording_is_of_the_prompts_on_disk():
    for entry in ENTRIES:
        assert entry["prompt_version"] == load_prompt(entry["prompt"]).version, entry["prompt"]


def test_the_build_asks_exactly_what_was_recorded(replayed):
    # A request the recording cannot answer gets HTTP 500 and its draft an llm_error.
    result, _, requests = replayed
    assert requests == len(ENTRIES)
    assert all(r.reason != "llm_error" for r in result.rejected)


def test_the_replayed_build_writes_the_recorded_files_byte_for_byte(replayed):
    _, out, _ = replayed
    for name in ("testset.jsonl", "rejected.jsonl"):
        assert (out / name).read_bytes() == (HERE / name).read_bytes(), name


def test_the_accepted_question_is_grounded_and_the_rejections_name_real_failures(replayed):
    result, _, _ = replayed
    (item,) = result.items
    chunks = result.corpus.by_id
    for evidence in item.evidence:
        assert chunks[evidence.chunk_id].text[evidence.start : evidence.end] == evidence.quote
    reasons = sorted(r.reason for r in result.rejected)
    assert reasons == [
        "critic_answer_wrong",
        "critic_answer_wrong",
        "critic_not_self_contained",
        "evidence_not_from_both_chunks",
        "quote_not_in_chunk",
        "quote_not_in_chunk",
    ]
    # The model's "$4.50" is not in a chunk that says "4.50 dollars": a paraphrase is no quote.
    assert any("'$4.50' is not in chunk" in r.detail for r in result.rejected)
