"""A trace's tool spans become its row's `tools_called` (name, arguments and output as
recorded, in start order), for the tool-call metrics and `trajectory_accuracy` in `judge
eval`, also as a turn of a session; traces made by the real OpenTelemetry SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes

import judge
from judge.testing import FakeLLMServer
from judge.testing.replies import data_blocks
from judge.traces.extract import read_rows
from tests.helpers.agent_spans import agent, genai_tool, generator, hop, tool
from tests.helpers.rag_spans import KIND
from tests.helpers.traces import export, write_json_lines

EXPECTED = [
    {"name": "geocode", "arguments": {"city": "Lyon"}},
    {"name": "forecast", "arguments": {"city": "Lyon", "days": 1}},
]


def tool_with_output(tracer: Any, name: str, arguments: dict, output: str) -> None:
    """An OpenInference TOOL span that records what it returned (output.value)."""
    with tracer.start_as_current_span("tool") as span:
        span.set_attribute(KIND, OpenInferenceSpanKindValues.TOOL.value)
        span.set_attribute(SpanAttributes.TOOL_NAME, name)
        span.set_attribute(SpanAttributes.INPUT_VALUE, json.dumps(arguments))
        span.set_attribute(SpanAttributes.OUTPUT_VALUE, output)


def scenarios(provider: Any) -> dict[str, str]:
    t = provider.get_tracer("tests.trajectory")
    ids: dict[str, str] = {}

    def same() -> None:  # the expected calls
        hop(t, "Lyon weather", ["d1"])
        tool(t, "geocode", {"city": "Lyon"})
        tool(t, "forecast", {"days": 1, "city": "Lyon"})
        generator(t, "Sunny.", prompt_docs=["d1"])

    ids["same"] = agent(t, "Weather in Lyon tomorrow?", same, "Sunny.")

    def skipped() -> None:  # the forecast asked for directly, its output recorded
        hop(t, "Lyon weather", ["d1"])
        tool_with_output(t, "forecast", {"city": "Lyon, France", "days": 1}, "sunny, 24 C")
        generator(t, "Sunny, 24 C.", prompt_docs=["d1"])

    ids["skipped"] = agent(t, "Weather in Lyon tomorrow, please?", skipped, "Sunny, 24 C.")

    def genai() -> None:  # GenAI execute_tool spans, the same calls in the other order
        hop(t, "Lyon weather", ["d1"])
        genai_tool(t, "forecast", {"city": "Lyon", "days": 1})
        genai_tool(t, "geocode", {"city": "Lyon"})
        generator(t, "Sunny.", prompt_docs=["d1"])

    ids["genai"] = agent(t, "Weather in Lyon tomorrow then?", genai, "Sunny.")

    def no_tools() -> None:
        hop(t, "Lyon weather", ["d1"])
        generator(t, "Sunny.", prompt_docs=["d1"])

    ids["no_tools"] = agent(t, "Weather in Lyon?", no_tools, "Sunny.")
    return ids


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], dict[str, str]]:
    ids: dict[str, str] = {}
    bodies = export(lambda provider: ids.update(scenarios(provider)))
    path = write_json_lines(bodies, tmp_path_factory.mktemp("tools") / "traces.jsonl")
    rows = {r["id"]: r for r in read_rows(path)}
    return {name: rows[trace] for name, trace in ids.items()}, ids


def test_tool_spans_are_the_rows_calls_in_start_order(traced):
    rows, _ = traced
    assert rows["same"]["tools_called"] == [
        {"name": "geocode", "arguments": '{"city": "Lyon"}'},
        {"name": "forecast", "arguments": '{"days": 1, "city": "Lyon"}'},
    ]
    assert rows["skipped"]["tools_called"] == [
        {
            "name": "forecast",
            "arguments": '{"city": "Lyon, France", "days": 1}',
            "output": "sunny, 24 C",
        }
    ]
    assert [c["name"] for c in rows["genai"]["tools_called"]] == ["forecast", "geocode"]
    assert "tools_called" not in rows["no_tools"]  # a trace without tools: its row as ever


def test_trajectory_accuracy_judges_a_traces_tool_calls(
    traced, models, fake_llm_server: FakeLLMServer
):
    rows, _ = traced
    data = [{**row, "expected_tools": EXPECTED} for row in rows.values()]
    result = judge.evaluate(
        data,
        metrics=["trajectory_accuracy", "tool_call_recall", "tool_call_order"],
        llm=models["llm"],
        progress=False,
    )
    scored = {name: r for name, r in zip(rows, result.rows, strict=True)}
    assert scored["same"].scores["trajectory_accuracy"] == 1.0
    assert scored["same"].evidence["trajectory"]["settled"] == "same_calls"
    assert scored["no_tools"].scores["trajectory_accuracy"] == 0.0  # nothing called
    # geocode never called: unsound to the heuristic judge; the order alone: sound
    assert scored["skipped"].scores["tool_call_recall"] == 0.5
    assert scored["skipped"].scores["trajectory_accuracy"] == 0.0
    assert scored["genai"].scores["tool_call_order"] == 0.5
    assert scored["genai"].scores["trajectory_accuracy"] == 1.0
    bodies = [r.body for r in fake_llm_server.requests if r.path.endswith("/chat/completions")]
    assert len(bodies) == 2  # the two traces whose calls differ
    shown = [data_blocks(b["messages"][1]["content"]) for b in bodies]
    skipped = next(b for b in shown if len(b["called"]) == 1)
    assert skipped["called"] == [
        {
            "name": "forecast",
            "arguments": {"city": "Lyon, France", "days": 1},
            "result": "sunny, 24 C",
        }
    ]
    assert skipped["request"] == ["user: Weather in Lyon tomorrow, please?"]


def session_traces(provider: Any) -> None:
    """Two traces of one session: the second one calls a tool."""
    t = provider.get_tracer("tests.trajectory")

    def turn(question: str, answer: str, body: Any) -> None:
        with t.start_as_current_span("agent") as span:
            span.set_attribute(KIND, OpenInferenceSpanKindValues.AGENT.value)
            span.set_attribute(SpanAttributes.SESSION_ID, "trip")
            span.set_attribute(SpanAttributes.INPUT_VALUE, question)
            body()
            span.set_attribute(SpanAttributes.OUTPUT_VALUE, answer)

    def first() -> None:
        hop(t, "Lyon", ["d1"])
        generator(t, "Have a good trip.", prompt_docs=["d1"])

    def second() -> None:
        hop(t, "Lyon weather", ["d1"])
        tool_with_output(t, "forecast", {"city": "Lyon", "days": 1}, "sunny")
        generator(t, "Sunny.", prompt_docs=["d1"])

    turn("I am going to Lyon.", "Have a good trip.", first)
    turn("What will the weather be there tomorrow?", "Sunny.", second)


def test_a_sessions_turn_keeps_its_traces_tool_calls(
    tmp_path, models, fake_llm_server: FakeLLMServer
):
    from judge.traces.extract import read_sessions

    path = write_json_lines(export(session_traces), tmp_path / "traces.jsonl")
    (conversation,) = list(read_sessions(path))
    first, second = (m for m in conversation["turns"] if m["role"] == "assistant")
    assert "tools_called" not in first
    assert second["tools_called"] == [
        {"name": "forecast", "arguments": '{"city": "Lyon", "days": 1}', "output": "sunny"}
    ]
    second["expected_tools"] = EXPECTED
    result = judge.evaluate(
        [conversation], metrics=["trajectory_accuracy"], llm=models["llm"], progress=False
    )
    last = result.rows[-1]
    assert last.scores["trajectory_accuracy"] == 0.0  # geocode never called
    (body,) = [r.body for r in fake_llm_server.requests if r.path.endswith("/chat/completions")]
    assert data_blocks(body["messages"][1]["content"])["request"] == [
        "user: I am going to Lyon.",
        "assistant: Have a good trip.",
        "user: What will the weather be there tomorrow?",
    ]
