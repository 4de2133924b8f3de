"""RAG traces written with the OpenTelemetry SDK's tracer and the OpenInference semantic
conventions' own attribute names: a chain with a retriever, a reranker, two retriever
calls, no retriever, no output, and custom instrumentation."""

from __future__ import annotations

import json
from typing import Any

from openinference.semconv.trace import (
    DocumentAttributes,
    MessageAttributes,
    OpenInferenceSpanKindValues,
    RerankerAttributes,
    SpanAttributes,
)

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
DOCS = {f"d{i}": f"Document {i} says river {i} is {i * 100} km long." for i in range(8)}


def documents(prefix: str, ids: list[str], scores: list[float]) -> dict[str, Any]:
    """OpenInference's flattened documents: PREFIX.N.document.id|content|score."""
    out: dict[str, Any] = {}
    for n, (doc, score) in enumerate(zip(ids, scores, strict=True)):
        out[f"{prefix}.{n}.{DocumentAttributes.DOCUMENT_ID}"] = doc
        out[f"{prefix}.{n}.{DocumentAttributes.DOCUMENT_CONTENT}"] = DOCS[doc]
        out[f"{prefix}.{n}.{DocumentAttributes.DOCUMENT_SCORE}"] = score
    return out


def retriever(tracer: Any, query: str, ids: list[str], scores: list[float]) -> None:
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute(KIND, OpenInferenceSpanKindValues.RETRIEVER.value)
        span.set_attribute(SpanAttributes.INPUT_VALUE, query)
        span.set_attributes(documents(SpanAttributes.RETRIEVAL_DOCUMENTS, ids, scores))


def reranker(tracer: Any, before: list[str], after: list[str]) -> None:
    with tracer.start_as_current_span("rerank") as span:
        span.set_attribute(KIND, OpenInferenceSpanKindValues.RERANKER.value)
        span.set_attributes(
            documents(RerankerAttributes.RERANKER_INPUT_DOCUMENTS, before, [0.0] * len(before))
        )
        span.set_attributes(
            documents(
                RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS,
                after,
                [round(0.9 - 0.1 * i, 2) for i in range(len(after))],
            )
        )


def llm(tracer: Any, answer: str, model: str = "gpt-4o-mini", tokens: tuple[int, int] = (50, 10)):
    with tracer.start_as_current_span("ChatOpenAI") as span:
        span.set_attribute(KIND, OpenInferenceSpanKindValues.LLM.value)
        span.set_attribute(SpanAttributes.LLM_MODEL_NAME, model)
        span.set_attribute(
            f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0.{MessageAttributes.MESSAGE_CONTENT}", answer
        )
        span.set_attribute(SpanAttributes.LLM_TOKEN_COUNT_PROMPT, tokens[0])
        span.set_attribute(SpanAttributes.LLM_TOKEN_COUNT_COMPLETION, tokens[1])
        span.set_attribute(SpanAttributes.LLM_TOKEN_COUNT_TOTAL, sum(tokens))


def chain(tracer: Any, question: str, answer: str | None, body: Any, session: str = "s1") -> str:
    """A root CHAIN span around body(); its trace id as hex."""
    with tracer.start_as_current_span("RAG") as span:
        span.set_attribute(KIND, OpenInferenceSpanKindValues.CHAIN.value)
        span.set_attribute(SpanAttributes.INPUT_VALUE, json.dumps({"question": question}))
        span.set_attribute(SpanAttributes.INPUT_MIME_TYPE, "application/json")
        span.set_attribute(SpanAttributes.SESSION_ID, session)
        body()
        if answer is not None:
            span.set_attribute(SpanAttributes.OUTPUT_VALUE, answer)
        return format(span.get_span_context().trace_id, "032x")


def scenarios(provider: Any) -> dict[str, str]:
    """Write every scenario's trace; name -> trace id."""
    tracer = provider.get_tracer("tests.rag")
    ids = {}
    ids["plain"] = chain(
        tracer,
        "How long is river 1?",
        "River 1 is 100 km long.",
        lambda: (
            retriever(tracer, "river 1", ["d1", "d2", "d3"], [0.9, 0.5, 0.4]),
            llm(tracer, "River 1 is 100 km long."),
        ),
    )
    ids["reranked"] = chain(
        tracer,
        "How long is river 4?",
        "River 4 is 400 km long.",
        lambda: (
            retriever(tracer, "river 4", ["d2", "d3", "d4", "d5"], [0.8, 0.7, 0.6, 0.5]),
            reranker(tracer, ["d2", "d3", "d4", "d5"], ["d4", "d2"]),
            llm(tracer, "River 4 is 400 km long.", model="gpt-4o", tokens=(80, 12)),
        ),
        session="s2",
    )
    ids["two_retrievers"] = chain(
        tracer,
        "Compare rivers 5 and 6",
        "River 6 is longer.",
        lambda: (
            retriever(tracer, "river 5", ["d5", "d0"], [0.9, 0.1]),
            retriever(tracer, "river 6", ["d6", "d0"], [0.8, 0.2]),
            llm(tracer, "River 6 is longer."),
        ),
    )
    ids["no_retriever"] = chain(tracer, "Hello?", "Hi.", lambda: llm(tracer, "Hi."))
    ids["no_output"] = chain(
        tracer,
        "How long is river 7?",
        None,
        lambda: retriever(tracer, "river 7", ["d7"], [0.99]),
    )
    with tracer.start_as_current_span("handle_request") as root:
        root.set_attribute("app.query", "Which river is 300 km?")
        root.set_attribute("app.answer", "River 3.")
        with tracer.start_as_current_span("search") as search:
            search.set_attribute("app.doc_ids", ["d3", "d1"])
            search.set_attribute("app.doc_texts", [DOCS["d3"], DOCS["d1"]])
        ids["custom"] = format(root.get_span_context().trace_id, "032x")
    return ids


def shapes(provider: Any) -> dict[str, str]:
    """Trace shapes met in production; name -> trace id: a root whose parent is remote (a
    service called with a traceparent header), an HTTP server span above the chain, a child
    that ends after its root, a retriever and reranker in a nested chain after a
    query-rewriting LLM, and two rounds (a reranker, then a second retriever)."""
    from opentelemetry import context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

    tracer = provider.get_tracer("tests.rag")
    ids: dict[str, str] = {}
    remote = SpanContext(
        trace_id=0xABC0000000000000000000000000001,
        span_id=0x1234,
        is_remote=True,
        trace_flags=TraceFlags(1),
    )
    token = context.attach(set_span_in_context(NonRecordingSpan(remote)))
    ids["remote_parent"] = chain(
        tracer,
        "How long is river 1?",
        "River 1 is 100 km long.",
        lambda: (retriever(tracer, "r1", ["d1"], [0.9]), llm(tracer, "River 1 is 100 km long.")),
    )
    context.detach(token)
    with tracer.start_as_current_span("POST /ask") as http:
        http.set_attribute("http.method", "POST")
        ids["http_root"] = format(http.get_span_context().trace_id, "032x")
        chain(
            tracer,
            "How long is river 2?",
            "River 2 is 200 km long.",
            lambda: (retriever(tracer, "r2", ["d2"], [0.9]), llm(tracer, "River 2 is 200 km.")),
        )
    root = tracer.start_span("RAG")
    root.set_attribute(KIND, "CHAIN")
    root.set_attribute(SpanAttributes.INPUT_VALUE, "How long is river 3?")
    root.set_attribute(SpanAttributes.OUTPUT_VALUE, "River 3 is 300 km long.")
    child = tracer.start_span("retrieve", context=set_span_in_context(root))
    child.set_attribute(KIND, "RETRIEVER")
    child.set_attributes(documents(SpanAttributes.RETRIEVAL_DOCUMENTS, ["d3"], [0.9]))
    root.end()
    child.end()  # async work that outlives the request
    ids["child_after_root"] = format(root.get_span_context().trace_id, "032x")

    def nested() -> None:
        llm(tracer, "river 4 length")  # a query rewrite
        with tracer.start_as_current_span("retrieve_and_rerank") as sub:
            sub.set_attribute(KIND, "CHAIN")
            sub.set_attribute(SpanAttributes.INPUT_VALUE, "river 4 length")
            sub.set_attribute(SpanAttributes.OUTPUT_VALUE, "documents")
            retriever(tracer, "river 4", ["d2", "d3", "d4"], [0.8, 0.7, 0.6])
            reranker(tracer, ["d2", "d3", "d4"], ["d4", "d2"])
        llm(tracer, "River 4 is 400 km long.")

    ids["nested"] = chain(tracer, "How long is river 4?", "River 4 is 400 km long.", nested)

    def two_rounds() -> None:
        retriever(tracer, "a", ["d1", "d2"], [0.9, 0.8])
        reranker(tracer, ["d1", "d2"], ["d2"])
        retriever(tracer, "b", ["d5", "d6"], [0.9, 0.8])
        llm(tracer, "River 6 is longer.")

    ids["two_rounds"] = chain(tracer, "Rivers 2, 5 and 6?", "River 6 is longer.", two_rounds)
    return ids
