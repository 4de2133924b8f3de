"""RAG traces for the monitor's tests, made by the real OpenTelemetry SDK at chosen times:
each a CHAIN root with a retriever and an answer that the heuristic judge finds faithful
(its words are in the documents) or not."""

from __future__ import annotations

from typing import Any

from tests.helpers.rag_spans import DOCS, KIND, documents

MINUTE = 60 * 10**9
START = 1_796_000_400 * 10**9  # 2026-11-30, on a whole hour


def good_answer(i: int) -> str:
    return f"River {i % 8} is {(i % 8) * 100} km long."


BAD_ANSWER = "The moon is made of green cheese."


def rag_traces(
    provider: Any,
    count: int,
    *,
    start: int = START,
    step: int = MINUTE,
    bad_from: int | None = None,
    first: int = 0,
) -> list[str]:
    """`count` traces, trace i starting at start + i * step; from trace `bad_from` on the
    answers are unfaithful. Returns their trace ids (hex), in order."""
    from opentelemetry.trace import set_span_in_context

    tracer = provider.get_tracer("tests.monitor")
    ids = []
    for n in range(first, first + count):
        t = start + n * step
        doc = f"d{n % 8}"
        root = tracer.start_span("RAG", start_time=t)
        root.set_attribute(KIND, "CHAIN")
        root.set_attribute("input.value", f"How long is river {n % 8}? (asked {n})")
        child = tracer.start_span("retrieve", context=set_span_in_context(root), start_time=t)
        child.set_attribute(KIND, "RETRIEVER")
        child.set_attributes(documents("retrieval.documents", [doc], [1.0]))
        child.end(end_time=t + 10**6)
        bad = bad_from is not None and n >= bad_from
        root.set_attribute("output.value", BAD_ANSWER if bad else good_answer(n))
        root.end(end_time=t + 2 * 10**6)
        ids.append(format(root.get_span_context().trace_id, "032x"))
    assert DOCS  # the documents the answers are checked against
    return ids


def no_retriever_trace(provider: Any, start: int = START) -> str:
    """A trace without a retriever span: no row (no_retriever)."""
    tracer = provider.get_tracer("tests.monitor")
    root = tracer.start_span("RAG", start_time=start)
    root.set_attribute(KIND, "CHAIN")
    root.set_attribute("input.value", "Hello?")
    root.set_attribute("output.value", "Hi.")
    root.end(end_time=start + 10**6)
    return format(root.get_span_context().trace_id, "032x")
