"""`judge traces hops` attacked with traces a coarse clock made (issue 40): hops that start
in the same tick are still put in the order they ran."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from judge.testing import heuristic_judge
from judge.traces.hops import diagnose, read_agent_traces
from tests.helpers.cli import eval_args, run
from tests.helpers.traces import collector_json

KIND = "openinference.span.kind"
TICK = 1_700_000_000_000_000_000  # a clock of one tick: every span starts at it


class Descending(RandomIdGenerator):
    """Span ids that fall as spans are made: a later span has a smaller id."""

    def __init__(self) -> None:
        self.next = 1 << 60

    def generate_span_id(self) -> int:
        self.next -= 1
        return self.next


def coarse_clock_trace(path: Path) -> Path:
    """An agent's trace whose spans all start in one tick of its clock (a Windows clock, a
    millisecond export): a search for "first", then one for "second", one after the other
    (each ending before the next starts, as their end times say)."""
    spans = InMemorySpanExporter()
    provider = TracerProvider(id_generator=Descending())
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("agent")
    root = tracer.start_span("agent", start_time=TICK, attributes={KIND: "AGENT"})
    root.set_attribute("input.value", "Which document?")
    context = trace.set_span_in_context(root)
    for n, doc in enumerate(["first", "second"], 1):
        attributes: dict[str, Any] = {KIND: "RETRIEVER", "input.value": doc}
        attributes["retrieval.documents.0.document.id"] = doc
        hop = tracer.start_span("search", context=context, start_time=TICK, attributes=attributes)
        hop.end(end_time=TICK + 1000 * n)
    root.end(end_time=TICK + 5000)
    path.write_bytes(encode_spans(spans.get_finished_spans()).SerializeToString())
    return path


def test_hops_starting_in_one_tick_are_in_the_order_they_ran(tmp_path):
    """Hops of equal start times were put in the order of their span ids (random ids: a
    coin toss per pair), so a second search could be hop 1 and the diagnosis name the
    wrong hop; they are in the order of their end times."""
    (agent,) = read_agent_traces(coarse_clock_trace(tmp_path / "agent.pb"))
    assert [hop.ids for hop in agent.hops] == [["first"], ["second"]]


def chat_agent_traces(path: Path) -> Path:
    """Two turns of a chat with an agent, one trace each, in session "s": each searches,
    and the generator's prompt holds the document found."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("agent")
    texts = {"d1": "Parcel 7 is in Lyon.", "d2": "Parcel 8 is in Paris."}
    for n, (question, doc) in enumerate([("Where is parcel 7?", "d1"), ("And 8?", "d2")]):
        at = TICK + n * 10**9
        root = tracer.start_span("agent", start_time=at, attributes={KIND: "AGENT"})
        root.set_attributes({"input.value": question, "session.id": "s"})
        root.set_attribute("output.value", texts[doc])
        context = trace.set_span_in_context(root)
        hop = tracer.start_span("search", context=context, start_time=at + 10)
        hop.set_attributes({KIND: "RETRIEVER", "input.value": question})
        hop.set_attributes(
            {
                "retrieval.documents.0.document.id": doc,
                "retrieval.documents.0.document.content": texts[doc],
            }
        )
        hop.end(end_time=at + 20)
        llm = tracer.start_span("llm", context=context, start_time=at + 30)
        llm.set_attributes({KIND: "LLM", "input.value": f"Context: {texts[doc]}"})
        llm.set_attribute("output.value", texts[doc])
        llm.end(end_time=at + 40)
        root.end(end_time=at + 50)
    path.write_bytes(encode_spans(spans.get_finished_spans()).SerializeToString())
    return path


def test_a_sessions_runs_claims_are_attributed_to_their_traces_hops(tmp_path, fake_llm_server):
    """`judge eval` of the conversations `judge traces extract --sessions` wrote: its rows
    are turns (ids "s#2", "s#4"), each with its trace id; the claims were looked up by the
    row's id alone, so none was attributed to a hop."""
    fake_llm_server.chat = heuristic_judge
    traces = chat_agent_traces(tmp_path / "chat.pb")
    sessions = tmp_path / "sessions.jsonl"
    done = run("traces", "extract", traces, "--sessions", "-o", sessions)
    assert done.returncode == 0, done.stderr
    done = run(*eval_args(sessions, fake_llm_server, tmp_path, "--metrics", "faithfulness"))
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["trace_id"] for line in (tmp_path / "out/results.jsonl").open()]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(f"{ids[0]} 0 d1 1\n{ids[1]} 0 d2 1\n", encoding="utf-8")
    out = tmp_path / "hops.jsonl"
    done = run("traces", "hops", traces, "--qrels", qrels, "--results", tmp_path / "out", "-o", out)
    assert done.returncode == 0, done.stderr
    records = {r["trace_id"]: r for r in map(json.loads, out.open())}
    assert [records[t]["claims"][0]["doc_id"] for t in ids] == ["d1", "d2"]
    assert [records[t]["claims"][0]["hop"] for t in ids] == [1, 1]


def test_a_hop_that_lost_its_start_time_keeps_its_place(tmp_path):
    """A damaged export lost the second search's start time: it started in 1970, so it was
    hop 1. A span without a start time is placed by its end."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("agent")
    root = tracer.start_span("agent", start_time=TICK, attributes={KIND: "AGENT"})
    root.set_attribute("input.value", "Which document?")
    context = trace.set_span_in_context(root)
    for n, doc in enumerate(["first", "second"], 1):
        attributes: dict[str, Any] = {KIND: "RETRIEVER", "input.value": doc}
        attributes["retrieval.documents.0.document.id"] = doc
        at = TICK + 1000 * n
        hop = tracer.start_span("search", context=context, start_time=at, attributes=attributes)
        hop.end(end_time=at + 500)
    root.end(end_time=TICK + 5000)
    request = collector_json(encode_spans(spans.get_finished_spans()).SerializeToString())
    for resource in request["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                if span["startTimeUnixNano"] == str(TICK + 2000):
                    del span["startTimeUnixNano"]
    path = tmp_path / "agent.jsonl"
    path.write_text(json.dumps(request) + "\n", encoding="utf-8")
    (agent,) = read_agent_traces(path)
    assert [hop.ids for hop in agent.hops] == [["first"], ["second"]]


def test_an_llm_call_after_the_answer_is_not_the_generator(tmp_path):
    """An agent that, once it answered, asks a model for follow-up suggestions: that last
    LLM span was taken for the generator, whose prompt (the answer alone) holds no gold
    document, so the gold passed to the real generator was "lost after hop 1". The
    generator is the last LLM span that gave the trace's answer, when one did."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("agent")
    passage = "Express shipping takes two business days."
    answer = "Two business days."
    with tracer.start_as_current_span("agent") as root:
        root.set_attributes({KIND: "AGENT", "input.value": "How long is express shipping?"})
        with tracer.start_as_current_span("search") as hop:
            hop.set_attributes({KIND: "RETRIEVER", "input.value": "express shipping"})
            hop.set_attributes(
                {
                    "retrieval.documents.0.document.id": "shipping",
                    "retrieval.documents.0.document.content": passage,
                }
            )
        with tracer.start_as_current_span("generate") as llm:
            llm.set_attributes({KIND: "LLM", "input.value": f"Context: {passage}"})
            llm.set_attribute("output.value", answer)
        with tracer.start_as_current_span("follow-ups") as later:
            later.set_attributes({KIND: "LLM", "input.value": f"Suggest questions after: {answer}"})
            later.set_attribute("output.value", "Ask about returns?")
        root.set_attribute("output.value", answer)
    path = tmp_path / "agent.pb"
    path.write_bytes(encode_spans(spans.get_finished_spans()).SerializeToString())
    (agent,) = read_agent_traces(path)
    record = diagnose(agent, ["shipping"])
    assert record["generator_saw_gold"] is True and record["lost"] == []
