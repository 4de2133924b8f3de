"""Record fixtures/judged/end_to_end.jsonl from the hand-written judgments in end_to_end.json.

The end-to-end metrics (answer_correctness, hallucination_rate, citation_accuracy) and
faithfulness: a FakeLLMServer answers every judge call from the judgments written in
end_to_end.json (no model is involved); `judge.score` runs each sample through the real
litellm client with a Cache in record mode, and the cache is exported as sorted JSONL.
A call the JSON does not plan for (its judgment is null, or no judgment fits) fails the
recording. Running it twice gives byte-identical output.

Run: python scripts/record_end_to_end_fixtures.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from judge.cache.store import Cache
from judge.run.score import SampleResult
from judge.testing import FakeLLMServer, data_blocks, score_fixture

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "fixtures" / "judged" / "end_to_end.json"
OUTPUT = ROOT / "fixtures" / "judged" / "end_to_end.jsonl"
MODEL = "openai/judge-fixture"
METRICS = ("answer_correctness", "hallucination_rate", "citation_accuracy", "faithfulness")
# The first line of each prompt's system section names the judge (see prompts/*.txt).
JUDGES = {
    "You split one text into atomic claims for fact-checking.": "claims",
    "You check numbered claims against numbered contexts.": "verify",
    "You check citations: does the cited context support the statement that cites it?": (
        "citations"
    ),
}


class UnplannedCall(LookupError):
    """judge.score made a judge call that end_to_end.json has no judgment for."""


def load_samples(path: Path = SAMPLES) -> list[dict[str, Any]]:
    """The samples of end_to_end.json (without its _meta)."""
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["samples"]
    return samples


def numbered(items: list[dict[str, Any]], field: str) -> list[dict[str, Any]]:
    """The items with their number first, as the judges return them."""
    return [{field: i, **item} for i, item in enumerate(items)]


def planned(judged: Any, sample: dict[str, Any], what: str) -> Any:
    """A hand-written judgment, or UnplannedCall when the JSON says there is no such call."""
    if judged is None:
        raise UnplannedCall(
            f"{sample['id']}: judge.score made the {what} call, planned as absent (null)"
        )
    return judged


class HandJudge:
    """A fake-server chat handler answering each judge call from the hand-written judgments."""

    def __init__(self, samples: list[dict[str, Any]]):
        self.samples = samples
        self.calls: dict[str, list[str]] = {s["id"]: [] for s in samples}

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        system = messages[0]["content"].splitlines()[0]
        kind = JUDGES.get(system)
        if kind is None:
            raise ValueError(f"no judge starts its system message with {system!r}")
        user = next(m["content"] for m in messages if m["role"] == "user")
        sample_id, names, reply = getattr(self, f"_{kind}")(data_blocks(user))
        # One claims call answers for several texts: it stands for each judgment it gives.
        self.calls[sample_id].extend(names if isinstance(names, list) else [names])
        return json.dumps(reply, ensure_ascii=False)

    def _claims(self, data: dict[str, Any]) -> tuple[str, list[str], dict[str, Any]]:
        for sample in self.samples:
            if sample["question"] != data["question"]:
                continue
            text = data["text"]  # one claims call per text
            for name, field in (("answer_claims", "answer"), ("truth_claims", "ground_truth")):
                if text == sample[field]:
                    claims = planned(sample["judgments"][name], sample, name)
                    return sample["id"], [name], {"claims": claims}
            raise UnplannedCall(f"claims: no text of {sample['id']} is {text!r:.120}")
        raise UnplannedCall(f"claims: no sample has the question {data['question']!r:.120}")

    def _verify(self, data: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        claims, contexts = data["claims"], data["contexts"]
        for sample in self.samples:
            j = sample["judgments"]
            # faithfulness and hallucination_rate: the answer's claims against the contexts;
            # answer_correctness: the answer's claims against the ground truth, and the
            # ground truth's claims against the answer.
            for name, listed, against in (
                ("answer_verdicts", j["answer_claims"], sample["contexts"]),
                ("answer_vs_truth", j["answer_claims"], [sample["ground_truth"]]),
                ("truth_vs_answer", j["truth_claims"], [sample["answer"]]),
            ):
                if listed == claims and against == contexts:
                    verdicts = planned(j[name], sample, name)
                    return sample["id"], name, {"verdicts": numbered(verdicts, "claim")}
        raise UnplannedCall(f"verify: no sample has these contexts and claims {claims!r:.200}")

    def _citations(self, data: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        checks = [(c["statement"], c["context"]) for c in data["checks"]]
        for sample in self.samples:
            if sample["contexts"] != data["contexts"]:
                continue
            j = sample["judgments"]
            valid = [
                (c["statement"], c["context"]) for c in j["citations"] if c["context"] is not None
            ]
            if valid != checks:
                raise UnplannedCall(
                    f"{sample['id']}: citation checks {checks!r:.200} != {valid!r:.200}"
                )
            judged = planned(j["citation_checks"], sample, "citation_checks")
            return sample["id"], "citation_checks", {"checks": numbered(judged, "check")}
        raise UnplannedCall(f"citations: no sample has these contexts {data['contexts']!r:.200}")


def planned_calls(sample: dict[str, Any]) -> list[str]:
    """The judge calls end_to_end.json plans for a sample (the judgments that are not null)."""
    names = (
        "answer_claims",
        "truth_claims",
        "answer_verdicts",
        "answer_vs_truth",
        "truth_vs_answer",
        "citation_checks",
    )
    return [n for n in names if sample["judgments"][n] is not None]


def score_all(
    samples: list[dict[str, Any]], server: FakeLLMServer, cache: Cache | None = None
) -> list[SampleResult]:
    """judge.score of every sample against the server (the fixtures' model name)."""
    return [score_fixture(s, server.base_url, METRICS, model=MODEL, cache=cache) for s in samples]


def record(samples_path: Path = SAMPLES, output: Path = OUTPUT) -> HandJudge:
    """Score every sample through the hand judge and export the recorded cache to output."""
    samples = load_samples(samples_path)
    hand = HandJudge(samples)
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeLLMServer(chat=hand) as server,
        Cache(Path(tmp) / "record.sqlite", mode="record") as cache,
    ):
        for result in score_all(samples, server, cache):
            if result.errors:
                raise SystemExit(f"{result.sample.id}: judge failed: {result.errors}")
        cache.export_jsonl(output, reproducible=True)
    for sample in samples:
        made, plan = sorted(hand.calls[sample["id"]]), sorted(planned_calls(sample))
        if made != plan:
            raise SystemExit(f"{sample['id']}: judge.score made calls {made}, planned {plan}")
    return hand


def main() -> None:
    """Record the fixtures and say what was written."""
    hand = record()
    calls = sum(len(c) for c in hand.calls.values())
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({calls} judge calls, {len(hand.calls)} samples)")


if __name__ == "__main__":
    main()
