"""Agent traces written with the OpenTelemetry SDK's tracer and the OpenInference (and
GenAI) conventions' own attribute names: a root CHAIN, two or three retriever spans (hops),
tool spans, and an LLM span whose input records what the generator saw, or not.

Each scenario's expected diagnosis is worked out by hand in tests/traces/test_hops.py."""

from __future__ import annotations

import json
from typing import Any

from openinference.semconv.trace import (
    DocumentAttributes,
    MessageAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)

from tests.helpers.rag_spans import DOCS, KIND, documents


def hop(tracer: Any, query: str, ids: list[str]) -> None:
    """A retriever span (a hop) with its documents: ids, contents, falling scores."""
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute(KIND, OpenInferenceSpanKindValues.RETRIEVER.value)
        span.set_attribute(SpanAttributes.INPUT_VALUE, query)
        scores = [round(0.9 - 0.1 * i, 2) for i in range(len(ids))]
        span.set_attributes(documents(SpanAttributes.RETRIEVAL_DOCUMENTS, ids, scores))


def tool(tracer: Any, name: str | None, arguments: Any, span_name: str = "tool") -> None:
    """An OpenInference TOOL span: tool.name, and the arguments as input.value (JSON text
    of them, or the text given as it is: malformed JSON stays malformed)."""
    with tracer.start_as_current_span(span_name) as span:
        span.set_attribute(KIND, OpenInferenceSpanKindValues.TOOL.value)
        if name is not None:
            span.set_attribute(SpanAttributes.TOOL_NAME, name)
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        span.set_attribute(SpanAttributes.INPUT_VALUE, text)


def genai_tool(tracer: Any, name: str, arguments: dict[str, Any]) -> None:
    """A GenAI execute_tool span."""
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g

    with tracer.start_as_current_span(f"execute_tool {name}") as span:
        span.set_attribute(g.GEN_AI_OPERATION_NAME, g.GenAiOperationNameValues.EXECUTE_TOOL.value)
        span.set_attribute(g.GEN_AI_TOOL_NAME, name)
        span.set_attribute(g.GEN_AI_TOOL_CALL_ARGUMENTS, json.dumps(arguments))


def generator(
    tracer: Any,
    answer: str,
    prompt_docs: list[str] | None = None,
    listed: list[str] | None = None,
) -> None:
    """The LLM span: its prompt holding the contents of `prompt_docs` (llm.input_messages),
    or listing `listed` by id (input.documents); neither: no input recorded."""
    with tracer.start_as_current_span("ChatOpenAI") as span:
        span.set_attribute(KIND, OpenInferenceSpanKindValues.LLM.value)
        span.set_attribute(SpanAttributes.LLM_MODEL_NAME, "gpt-4o-mini")
        if prompt_docs is not None:
            context = "\n\n".join(DOCS[d] for d in prompt_docs)
            messages = [
                ("system", f"Answer from the context.\nContext:\n{context}"),
                ("user", "the question"),
            ]
            for n, (role, content) in enumerate(messages):
                prefix = f"{SpanAttributes.LLM_INPUT_MESSAGES}.{n}."
                span.set_attribute(prefix + MessageAttributes.MESSAGE_ROLE, role)
                span.set_attribute(prefix + MessageAttributes.MESSAGE_CONTENT, content)
        for n, doc in enumerate(listed or ()):
            span.set_attribute(
                f"{SpanAttributes.INPUT_DOCUMENTS}.{n}.{DocumentAttributes.DOCUMENT_ID}", doc
            )
        span.set_attribute(
            f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0.{MessageAttributes.MESSAGE_CONTENT}", answer
        )


def agent(tracer: Any, question: str, body: Any, answer: str = "an answer") -> str:
    """A root AGENT span around body(); its trace id as hex."""
    with tracer.start_as_current_span("agent") as span:
        span.set_attribute(KIND, OpenInferenceSpanKindValues.AGENT.value)
        span.set_attribute(SpanAttributes.INPUT_VALUE, question)
        body()
        span.set_attribute(SpanAttributes.OUTPUT_VALUE, answer)
        return format(span.get_span_context().trace_id, "032x")


def agent_scenarios(provider: Any) -> dict[str, str]:
    """Write every scenario's trace; name -> trace id."""
    t = provider.get_tracer("tests.agent")
    ids: dict[str, str] = {}

    def kept() -> None:  # d1 found at hop 1, again at hop 2, in the prompt
        hop(t, "river 1", ["d1", "d2", "d3"])
        tool(t, "search_web", {"q": "river 1"})
        hop(t, "river 1 length", ["d4", "d1"])
        tool(t, "calculator", {"expr": "1+1"})
        generator(t, "River 1 is 100 km.", prompt_docs=["d4", "d1"])

    ids["kept"] = agent(t, "How long is river 1?", kept)

    def lost() -> None:  # d6 only at hop 1, d0 only at hop 3; neither in the prompt
        hop(t, "river 6", ["d2", "d6"])
        tool(t, "calculator", {"expr": "1+1"})
        hop(t, "river 3", ["d3"])
        tool(t, "search_web", {"q": "river 1"})
        hop(t, "river 7", ["d7", "d0"])
        generator(t, "River 7 is 700 km.", prompt_docs=["d3", "d7"])

    ids["lost"] = agent(t, "Rivers 6 and 0?", lost)

    def listed() -> None:  # the generator lists its documents by id: d5 is not among them
        hop(t, "river 5", ["d5"])
        tool(t, "search_web", "{not json")  # malformed arguments
        tool(t, None, {"q": "x"}, span_name="")  # no name at all
        tool(t, "search_web", {"q": "x"})
        hop(t, "river 2", ["d2", "d5"])
        generator(t, "River 2 is 200 km.", listed=["d2"])

    ids["listed"] = agent(t, "How long is river 5?", listed)

    def unrecorded() -> None:  # the LLM span records no input
        hop(t, "river 1", ["d1"])
        hop(t, "river 3", ["d3"])
        big = {"rows": [{"n": i, "w": 1.0, "s": "x" * 20} for i in range(3000)], "a": 1}
        tool(t, "load_table", big)
        generator(t, "River 1 is 100 km.")

    ids["unrecorded"] = agent(t, "How long is river 1, again?", unrecorded)

    def missed() -> None:  # no hop retrieves the gold d7
        hop(t, "river 2", ["d2"])
        genai_tool(t, "search_web", {"q": "river 7"})
        generator(t, "I do not know.", prompt_docs=["d2"])

    ids["missed"] = agent(t, "How long is river 7?", missed)

    def unlabelled() -> None:
        hop(t, "river 4", ["d4"])
        generator(t, "River 4 is 400 km.", prompt_docs=["d4"])

    ids["unlabelled"] = agent(t, "How long is river 4?", unlabelled)
    return ids
