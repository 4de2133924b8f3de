"""fixtures/real: judgments recorded from a real model (see its _meta), replayed through the
fake server, and checked for the failures issue 12 found on real output: swapped or
copied claims, context numbers that do not exist, grades that follow the prompt example,
context precision blind to an unrelated first context, reasons copied from an example."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from judge.metrics.overlap import drawn_from
from judge.metrics.prompts import load_prompt, prompts_dir, reason_key
from judge.testing import FakeLLMServer, data_blocks, recorded_chat, score_fixture

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "real"
DATA = json.loads((HERE / "samples.json").read_text(encoding="utf-8"))
META, SAMPLES = DATA["_meta"], DATA["samples"]
BY_QUESTION = {s["question"]: s for s in SAMPLES}
ENTRIES = [json.loads(x) for x in (HERE / "judgments.jsonl").read_text("utf-8").splitlines()]
METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall"]
RECORD = "python -m bench.quality.prompt_check score (see fixtures/real/samples.json _meta)"

Entry = dict[str, Any]


def chat(entries: list[Entry], prompt: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(the request's data blocks, the model's reply) of every recorded call of a prompt."""
    return [
        (data_blocks(e["request"]["messages"][-1]["content"]), e["response"]["choices"][0])
        for e in entries
        if e["kind"] == "chat" and e["prompt"] == prompt
    ]


def misplaced_claims(entries: list[Entry]) -> list[str]:
    """Claims not drawn from the text they were split from (swapped or copied)."""
    bad = []
    for data, reply in chat(entries, "claims"):
        bad += [c for c in reply["claims"] if not drawn_from(c, data["text"], data["question"])]
    return bad


def missing_contexts(entries: list[Entry]) -> list[int]:
    """Context numbers in verdicts that name no given context."""
    return [
        v["context"]
        for data, reply in chat(entries, "verify")
        for v in reply["verdicts"]
        if v["context"] is not None and not 0 <= v["context"] < len(data["contexts"])
    ]


def example_reasons() -> set[str]:
    """The reasons written in the prompts' examples, as the judges compare them."""
    return {r for path in prompts_dir().glob("*.txt") for r in load_prompt(path).example_reasons}


def copied_reasons(entries: list[Entry]) -> list[str]:
    """Reasons that repeat a prompt example's reason word for word."""
    examples = example_reasons()
    return [
        item["reason"]
        for prompt in ("verify", "context_relevance")
        for _, reply in chat(entries, prompt)
        for item in reply.get("verdicts", reply.get("contexts", []))
        if reason_key(item["reason"]) in examples
    ]


def example_grade_sequences() -> list[list[int]]:
    """The grades of the context-relevance prompt's example, in order."""
    lines = load_prompt("context_relevance").system.splitlines()
    return [[int(g) for g in re.findall(r'"grade": (\d)', x)] for x in lines if '"grade"' in x]


@pytest.fixture(scope="module")
def replayed() -> dict[str, Any]:
    with FakeLLMServer(chat=recorded_chat(ENTRIES)) as server:
        return {
            s["id"]: score_fixture(
                s, server.base_url, METRICS, model=META["model"], embedding_model=META["embeddings"]
            )
            for s in SAMPLES
        }


def test_metadata_names_the_model_the_server_and_the_prompts_on_disk():
    assert {"model", "server", "server_version", "recorded", "prompts"} <= set(META)
    recorded = {name.removesuffix(".txt"): v for name, v in META["prompts"].items()}
    on_disk = {name: load_prompt(name).version for name in recorded}
    assert recorded == on_disk, f"a prompt changed since the recording: re-record ({RECORD})"


def test_every_sample_replays_without_a_judge_error(replayed):
    for sample_id, result in replayed.items():
        assert not result.errors, (sample_id, result.errors)
        assert result.usage["total"]["requests"] > 0


def test_every_claim_comes_from_its_own_text():
    assert {d["text"] for d, _ in chat(ENTRIES, "claims")} == {
        t for s in SAMPLES for t in (s["answer"], s["ground_truth"])
    }
    assert misplaced_claims(ENTRIES) == []
    # No text with facts came back without claims (all rows' texts state facts).
    assert all(reply["claims"] for _, reply in chat(ENTRIES, "claims"))


def test_every_verdict_names_an_existing_context():
    assert chat(ENTRIES, "verify") and missing_contexts(ENTRIES) == []


def test_no_reason_is_copied_from_a_prompt_example():
    assert copied_reasons(ENTRIES) == []


def test_grades_do_not_follow_the_example():
    graded = chat(ENTRIES, "context_relevance")
    assert len(graded) == len(SAMPLES)
    examples = example_grade_sequences()
    for data, reply in graded:
        sample = BY_QUESTION[data["question"]]
        assert sample["expected_grades"] not in examples  # each row is built to differ
        assert [g["grade"] for g in reply["contexts"]] not in examples, sample["id"]


UNRELATED_FIRST = [
    pytest.param(
        s["id"],
        marks=[pytest.mark.xfail(strict=True, reason=META["known_failures"][s["id"]])]
        if s["id"] in META.get("known_failures", {})
        else [],
    )
    for s in SAMPLES
    if s["unrelated_first"]
]


@pytest.mark.parametrize("sample_id", UNRELATED_FIRST)
def test_an_unrelated_first_context_lowers_context_precision(replayed, sample_id):
    """A failure the recorded model still makes is listed in _meta.known_failures: it is
    expected to fail (strict), so a re-recording that fixes it must update the list."""
    assert replayed[sample_id]["context_precision"] < 1.0


def test_committed_answers_are_not_noncommittal(replayed):
    for sample_id, result in replayed.items():
        assert result.evidence["reverse_questions"]["noncommittal"] is False, sample_id
        assert not math.isnan(result["answer_relevancy"])


def _swap_answer_and_truth_claims(entries: list[Entry]) -> list[Entry]:
    tampered = copy.deepcopy(entries)
    claims = [e for e in tampered if e["kind"] == "chat" and e["prompt"] == "claims"]
    texts = [data_blocks(e["request"]["messages"][-1]["content"])["text"] for e in claims]
    sample = next(s for s in SAMPLES if s["answer"] in texts and s["ground_truth"] in texts)
    a, t = (claims[texts.index(sample[k])] for k in ("answer", "ground_truth"))
    a["response"], t["response"] = t["response"], a["response"]
    return tampered


def test_the_checks_catch_a_swap_a_copy_and_a_missing_context():
    """The checks above fail on recordings that have the faults (so they can fail)."""
    assert misplaced_claims(_swap_answer_and_truth_claims(ENTRIES))
    copied = copy.deepcopy(ENTRIES)
    verify = next(e for e in copied if e["kind"] == "chat" and e["prompt"] == "verify")
    verdict = verify["response"]["choices"][0]["verdicts"][0]
    verdict["reason"] = sorted(example_reasons())[0]
    verdict["context"] = 7
    assert copied_reasons(copied) and missing_contexts(copied) == [7]
