"""The end-to-end metrics on hand-written judgments (fixtures/judged/end_to_end.*).

end_to_end.json holds 8 samples, the judgments a careful judge following the claims,
verify and citations prompts would make for answer_correctness, hallucination_rate,
citation_accuracy and faithfulness, and the values worked out by hand from them;
end_to_end.jsonl is those judgments as recorded by fixtures/recorders/record_end_to_end_fixtures.py.
Replayed through judge.score and the real client, every score must equal the hand-worked
value, with exactly the judge calls the JSON plans for.
"""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import judge.metrics.prompts
from judge.cache.store import Cache
from judge.comparison.evaluations import compare
from judge.llm.config import LLM
from judge.metrics.citations import find_citations
from judge.run.evaluate import evaluate
from judge.run.score import SampleResult, score
from judge.testing import (
    FakeLLMServer,
    RecordedRequest,
    data_blocks,
    heuristic_judge,
    recorded_chat,
    score_fixture,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "judged"
RECORD = "python fixtures/recorders/record_end_to_end_fixtures.py"
MODEL = "openai/judge-fixture"
METRICS = ("answer_correctness", "hallucination_rate", "citation_accuracy", "faithfulness")
CHAT = "/v1/chat/completions"
DATA: dict[str, Any] = json.loads((FIXTURES / "end_to_end.json").read_text(encoding="utf-8"))
SAMPLES: list[dict[str, Any]] = DATA["samples"]
IDS = [s["id"] for s in SAMPLES]
BY_ID = {s["id"]: s for s in SAMPLES}
# The judgment each call produces, and the judge (prompt) that makes it.
CALLS = {
    "answer_claims": "claims",
    "truth_claims": "claims",
    "answer_verdicts": "verify",
    "answer_vs_truth": "verify",
    "truth_vs_answer": "verify",
    "citation_checks": "citations",
}
JUDGES = {
    "You split one text": "claims",
    "You check numbered": "verify",
    "You check citation": "citations",
}
Entries = list[dict[str, Any]]
Replayed = dict[str, tuple[SampleResult, list[RecordedRequest]]]


@pytest.fixture(scope="module")
def entries() -> Entries:
    """The recorded judgments, checked to be fresh against the prompts on disk."""
    lines = (FIXTURES / "end_to_end.jsonl").read_text(encoding="utf-8").splitlines()
    loaded = [json.loads(line) for line in lines if line.strip()]
    recorded = {(e["prompt"], e["prompt_version"]) for e in loaded if e["kind"] == "chat"}
    stale = sorted(n for n, v in recorded if judge.metrics.prompts.load_prompt(n).version != v)
    if stale:
        pytest.fail(
            f"prompt(s) {', '.join(stale)} changed since fixtures/judged/end_to_end.jsonl was "
            f"recorded: check the hand-written judgments in end_to_end.json still fit the "
            f"prompt, then run `{RECORD}`",
            pytrace=False,
        )
    return loaded


def run(
    sample: dict[str, Any], server: FakeLLMServer, *, cache: Cache | None = None
) -> SampleResult:
    """judge.score of one sample with the fixtures' model name, against the server."""
    result: SampleResult = score_fixture(sample, server.base_url, METRICS, model=MODEL, cache=cache)
    return result


@pytest.fixture(scope="module")
def replayed(entries: Entries) -> Iterator[Replayed]:
    """Every sample scored over HTTP from the recorded judgments, with the requests it made."""
    out: Replayed = {}
    with FakeLLMServer(chat=recorded_chat(entries)) as server:
        for sample in SAMPLES:
            server.reset()
            out[sample["id"]] = (run(sample, server), list(server.requests))
    yield out


def numbered(items: list[dict[str, Any]] | None, field: str) -> list[dict[str, Any]]:
    return [{field: i, **item} for i, item in enumerate(items or [])]


def planned(sample: dict[str, Any]) -> list[str]:
    """The judge calls end_to_end.json plans for the sample (its judgments that are not null)."""
    return [name for name in CALLS if sample["judgments"][name] is not None]


def judge_of(request: RecordedRequest) -> str:
    system = request.body["messages"][0]["content"]
    return next(kind for prefix, kind in JUDGES.items() if system.startswith(prefix))


def user_data(request: RecordedRequest) -> dict[str, Any]:
    user = request.body["messages"][-1]["content"]
    return data_blocks(user)


def assert_expected(sample: dict[str, Any], result: SampleResult) -> None:
    """Each metric equals the hand-worked value; NaN with its reason."""
    assert not result.errors, f"{sample['id']}: {result.errors}; if in doubt, run `{RECORD}`"
    assert set(result.scores) == set(METRICS)
    for metric, want in sample["expected"].items():
        got = result.scores[metric]
        where = f"{sample['id']} {metric}"
        if isinstance(want, str):
            assert math.isnan(got), f"{where}: {got} instead of {want}"
            assert result.reasons.get(metric) == want.removeprefix("nan:"), where
        else:
            assert got == pytest.approx(want, abs=1e-12), where
            assert metric not in result.reasons, where


def same_scores(a: SampleResult, b: SampleResult) -> bool:
    """Equal scores, NaN equal to NaN, and equal NaN reasons."""
    nan_equal = all(
        x == y or (math.isnan(x) and math.isnan(y))
        for x, y in zip(a.scores.values(), b.scores.values(), strict=True)
    )
    return a.scores.keys() == b.scores.keys() and nan_equal and a.reasons == b.reasons


def test_the_fixtures_cover_what_they_claim() -> None:
    assert len(SAMPLES) == 8 and len(set(IDS)) == 8
    assert sum(s["language"] == "zh" for s in SAMPLES) >= 3
    assert all(3 <= len(s["contexts"]) <= 5 for s in SAMPLES)
    assert DATA["_meta"]["metrics"] == list(METRICS)
    values = {m: [s["expected"][m] for s in SAMPLES] for m in METRICS}
    assert "nan:no_ground_truth" in values["answer_correctness"]
    assert "nan:no_citations" in values["citation_accuracy"]
    assert any(isinstance(v, float) and 0 < v < 1 for v in values["answer_correctness"])
    assert {0.0, 1.0} <= set(values["hallucination_rate"])
    markers = [(c["marker"], c["context"]) for s in SAMPLES for c in s["judgments"]["citations"]]
    assert (9, None) in markers  # a citation to a context that does not exist
    wrong = BY_ID["en-everest-wrong-citation"]
    assert "8,848.86" in wrong["contexts"][0] and "8,848.86 metres tall. [2]" in wrong["answer"]


@pytest.mark.parametrize("sample_id", IDS)
def test_find_citations_gives_the_hand_written_citations(sample_id: str) -> None:
    sample = BY_ID[sample_id]
    found = find_citations(sample["answer"], len(sample["contexts"]))
    as_dicts = [{"statement": c.statement, "marker": c.marker, "context": c.context} for c in found]
    assert as_dicts == sample["judgments"]["citations"]


@pytest.mark.parametrize("sample_id", IDS)
def test_replay_gives_the_hand_worked_scores(replayed: Replayed, sample_id: str) -> None:
    assert_expected(BY_ID[sample_id], replayed[sample_id][0])


@pytest.mark.parametrize("sample_id", IDS)
def test_replay_makes_exactly_the_planned_judge_calls(replayed: Replayed, sample_id: str) -> None:
    sample = BY_ID[sample_id]
    result, requests = replayed[sample_id]
    chat = [r for r in requests if r.path == CHAT]
    assert len(requests) == len(chat)  # no embedding call for these metrics
    # The answer's and the ground truth's claims come from a claims call each.
    expected = Counter(CALLS[n] for n in planned(sample))
    assert Counter(judge_of(r) for r in chat) == expected
    assert result.usage["total"]["requests"] == len(chat)
    # Faithfulness and hallucination_rate share ONE verify call of the answer's claims
    # against the contexts; the ground truth's claims are not in it (no context_recall).
    j = sample["judgments"]
    verify = [user_data(r) for r in chat if judge_of(r) == "verify"]
    against_contexts = [d["claims"] for d in verify if d["contexts"] == sample["contexts"]]
    assert against_contexts == [j["answer_claims"]]


@pytest.mark.parametrize("sample_id", IDS)
def test_evidence_holds_the_hand_written_judgments(replayed: Replayed, sample_id: str) -> None:
    j = BY_ID[sample_id]["judgments"]
    evidence = replayed[sample_id][0].evidence
    hint = f"{sample_id}: replay differs from end_to_end.json; run `{RECORD}`"
    assert evidence["answer_claims"] == j["answer_claims"], hint
    assert evidence.get("truth_claims") == j["truth_claims"], hint
    assert evidence["answer_verdicts"] == numbered(j["answer_verdicts"], "claim"), hint
    assert "truth_verdicts" not in evidence  # context_recall was not asked for
    if j["answer_vs_truth"] is None:
        assert "correctness" not in evidence
    else:
        assert evidence["correctness"] == {
            "answer_claims_vs_ground_truth": numbered(j["answer_vs_truth"], "claim"),
            "truth_claims_vs_answer": numbered(j["truth_vs_answer"], "claim"),
        }, hint
    assert evidence["citations"] == j["citations"], hint
    assert evidence["citation_checks"] == numbered(j["citation_checks"], "check"), hint


def test_a_marker_naming_no_context_is_wrong_without_a_check(replayed: Replayed) -> None:
    sample = BY_ID["zh-tiangong-missing-context"]
    result, requests = replayed[sample["id"]]
    (call,) = [user_data(r) for r in requests if judge_of(r) == "citations"]
    # [1，9]: [1] is checked, [9] (4 contexts) is not sent to the judge but counts as wrong.
    assert [c["context"] for c in call["checks"]] == [1, 0]
    assert [c["marker"] for c in result.evidence["citations"]] == [2, 1, 9]
    assert result.scores["citation_accuracy"] == pytest.approx(2 / 3, abs=1e-12)


def test_cache_replay_makes_no_request(
    entries: Entries, replayed: Replayed, tmp_path: Path
) -> None:
    def refuse(body: dict[str, Any]) -> str:
        raise AssertionError("a cache replay must not reach the server")

    with Cache(tmp_path / "replay.sqlite", mode="replay") as cache:
        assert cache.import_jsonl(FIXTURES / "end_to_end.jsonl") == len(entries)
        with FakeLLMServer(chat=refuse) as server:
            for sample in SAMPLES:
                result = run(sample, server, cache=cache)
                assert_expected(sample, result)
                assert same_scores(result, replayed[sample["id"]][0]), sample["id"]
                assert result.evidence == replayed[sample["id"]][0].evidence
            assert server.count() == 0
        assert cache.misses == 0


def test_an_empty_answer_needs_no_judge_call() -> None:
    def refuse(body: dict[str, Any]) -> str:
        raise AssertionError("an empty answer needs no judgment")

    sample = {**BY_ID["en-curie-cited-correct"], "answer": "  ", "id": "empty"}
    with FakeLLMServer(chat=refuse) as server:
        result = run(sample, server)
        assert server.count() == 0
    assert all(math.isnan(v) for v in result.scores.values())
    assert result.reasons == dict.fromkeys(METRICS, "empty_answer") and not result.errors


def write_results(path: Path, scores: list[dict[str, float]]) -> Path:
    rows = [{"id": f"s{i}", "question": f"q{i}", "scores": s} for i, s in enumerate(scores)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_compare_treats_hallucination_rate_as_lower_is_better(tmp_path: Path) -> None:
    # 12 paired samples: B hallucinates on every one where A hallucinated on none, while
    # its faithfulness and answer_correctness rise; every difference has the same sign.
    a = [{"hallucination_rate": 0.0, "faithfulness": 0.8, "answer_correctness": 0.5}] * 12
    b = [{"hallucination_rate": 1.0, "faithfulness": 0.9, "answer_correctness": 0.6}] * 12
    path_a = write_results(tmp_path / "a.jsonl", a)
    path_b = write_results(tmp_path / "b.jsonl", b)

    worse = compare(path_a, path_b)
    rate = worse.metrics["hallucination_rate"]
    assert not rate.higher_is_better and rate.delta == 1.0
    assert (rate.wins, rate.ties, rate.losses) == (0, 0, 12)
    assert rate.significant and rate.worse
    assert [m.metric for m in worse.regressions()] == ["hallucination_rate"]
    for name in ("faithfulness", "answer_correctness"):
        up = worse.metrics[name]
        assert up.higher_is_better and up.wins == 12 and not up.worse
    assert worse.to_dict()["metrics"]["hallucination_rate"]["higher_is_better"] is False

    better = compare(path_b, path_a)
    rate = better.metrics["hallucination_rate"]
    assert rate.delta == -1.0 and (rate.wins, rate.losses) == (12, 0)
    assert rate.significant and not rate.worse
    assert [m.metric for m in better.regressions()] == ["faithfulness", "answer_correctness"]


# Bugs of judge/ found while writing these fixtures, fixed since: regression tests.


def test_a_marker_right_after_the_full_stop_ends_the_sentence() -> None:
    found = find_citations("The tower opened in 1889.[1] It is 330 metres tall.[2]", 2)
    assert [(c.statement, c.context) for c in found] == [
        ("The tower opened in 1889.", 0),
        ("It is 330 metres tall.", 1),
    ]


def test_no_correctness_verify_call_when_the_answer_has_no_claims() -> None:
    sample = BY_ID["en-planets-all-wrong"]

    def hand(body: dict[str, Any]) -> str:
        request = RecordedRequest("POST", CHAT, body, {})
        data = user_data(request)
        if judge_of(request) == "claims":
            truth = data["text"] == sample["ground_truth"]
            return json.dumps({"claims": sample["judgments"]["truth_claims"] if truth else []})
        verdicts = [
            {"claim": i, "verdict": "not_found", "reason": "Not in context 0.", "context": None}
            for i in range(len(data["claims"]))
        ]
        return json.dumps({"verdicts": verdicts})

    with FakeLLMServer(chat=hand) as server:
        llm = LLM(model=MODEL, api_base=server.base_url, api_key="fixture", max_retries=0)
        result = score(
            sample["question"],
            "I don't know.",
            sample["contexts"],
            sample["ground_truth"],
            metrics=["answer_correctness"],
            llm=llm,
        )
        kinds = Counter(judge_of(r) for r in server.requests)
    # A claim-less answer recalls none of the ground truth: 0, with no verify call.
    assert result["answer_correctness"] == 0.0
    assert "answer_correctness" not in result.reasons
    assert kinds == {"claims": 2}  # the answer's and the ground truth's


def test_checkpoint_rejudges_citations_after_the_citations_prompt_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = [
        {
            "id": "mercury",
            "question": "Which planet is closest to the Sun?",
            "answer": "Mercury is closest to the Sun [1].",
            "contexts": ["Mercury is the smallest planet and the closest to the Sun."],
        }
    ]
    checkpoint = tmp_path / "checkpoint.jsonl"
    with FakeLLMServer(chat=heuristic_judge) as server:
        llm = LLM(model=MODEL, api_base=server.base_url, api_key="fixture", max_retries=0)
        evaluate(
            data, metrics=["citation_accuracy"], llm=llm, checkpoint=checkpoint, progress=False
        )
        assert server.count(CHAT) == 1
        edited = tmp_path / "prompts"
        shutil.copytree(judge.metrics.prompts.prompts_dir(), edited)
        citations = edited / "citations.txt"
        text = citations.read_text(encoding="utf-8")
        citations.write_text(text.replace("Return exactly", "Be strict. Return exactly"), "utf-8")
        monkeypatch.setattr(judge.metrics.prompts, "prompts_dir", lambda: edited)
        server.reset()
        evaluate(
            data, metrics=["citation_accuracy"], llm=llm, checkpoint=checkpoint, progress=False
        )
        assert server.count(CHAT) == 1  # the changed prompt must judge the row again


def test_a_prompt_edited_during_a_run_takes_effect_in_the_next_run(tmp_path, monkeypatch):
    # A run reads its prompts once: every row is judged with the versions its fingerprint
    # and summary record, even when a prompt file changes while it goes on.
    edited = tmp_path / "prompts"
    shutil.copytree(judge.metrics.prompts.prompts_dir(), edited)
    monkeypatch.setattr(judge.metrics.prompts, "prompts_dir", lambda: edited)
    claims = edited / "claims.txt"
    original = judge.metrics.prompts.load_prompt("claims").version

    def edit_then_judge(body: dict) -> str:
        if "Be brief." not in claims.read_text(encoding="utf-8"):
            with open(claims, "a", encoding="utf-8") as f:
                f.write("\nBe brief.\n")  # after the first request, before the other rows
        return heuristic_judge(body)

    rows = [
        {"question": f"What is {t}?", "answer": f"{t} is a language.", "contexts": [f"{t}."]}
        for t in ("Python", "Rust", "Go")
    ]
    cache = Cache(tmp_path / "c.sqlite")
    with FakeLLMServer(chat=edit_then_judge) as server:
        llm = LLM(model=MODEL, api_base=server.base_url, api_key="fixture", max_concurrency=1)
        first = evaluate(rows, metrics=["faithfulness"], llm=llm, cache=cache, progress=False)
        second = evaluate(rows, metrics=["faithfulness"], llm=llm, cache=cache, progress=False)
    versions = Counter(e.prompt_version for e in cache.entries() if e.prompt == "claims")
    changed = judge.metrics.prompts.load_prompt("claims").version
    assert first.config["prompts"]["claims"] == original != changed
    assert second.config["prompts"]["claims"] == changed
    assert versions == {original: 3, changed: 3}  # each run judged every row with its own
