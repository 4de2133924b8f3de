"""`judge traces hops` attacked with traces a coarse clock made (issue 40): hops that start
in the same tick are still put in the order they ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from judge.traces.hops import read_agent_traces

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
