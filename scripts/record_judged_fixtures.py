"""Record fixtures/judged/judgments.jsonl from the hand-written judgments in samples.json.

A FakeLLMServer answers every judge call from the judgments written in samples.json (no
model is involved); `judge.score` runs each sample through the real litellm client with a
Cache in record mode, and the cache is exported as sorted JSONL. Running it twice gives
byte-identical output.

Run: python scripts/record_judged_fixtures.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from judge.cache.store import Cache
from judge.cli.demo import DEMO_EMBEDDINGS, DEMO_METRICS, DEMO_MODEL
from judge.run.score import SampleResult
from judge.testing import FakeLLMServer, data_blocks, score_fixture

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "fixtures" / "judged" / "samples.json"
OUTPUT = ROOT / "fixtures" / "judged" / "judgments.jsonl"
MODEL, EMBED_MODEL, METRICS = DEMO_MODEL, DEMO_EMBEDDINGS, DEMO_METRICS  # judge demo replays them
# The first line of each prompt's system section names the judge (see prompts/*.txt).
JUDGES = {
    "You split one text into atomic claims for fact-checking.": "claims",
    "You check numbered claims against numbered contexts.": "verify",
    "You judge how useful each retrieved context is for answering a question.": "grade",
    "You write the questions that an answer answers.": "reverse",
}


def load_samples(path: Path = SAMPLES) -> list[dict[str, Any]]:
    """The samples of samples.json (without its _meta)."""
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["samples"]
    return samples


def _numbered(items: list[dict[str, Any]], field: str) -> list[dict[str, Any]]:
    return [{field: i, **item} for i, item in enumerate(items)]


class HandJudge:
    """A fake-server chat handler answering each judge call from the hand-written judgments."""

    def __init__(self, samples: list[dict[str, Any]]):
        self.samples = samples
        self.unplanned: list[str] = []  # calls judge.score made that samples.json says it skips

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        system = messages[0]["content"].splitlines()[0]
        kind = JUDGES.get(system)
        if kind is None:
            raise ValueError(f"no judge starts its system message with {system!r}")
        user = next(m["content"] for m in messages if m["role"] == "user")
        data = data_blocks(user)
        reply = getattr(self, f"_{kind}")(data)
        return json.dumps(reply, ensure_ascii=False)

    def _find(self, what: str, **inputs: Any) -> dict[str, Any]:
        for sample in self.samples:
            if all(sample[k] == v for k, v in inputs.items()):
                return sample
        raise LookupError(f"{what}: no sample has {json.dumps(inputs, ensure_ascii=False)[:200]}")

    def _claims(self, data: dict[str, Any]) -> dict[str, Any]:
        sample = self._find("claims", question=data["question"])
        judged = sample["judgments"]
        text = data["text"]  # one call per text: the answer's, then the ground truth's
        if text == sample["answer"] and judged["answer_claims"] is not None:
            claims = judged["answer_claims"]
        elif text == sample["ground_truth"] and judged["truth_claims"] is not None:
            claims = judged["truth_claims"]
        else:
            raise LookupError(f"{sample['id']}: no hand-written claims for {text[:80]!r}")
        if not text.strip():
            self.unplanned.append(f"{sample['id']}: claims asked for an empty text")
        return {"claims": claims}

    def _verify(self, data: dict[str, Any]) -> dict[str, Any]:
        claims = data["claims"]
        for sample in self.samples:
            if sample["contexts"] != data["contexts"]:
                continue
            j = sample["judgments"]
            answer = (j["answer_claims"] or [], j["answer_verdicts"] or [])
            truth = (j["truth_claims"] or [], j["truth_verdicts"] or [])
            # judge.score verifies the answer's and the truth's claims in one call.
            for listed, verdicts in (
                (answer[0] + truth[0], answer[1] + truth[1]),
                answer,
                truth,
            ):
                if listed == claims:
                    return {"verdicts": _numbered(verdicts, "claim")}
        raise LookupError(f"verify: no sample has these contexts and claims {claims!r:.200}")

    def _grade(self, data: dict[str, Any]) -> dict[str, Any]:
        sample = self._find("grade", question=data["question"], contexts=data["contexts"])
        reference = data["reference"]
        if reference not in (sample["ground_truth"], sample["answer"]):
            raise LookupError(f"{sample['id']}: unexpected reference {reference!r:.80}")
        return {"contexts": _numbered(sample["judgments"]["context_grades"], "context")}

    def _reverse(self, data: dict[str, Any]) -> dict[str, Any]:
        reverse: dict[str, Any] = self._find("reverse", answer=data["answer"])["judgments"][
            "reverse_questions"
        ]
        return reverse


def score_all(
    samples: list[dict[str, Any]], server: FakeLLMServer, cache: Cache | None = None
) -> list[SampleResult]:
    """judge.score of every sample against the server (the fixtures' model names)."""
    return [
        score_fixture(
            s, server.base_url, METRICS, model=MODEL, embedding_model=EMBED_MODEL, cache=cache
        )
        for s in samples
    ]


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
    return hand


def main() -> None:
    """Record the fixtures and say what was written."""
    hand = record()
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    for note in hand.unplanned:
        print(f"warning: unplanned judge call ({note})", file=sys.stderr)


if __name__ == "__main__":
    main()
