"""Chat turns as traces made by the real OpenTelemetry SDK (its in-memory exporter), one
trace per turn with a session id, written as the collector's OTLP/JSON lines: for the tests
of sessions from traces."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from tests.helpers.rag_spans import KIND, documents
from tests.helpers.traces import collector_json

SECOND = 10**9
START = 1_796_000_000 * SECOND  # 2026-11-30T00:53:20Z


class Traces:
    """Spans made by the real SDK, kept by its in-memory exporter."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("chat-app")
        self.roots: dict[str, str] = {}  # trace id -> its root span's id, both in hex

    def turn(
        self,
        at: int,
        question: str,
        answer: str | None,
        session: Any = None,
        query: str | None = None,
        docs: tuple[str, ...] = ("d1",),
        session_key: str = "session.id",
        retrieves: bool = True,
    ) -> str:
        """One chat turn at START + `at` seconds: a CHAIN root (the question, the answer,
        the session id) with a RETRIEVER child (its query, its documents; none when not
        `retrieves`); its trace id (`roots` maps it to the root span's id)."""
        t = START + at * SECOND
        root = self.tracer.start_span("chat", start_time=t)
        root.set_attribute(KIND, "CHAIN")
        root.set_attribute("input.value", question)
        if session is not None:
            root.set_attribute(session_key, session)
        if retrieves:
            child = self.tracer.start_span(
                "retrieve", context=set_span_in_context(root), start_time=t + 1000
            )
            child.set_attribute(KIND, "RETRIEVER")
            child.set_attribute("input.value", query if query is not None else question)
            child.set_attributes(documents("retrieval.documents", list(docs), [0.5] * len(docs)))
            child.end(end_time=t + 2000)
        if answer is not None:  # None: the app failed, the root has no output
            root.set_attribute("output.value", answer)
        root.end(end_time=t + 3000)
        trace_id = format(root.get_span_context().trace_id, "032x")
        self.roots[trace_id] = format(root.get_span_context().span_id, "016x")
        return trace_id

    def bodies(self, per_request: int = 1000) -> list[bytes]:
        """The spans as OTLP protobuf requests of `per_request` spans, in the order ended."""
        spans = list(self.exporter.get_finished_spans())
        return [
            encode_spans(spans[i : i + per_request]).SerializeToString()
            for i in range(0, len(spans), per_request)
        ]

    def write(self, path: Path, per_request: int = 1000, shuffle: int | None = None) -> Path:
        """The spans as OTLP/JSON lines (the collector's file exporter), one request of
        `per_request` spans a line; `shuffle`: the lines in a random order of that seed."""
        lines = [json.dumps(collector_json(body)) + "\n" for body in self.bodies(per_request)]
        if shuffle is not None:
            random.Random(shuffle).shuffle(lines)
        path.write_text("".join(lines), encoding="utf-8")
        return path
