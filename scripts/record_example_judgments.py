"""Record the judgments of the custom-metric examples (examples/*.py) on examples/data.jsonl.

The ratings below were written by hand (no model is reachable here), as a careful judge
following each example's prompt would give them. Run after changing an example's prompt:

    python scripts/record_example_judgments.py
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

from domain_accuracy import domain_accuracy  # noqa: E402
from rubric import support_tone  # noqa: E402

import judge  # noqa: E402
from judge.cache.store import Cache  # noqa: E402
from judge.testing import FIXTURE_SERVER, FakeLLMServer  # noqa: E402

MODEL = "openai/judge-fixture"
# sample id -> (domain rating 0-5, reason), (tone level 0-4, reason)
HAND_JUDGED = {
    "refund-1": (
        (5, "Correct window and where to request it."),
        (4, "Polite, direct, and gives the next step."),
    ),
    "refund-2": (
        (1, "Wrong: shipping is refunded only for damaged or wrong items."),
        (3, "Polite and direct, but no next step."),
    ),
    "warranty-1": (
        (5, "Two years matches the 24-month warranty."),
        (4, "Direct and tells the customer how to start a claim."),
    ),
    "password-1": (
        (4, "The reset link is right; no mention of the reset email."),
        (1, "Condescending: blames the customer for forgetting."),
    ),
    "invoice-1": (
        (5, "与参考答案一致：订单页面申请，3 个工作日内处理。"),
        (4, "礼貌直接，并给出了下一步操作。"),
    ),
}


def answer(body: dict) -> str:
    """Reply as the hand-written judgment for the sample named by the request's question."""
    user = body["messages"][1]["content"]
    question = json.loads(re.search(r"<question>(.*?)</question>", user, re.S).group(1))
    sample = next(s for s in SAMPLES if s["question"] == question)
    (rating, why_rating), (level, why_level) = HAND_JUDGED[sample["id"]]
    if "<reference>" in user:
        return json.dumps({"rating": rating, "reason": why_rating}, ensure_ascii=False)
    return json.dumps({"level": level, "reason": why_level}, ensure_ascii=False)


SAMPLES = [json.loads(line) for line in (ROOT / "examples/data.jsonl").read_text().splitlines()]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=answer) as server:
        cache = Cache(Path(tmp) / "c.sqlite", mode="record")
        judge.evaluate(
            ROOT / "examples/data.jsonl",
            metrics=[domain_accuracy, support_tone],
            llm=judge.LLM(MODEL, api_base=server.base_url, api_key="x", cache_as=FIXTURE_SERVER),
            cache=cache,
            progress=False,
        )
        out = ROOT / "examples/judgments.jsonl"
        count = cache.export_jsonl(out, reproducible=True)
        cache.close()
    print(f"wrote {out} ({count} judgments)")


if __name__ == "__main__":
    main()
