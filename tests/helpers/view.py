"""Three real runs for the viewer's tests, judged through the fake server by the heuristic
judge (a sentence is a claim, word overlap with the contexts decides its support), and
their run records as the run store gives them (`RunRecord.to_dict()`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from judge import LLM, evaluate
from judge.testing import FakeLLMServer
from tests.helpers.judging import judge_handler

CONTEXTS = ["Python was created by Guido van Rossum.", "Python was first released in 1991."]
TRUTH = "Guido van Rossum created Python."
SUPPORTED = "Guido van Rossum created Python."
UNSUPPORTED = "Bananas grow on Mars every winter."
# An answer that would run script if the page put it in as HTML.
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'

# Run name -> each question's answer: q1 stays supported, q2 and q3 lose support in
# "rerank" (q3 entirely), q4 keeps its markup-like answer throughout.
ANSWERS = {
    "base": [SUPPORTED, SUPPORTED, SUPPORTED, HOSTILE],
    "rerank": [SUPPORTED, f"{SUPPORTED} {UNSUPPORTED}", UNSUPPORTED, HOSTILE],
    "prompt-v3": [f"{SUPPORTED} {UNSUPPORTED}", SUPPORTED, SUPPORTED, HOSTILE],
}
CREATED = {
    "base": "2026-12-01T10:00:00Z",
    "rerank": "2026-12-02T10:00:00Z",
    "prompt-v3": "2026-12-03T10:00:00Z",
}
METRICS = ["faithfulness", "context_recall"]


def samples(name: str) -> list[dict[str, Any]]:
    """The run's four samples: the same ids and questions in every run, its own answers."""
    return [
        {
            "id": f"q{i + 1}",
            "question": f"Who created Python? (question {i + 1})",
            "answer": answer,
            "contexts": CONTEXTS,
            "ground_truth": TRUTH,
        }
        for i, answer in enumerate(ANSWERS[name])
    ]


def judged_runs(tmp: Path) -> dict[str, Path]:
    """Judge the three runs through a fake server; their output folders by run name."""
    folders = {}
    with FakeLLMServer() as server:
        server.chat = judge_handler
        llm = LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=1)
        for name in ANSWERS:
            result = evaluate(samples(name), metrics=METRICS, llm=llm, progress=False)
            folders[name] = tmp / name
            result.write(folders[name])
    return folders


def run_id(name: str) -> str:
    """A run's id, as the store makes them: 12 hex digits."""
    return hashlib.sha256(name.encode()).hexdigest()[:12]


def record(name: str, out_dir: Path, *, baseline: bool = False) -> dict[str, Any]:
    """The run store's record of a run folder (its summary.json's numbers)."""
    summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    config = summary["config"]
    return {
        "id": run_id(name),
        "name": name,
        "created": CREATED[name],
        "command": "eval",
        "out_dir": str(out_dir.resolve()),
        "data": "testset.jsonl",
        "data_sha256": config["data"]["sha256"],
        "model": config["model"],
        "embeddings": None,
        "prompts": config["prompts"],
        "metrics": config["metrics"],
        "summary": {
            m: {k: s[k] for k in ("mean", "ci_low", "ci_high", "scored")}
            for m, s in summary["metrics"].items()
        },
        "rows": summary["rows"],
        "git": {"commit": "40a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3", "dirty": name == "rerank"},
        "app": {"target": f"apps/{name}.py:answer", "fingerprint": "f" * 16},
        "tags": ["v2"] if name == "prompt-v3" else [],
        "baseline": baseline,
    }


def results_rows(out_dir: Path) -> dict[str, dict[str, Any]]:
    """A run's results.jsonl rows by id, as written."""
    lines = (out_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}
