"""Traces made by the real OpenTelemetry SDK, exported by its real OTLP/HTTP exporter to a
loopback receiver started here, then written in the OTel Collector's file formats."""

from __future__ import annotations

import base64
import gzip
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


@contextmanager
def receiver() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback OTLP/HTTP receiver: (its /v1/traces URL, the request bodies it got)."""
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            bodies.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", bodies
    finally:
        server.shutdown()
        server.server_close()


def export(produce: Callable[[Any], None], batch: int = 512) -> list[bytes]:
    """Run produce(tracer_provider) with the SDK exporting through OTLP/HTTP protobuf to a
    loopback receiver; the protobuf request bodies it sent."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    with receiver() as (url, bodies):
        provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=url), max_export_batch_size=batch)
        )
        produce(provider)
        provider.shutdown()  # flushes the batches
    assert bodies, "the exporter sent nothing"
    return list(bodies)


def collector_json(body: bytes, hex_ids: bool = True) -> dict[str, Any]:
    """An OTLP/HTTP body as the collector's file exporter writes it: OTLP/JSON, ids hex,
    enums as integers (hex_ids False: protobuf's own JSON mapping, base64 ids)."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    if hex_ids:
        for resource in data.get("resourceSpans", ()):
            for scope in resource.get("scopeSpans", ()):
                for span in scope.get("spans", ()):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
    return data


def write_json_lines(bodies: list[bytes], path: Path, hex_ids: bool = True) -> Path:
    path.write_text(
        "".join(json.dumps(collector_json(b, hex_ids)) + "\n" for b in bodies), encoding="utf-8"
    )
    return path


def write_prefixed(bodies: list[bytes], path: Path) -> Path:
    """The collector's `format: proto`: each message after its size, 4 bytes big-endian."""
    path.write_bytes(b"".join(len(b).to_bytes(4, "big") + b for b in bodies))
    return path


def gzipped(path: Path, target: Path) -> Path:
    target.write_bytes(gzip.compress(path.read_bytes()))
    return target


_LISTS = re.compile(
    r"^(retrieval\.documents|reranker\.input_documents|reranker\.output_documents"
    r"|llm\.input_messages|llm\.output_messages)\.(\d+)\.(.+)$"
)


def phoenix_frame(bodies: list[bytes]) -> Any:
    """The spans of OTLP bodies as Phoenix's spans dataframe: TraceDataset's columns
    (context.trace_id, context.span_id, parent_id, name, span_kind, start_time, end_time,
    status_code, status_message) and attributes.KEY columns, the OpenInference names kept
    whole and the indexed lists (retrieval.documents.N.document.id, ...) made lists of
    mappings, as Phoenix's attributes.unflatten makes them."""
    import pandas

    records = []
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes: dict[str, Any] = {}
                    lists: dict[str, dict[int, dict[str, Any]]] = {}
                    for kv in span.attributes:
                        value = getattr(kv.value, kv.value.WhichOneof("value"))
                        if kv.value.WhichOneof("value") == "array_value":
                            value = [
                                getattr(v, v.WhichOneof("value"))
                                for v in kv.value.array_value.values
                            ]
                        match = _LISTS.match(kv.key)
                        if match:
                            items = lists.setdefault(match[1], {})
                            items.setdefault(int(match[2]), {})[match[3]] = value
                        else:
                            attributes[kv.key] = value
                    for key, items in lists.items():
                        attributes[key] = [items[i] for i in sorted(items)]
                    records.append(
                        {
                            "name": span.name,
                            "span_kind": attributes.get("openinference.span.kind", "UNKNOWN"),
                            "parent_id": span.parent_span_id.hex() or None,
                            "start_time": pandas.Timestamp(span.start_time_unix_nano, tz="UTC"),
                            "end_time": pandas.Timestamp(span.end_time_unix_nano, tz="UTC"),
                            "status_code": "OK",
                            "status_message": "",
                            "context.span_id": span.span_id.hex(),
                            "context.trace_id": span.trace_id.hex(),
                            **{f"attributes.{k}": v for k, v in attributes.items()},
                        }
                    )
    return pandas.DataFrame.from_records(records).sort_values("start_time")


_LANGFUSE_TYPES = {"LLM": "GENERATION", "RETRIEVER": "RETRIEVER", "CHAIN": "CHAIN"}


def langfuse_observations(bodies: list[bytes]) -> list[dict[str, Any]]:
    """The spans of OTLP bodies as Langfuse's observations (its public API's
    ObservationV2), parsed and written back by the Langfuse SDK's own model: OpenInference
    LLM spans as GENERATION (model, usageDetails), RETRIEVER spans with their documents as
    output (as LangChain's Documents: id, page_content, metadata, score), others SPAN."""
    from langfuse.api.commons.types.observation_v2 import ObservationV2
    from langfuse.api.core.pydantic_utilities import parse_obj_as

    def iso(ns: int) -> str:
        return (
            datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=ns // 1000)
        ).isoformat()

    out = []
    for body in bodies:
        resources = collector_json(body)["resourceSpans"]
        for span in [s for r in resources for c in r["scopeSpans"] for s in c["spans"]]:
            attributes = {
                a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", ())
            }
            kind = attributes.get("openinference.span.kind")
            item: dict[str, Any] = {
                "id": span["spanId"],
                "traceId": span["traceId"],
                "parentObservationId": span.get("parentSpanId") or None,
                "projectId": "project-1",
                "type": _LANGFUSE_TYPES.get(kind, "SPAN"),
                "name": span["name"],
                "startTime": iso(int(span["startTimeUnixNano"])),
                "endTime": iso(int(span["endTimeUnixNano"])),
                "sessionId": attributes.get("session.id"),
            }
            if "input.value" in attributes:
                value = attributes["input.value"]
                json_input = attributes.get("input.mime_type") == "application/json"
                item["input"] = json.loads(value) if json_input else value
            if "output.value" in attributes:
                item["output"] = attributes["output.value"]
            if kind == "RETRIEVER":
                n, docs = 0, []
                while f"retrieval.documents.{n}.document.id" in attributes:
                    prefix = f"retrieval.documents.{n}.document."
                    docs.append(
                        {
                            "id": attributes[prefix + "id"],
                            "page_content": attributes[prefix + "content"],
                            "metadata": {},
                            "score": attributes[prefix + "score"],
                        }
                    )
                    n += 1
                item["output"] = docs
            if kind == "LLM":
                item["model"] = attributes["llm.model_name"]
                item["usageDetails"] = {
                    "input": int(attributes["llm.token_count.prompt"]),
                    "output": int(attributes["llm.token_count.completion"]),
                    "total": int(attributes["llm.token_count.total"]),
                }
            out.append(json.loads(parse_obj_as(ObservationV2, item).json()))
    return out


def cut_gzip(path: Path, target: Path, keep: float = 0.6) -> Path:
    """The gzip of a file cut short, as a file the collector is still writing looks."""
    whole = gzip.compress(path.read_bytes())
    target.write_bytes(whole[: max(12, int(len(whole) * keep))])
    return target


def bad_crc_gzip(path: Path, target: Path) -> Path:
    """The gzip of a file whose CRC trailer is wrong (a damaged copy)."""
    whole = bytearray(gzip.compress(path.read_bytes()))
    whole[-8] ^= 0xFF  # the CRC-32 is the 8th byte from the end onwards
    target.write_bytes(bytes(whole))
    return target


def rag_request(
    trace: int,
    question: str = "How long is river 1?",
    answer: str = "River 1 is 100 km long.",
    doc_ids: tuple[str, ...] = ("d1", "d2"),
    trace_id: str | None = None,
) -> dict[str, Any]:
    """One OTLP/JSON request of one RAG trace written by hand (a CHAIN root with a
    RETRIEVER child, OpenInference attributes), with any text or ids in it; trace is its
    number (the ids are made from it)."""

    def value(item: Any) -> dict[str, Any]:
        if isinstance(item, float):
            return {"doubleValue": item}
        return {"stringValue": item}

    def attributes(items: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"key": k, "value": value(v)} for k, v in items.items()]

    trace_hex = trace_id if trace_id is not None else f"{trace + 1:032x}"
    root, child = f"{2 * trace + 1:016x}", f"{2 * trace + 2:016x}"
    start = 1_700_000_000_000_000_000 + trace * 1_000_000_000
    documents: dict[str, Any] = {}
    for n, doc in enumerate(doc_ids):
        documents[f"retrieval.documents.{n}.document.id"] = doc
        documents[f"retrieval.documents.{n}.document.content"] = f"text of {doc}"
        documents[f"retrieval.documents.{n}.document.score"] = 1.0 - n / 10
    spans = [
        {
            "traceId": trace_hex,
            "spanId": root,
            "name": "RAG",
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 2000),
            "attributes": attributes(
                {
                    "openinference.span.kind": "CHAIN",
                    "input.value": question,
                    "output.value": answer,
                }
            ),
        },
        {
            "traceId": trace_hex,
            "spanId": child,
            "parentSpanId": root,
            "name": "retrieve",
            "startTimeUnixNano": str(start + 10),
            "endTimeUnixNano": str(start + 1000),
            "attributes": attributes(
                {"openinference.span.kind": "RETRIEVER", "input.value": question, **documents}
            ),
        },
    ]
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
