"""Run DeepEval's turn metrics on conversations against a fake server (runs in DeepEval's venv).

Started by bench/quality/conversation_cost.py with bench/.deepeval-venv's python; imports
neither judge nor bench. The judge model is a DeepEval custom model (DeepEvalBaseLLM) that
sends each prompt to the OpenAI-compatible server as one user message, with the metric's
pydantic schema as response_format, and returns the parsed schema instance. Each request
carries an x-bench-metric header so the server's log can be split by metric.

Usage: python deepeval_runner.py CONVERSATIONS_JSON BASE_URL OUT_JSON
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

# Before deepeval is imported: no telemetry, no update check, no .deepeval files written.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_GRPC_LOGGING", "NO")
os.environ.setdefault("ERROR_REPORTING", "NO")

import openai
from deepeval.metrics import (
    KnowledgeRetentionMetric,
    TurnContextualPrecisionMetric,
    TurnContextualRecallMetric,
    TurnFaithfulnessMetric,
    TurnRelevancyMetric,
)
from deepeval.models import DeepEvalBaseLLM
from deepeval.test_case import ConversationalTestCase, Turn

METRICS = {
    "TurnFaithfulness": TurnFaithfulnessMetric,
    "TurnContextualPrecision": TurnContextualPrecisionMetric,
    "TurnContextualRecall": TurnContextualRecallMetric,
    "TurnRelevancy": TurnRelevancyMetric,
    "KnowledgeRetention": KnowledgeRetentionMetric,
}


class FakeServerModel(DeepEvalBaseLLM):
    """DeepEval's custom-model path: structured output parsed into the requested schema."""

    def __init__(self, base_url: str, tag: str):
        self.base_url, self.tag = base_url, tag
        self.client = openai.OpenAI(base_url=base_url, api_key="x")
        self.aclient = openai.AsyncOpenAI(base_url=base_url, api_key="x")
        super().__init__("bench-deepeval")

    def load_model(self) -> Any:
        return self.client

    def _request(self, prompt: str, schema: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": "bench-deepeval",
            "messages": [{"role": "user", "content": prompt}],
            "extra_headers": {"x-bench-metric": self.tag},
        }
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
            }
        return body

    def generate(self, prompt: str, schema: Any = None) -> Any:
        reply = self.client.chat.completions.create(**self._request(prompt, schema))
        text = reply.choices[0].message.content or ""
        return schema.model_validate_json(text) if schema is not None else text

    async def a_generate(self, prompt: str, schema: Any = None) -> Any:
        reply = await self.aclient.chat.completions.create(**self._request(prompt, schema))
        text = reply.choices[0].message.content or ""
        return schema.model_validate_json(text) if schema is not None else text

    def get_model_name(self) -> str:
        return "bench-deepeval (fake server)"


def test_case(conversation: dict[str, Any]) -> ConversationalTestCase:
    """A ConversationalTestCase from a judge-style conversation dict."""
    turns = [
        Turn(role=t["role"], content=t["content"], retrieval_context=t.get("contexts"))
        for t in conversation["turns"]
    ]
    return ConversationalTestCase(turns=turns, expected_outcome=conversation.get("reference"))


def main() -> None:
    conversations_path, base_url, out_path = sys.argv[1:4]
    with open(conversations_path, encoding="utf-8") as data:
        groups = json.load(data)
    import deepeval

    report: dict[str, Any] = {"version": deepeval.__version__, "scores": {}, "errors": {}}
    start = time.perf_counter()
    # Default settings (a reason written per window and one for the whole conversation),
    # then include_reason=False, which leaves the verdict calls alone.
    for reasons, suffix in ((True, ""), (False, "/noreason")):
        for length, conversations in groups.items():
            for name, metric_class in METRICS.items():
                tag = f"{name}@{length}{suffix}"
                model = FakeServerModel(base_url, tag)
                report["scores"][tag] = measure(
                    metric_class, model, reasons, conversations, tag, report
                )
    report["eval_s"] = time.perf_counter() - start
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump(report, out)


def measure(
    metric_class: Any,
    model: FakeServerModel,
    reasons: bool,
    conversations: list[dict[str, Any]],
    tag: str,
    report: dict[str, Any],
) -> list[float | None]:
    """The metric's score on each conversation (None where it raised, the error kept)."""
    scores: list[float | None] = []
    for conversation in conversations:
        metric = metric_class(model=model, async_mode=True, include_reason=reasons)
        try:
            scores.append(metric.measure(test_case(conversation), _show_indicator=False))
        except Exception as exc:  # reported, not hidden
            report["errors"].setdefault(tag, []).append(f"{type(exc).__name__}: {exc}")
            scores.append(None)
    return scores


if __name__ == "__main__":
    main()
