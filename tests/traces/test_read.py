"""The trace readers on traces made by the real OpenTelemetry SDK (OpenInference attributes
written by the test with the conventions package's names) and by OpenInference's LangChain
instrumentation, exported by the real OTLP/HTTP exporter to a loopback receiver and
written in the collector's file formats: each format gives the same rows."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from judge.errors import InputFormatError
from judge.traces import openinference as oi
from judge.traces.extract import ExtractSummary, read_rows
from judge.traces.langfuse import is_langfuse
from judge.traces.otlp import encoding_of, read_requests
from judge.traces.phoenix import is_phoenix
from judge.traces.rows import Skip
from tests.helpers.rag_spans import DOCS, scenarios
from tests.helpers.traces import (
    export,
    gzipped,
    langfuse_observations,
    phoenix_frame,
    write_json_lines,
    write_prefixed,
)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The scenarios' traces, exported in batches of 4 spans (a trace spread over
    several requests), as every file format."""
    ids: dict[str, str] = {}
    bodies = export(lambda provider: ids.update(scenarios(provider)), batch=4)
    folder = tmp_path_factory.mktemp("traces")
    single = folder / "request.bin"
    all_in_one = export(lambda provider: scenarios(provider))  # one request: a whole file
    single.write_bytes(all_in_one[0])
    files = {
        "json": write_json_lines(bodies, folder / "traces.jsonl"),
        "json_base64_ids": write_json_lines(bodies, folder / "b64.jsonl", hex_ids=False),
        "proto": write_prefixed(bodies, folder / "traces.pb"),
    }
    files["json_gzip"] = gzipped(files["json"], folder / "traces.jsonl.gz")
    files["proto_gzip"] = gzipped(files["proto"], folder / "traces.pb.gz")
    return {"ids": ids, "files": files, "bodies": bodies, "single": single}


def rows_of(path: Path, **options) -> tuple[dict[str, dict], list[Skip], ExtractSummary]:
    skipped: list[Skip] = []
    summary = ExtractSummary()
    rows = {r["id"]: r for r in read_rows(path, on_skip=skipped.append, summary=summary, **options)}
    return rows, skipped, summary


def test_the_export_spread_traces_over_several_requests(made):
    assert len(made["bodies"]) > 3  # 17 spans in batches of 4


@pytest.mark.parametrize("kind", ["json", "json_base64_ids", "proto", "json_gzip", "proto_gzip"])
def test_each_file_format_gives_the_same_rows(made, kind):
    reference, _, _ = rows_of(made["files"]["json"])
    rows, skipped, summary = rows_of(made["files"][kind])
    assert rows == reference
    assert summary.traces == 6 and summary.spans == 17 and summary.rows == 3
    assert sorted(s.reason for s in skipped) == ["no_input", "no_output", "no_retriever"]


def test_encodings_are_told_by_content_not_by_name(made, tmp_path):
    files = made["files"]
    assert encoding_of(files["json"]) == "json"
    assert encoding_of(files["json_gzip"]) == "json"
    assert encoding_of(files["proto"]) == "length-prefixed"
    assert encoding_of(made["single"]) == "protobuf"
    renamed = tmp_path / "traces.data"
    renamed.write_bytes(gzip.compress(files["proto"].read_bytes()))
    assert encoding_of(renamed) == "length-prefixed"
    not_traces = tmp_path / "rows.jsonl"
    not_traces.write_text('{"question": "q"}\n')
    assert encoding_of(not_traces) is None
    with pytest.raises(InputFormatError, match="not an OTLP trace file"):
        list(read_requests(not_traces))
    # Blank lines of Unicode spaces are blank, as the rows readers take them, even with a
    # character cut at the end of the bytes sniffed (4,096): not a protobuf request.
    blank = tmp_path / "blank.jsonl"
    for text in ("\n \r\n\u3000\n", "\n\n" + "\u3000" * 2000):
        blank.write_text(text, encoding="utf-8")
        assert encoding_of(blank) is None


def test_one_protobuf_request_per_file_as_the_http_exporter_sends_it(made):
    rows, skipped, _ = rows_of(made["single"])
    reference, _, _ = rows_of(made["files"]["json"])

    def content(row: dict) -> tuple:  # another export: other ids and times
        return row["question"], row["answer"], row["retrieved_ids"], row["contexts"]

    assert sorted(map(content, rows.values())) == sorted(map(content, reference.values()))
    assert len(skipped) == 3


def test_a_plain_trace_gives_the_chains_question_and_answer_and_the_retrievers_documents(made):
    rows, _, _ = rows_of(made["files"]["json"])
    row = rows[made["ids"]["plain"]]
    assert row["question"] == "How long is river 1?"  # from the JSON input value
    assert row["answer"] == "River 1 is 100 km long."
    assert row["retrieved_ids"] == ["d1", "d2", "d3"]
    assert row["retrieved_scores"] == [0.9, 0.5, 0.4]
    assert row["contexts"] == [DOCS["d1"], DOCS["d2"], DOCS["d3"]]
    assert row["trace_id"] == row["id"] == made["ids"]["plain"]
    assert len(row["span_id"]) == 16 and len(row["retrievals"]) == 1
    assert row["retrievals"][0]["span_id"] != row["span_id"]
    assert row["models"] == ["gpt-4o-mini"]
    assert row["token_counts"] == {"prompt": 50, "completion": 10, "total": 60}
    assert row["session_id"] == "s1"
    assert row["start_time"].endswith("Z") and row["latency_s"] >= 0


def test_the_root_span_is_the_one_the_row_links_to(made):
    ids = made["ids"]
    spans = [s for batch in read_requests(made["files"]["json"]) for s in batch]
    roots = {s.trace_id: s.span_id for s in spans if s.parent_id is None}
    rows, _, _ = rows_of(made["files"]["json"])
    for name in ("plain", "reranked", "two_retrievers"):
        assert rows[ids[name]]["span_id"] == roots[ids[name]]


def test_a_reranker_gives_the_contexts_and_the_retriever_list_is_kept(made):
    rows, _, _ = rows_of(made["files"]["json"])
    row = rows[made["ids"]["reranked"]]
    assert row["retrieved_ids"] == ["d4", "d2"]  # what the generator saw
    assert row["contexts"] == [DOCS["d4"], DOCS["d2"]]
    assert row["retrieved_scores"] == [0.9, 0.8]
    kinds = [(r["kind"], r["ids"]) for r in row["retrievals"]]
    assert kinds == [("RETRIEVER", ["d2", "d3", "d4", "d5"]), ("RERANKER", ["d4", "d2"])]
    assert row["models"] == ["gpt-4o"] and row["session_id"] == "s2"


def test_two_retriever_calls_are_both_kept_in_order(made):
    rows, _, _ = rows_of(made["files"]["json"])
    row = rows[made["ids"]["two_retrievers"]]
    assert [r["ids"] for r in row["retrievals"]] == [["d5", "d0"], ["d6", "d0"]]
    assert row["retrieved_ids"] == ["d5", "d0", "d6"]  # d0 once, at its first place
    assert row["contexts"] == [DOCS["d5"], DOCS["d0"], DOCS["d6"]]


def test_traces_that_give_no_row_are_skipped_with_their_reasons(made):
    _, skipped, summary = rows_of(made["files"]["json"])
    by_trace = {s.trace_id: s for s in skipped}
    ids = made["ids"]
    assert by_trace[ids["no_retriever"]].reason == "no_retriever"
    assert by_trace[ids["no_output"]].reason == "no_output"
    assert by_trace[ids["custom"]].reason == "no_input"  # no input.value without --map
    assert all(len(s.message) > 40 for s in skipped)  # a sentence, not only the code
    assert summary.skipped == {"no_retriever": 1, "no_output": 1, "no_input": 1}
    assert "3 traces skipped (1 no_input, 1 no_output, 1 no_retriever)" in summary.lines()


def test_custom_instrumentation_is_read_through_a_mapping(made):
    mapping = {
        "question": "app.query",
        "answer": "app.answer",
        "retrieved_ids": "app.doc_ids",
        "contexts": "app.doc_texts",
    }
    rows, skipped, _ = rows_of(made["files"]["json"], mapping=mapping)
    row = rows[made["ids"]["custom"]]
    assert row["question"] == "Which river is 300 km?" and row["answer"] == "River 3."
    assert row["retrieved_ids"] == ["d3", "d1"]
    assert row["contexts"] == [DOCS["d3"], DOCS["d1"]]
    assert row["retrieved_scores"] is None  # not mapped
    assert row["retrievals"][0]["ids"] == ["d3", "d1"]
    assert len(rows) == 1  # the OpenInference traces have no app.query
    assert {s.reason for s in skipped} == {"no_input"}


def test_the_attribute_names_are_the_conventions_packages():
    from openinference.semconv.trace import (
        DocumentAttributes,
        RerankerAttributes,
        SpanAttributes,
    )

    assert oi.SPAN_KIND == SpanAttributes.OPENINFERENCE_SPAN_KIND
    assert oi.INPUT_VALUE == SpanAttributes.INPUT_VALUE
    assert oi.OUTPUT_VALUE == SpanAttributes.OUTPUT_VALUE
    assert oi.INPUT_MIME_TYPE == SpanAttributes.INPUT_MIME_TYPE
    assert oi.RETRIEVAL_DOCUMENTS == SpanAttributes.RETRIEVAL_DOCUMENTS
    assert oi.RERANKER_INPUT_DOCUMENTS == RerankerAttributes.RERANKER_INPUT_DOCUMENTS
    assert oi.RERANKER_OUTPUT_DOCUMENTS == RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS
    assert oi.DOCUMENT_ID == DocumentAttributes.DOCUMENT_ID
    assert oi.DOCUMENT_CONTENT == DocumentAttributes.DOCUMENT_CONTENT
    assert oi.DOCUMENT_SCORE == DocumentAttributes.DOCUMENT_SCORE
    assert oi.DOCUMENT_METADATA == DocumentAttributes.DOCUMENT_METADATA
    assert oi.LLM_MODEL_NAME == SpanAttributes.LLM_MODEL_NAME
    assert oi.TOKEN_PROMPT == SpanAttributes.LLM_TOKEN_COUNT_PROMPT
    assert oi.TOKEN_COMPLETION == SpanAttributes.LLM_TOKEN_COUNT_COMPLETION
    assert oi.TOKEN_TOTAL == SpanAttributes.LLM_TOKEN_COUNT_TOTAL
    assert oi.SESSION_ID == SpanAttributes.SESSION_ID


def test_genai_convention_spans_give_a_row(tmp_path):
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g

    def produce(provider):
        tracer = provider.get_tracer("genai")
        with tracer.start_as_current_span("invoke_agent") as root:
            root.set_attribute(g.GEN_AI_OPERATION_NAME, "invoke_agent")
            root.set_attribute(g.GEN_AI_CONVERSATION_ID, "conv-9")
            root.set_attribute(
                g.GEN_AI_INPUT_MESSAGES,
                json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Why?"}]}]),
            )
            with tracer.start_as_current_span("retrieval") as span:
                span.set_attribute(g.GEN_AI_OPERATION_NAME, "retrieval")
                span.set_attribute(
                    g.GEN_AI_RETRIEVAL_DOCUMENTS,
                    json.dumps([{"id": "doc_1", "score": 0.9}, {"id": "doc_2", "score": 0.5}]),
                )
            with tracer.start_as_current_span("chat") as span:
                span.set_attribute(g.GEN_AI_OPERATION_NAME, "chat")
                span.set_attribute(g.GEN_AI_RESPONSE_MODEL, "gpt-4o-2024")
                span.set_attribute(g.GEN_AI_USAGE_INPUT_TOKENS, 30)
                span.set_attribute(g.GEN_AI_USAGE_OUTPUT_TOKENS, 5)
            root.set_attribute(
                g.GEN_AI_OUTPUT_MESSAGES,
                json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "Because."}]}]
                ),
            )

    path = write_json_lines(export(produce), tmp_path / "genai.jsonl")
    (row,) = list(read_rows(path))
    assert (row["question"], row["answer"]) == ("Why?", "Because.")
    assert row["retrieved_ids"] == ["doc_1", "doc_2"]
    assert row["retrieved_scores"] == [0.9, 0.5]
    assert row["models"] == ["gpt-4o-2024"]
    assert row["token_counts"] == {"prompt": 30, "completion": 5, "total": 35}
    assert row["session_id"] == "conv-9"


def test_an_instrumented_langchain_chain_gives_its_question_answer_and_documents(tmp_path):
    from langchain_classic.chains import create_retrieval_chain
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.vectorstores import InMemoryVectorStore
    from openinference.instrumentation.langchain import LangChainInstrumentor

    texts = [f"Fact {i}: the river {n} is {i * 100} km long." for i, n in enumerate("ABCDEF")]
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context.\n\n{context}"), ("human", "{input}")]
    )
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(
        [Document(page_content=t, metadata={"id": f"c{i}"}) for i, t in enumerate(texts)],
        ids=[f"store-{i}" for i in range(len(texts))],
    )
    retriever = store.as_retriever(search_kwargs={"k": 3})
    answers = ["It is 300 km long.", "It is 100 km long."]
    chain = create_retrieval_chain(
        retriever, create_stuff_documents_chain(FakeListChatModel(responses=answers), prompt)
    )

    def produce(provider):
        instrumentor = LangChainInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            chain.invoke({"input": texts[3]})
            chain.invoke({"input": texts[1]})
        finally:
            instrumentor.uninstrument()

    path = write_json_lines(export(produce), tmp_path / "langchain.jsonl")
    rows = list(read_rows(path, on_skip=pytest.fail))
    assert len(rows) == 2
    by_question = {r["question"]: r for r in rows}
    for question, answer in zip((texts[3], texts[1]), answers, strict=True):
        row = by_question[question]
        found = retriever.invoke(question)
        assert row["answer"] == answer
        assert row["contexts"] == [d.page_content for d in found]
        assert row["retrieved_ids"] == [d.metadata["id"] for d in found]  # from metadata
        assert row["retrievals"][0]["kind"] == "RETRIEVER"
    assert by_question[texts[3]]["retrieved_ids"][0] == "c3"


def test_phoenix_span_export_as_parquet_gives_the_same_rows(made, tmp_path):
    path = tmp_path / "spans.parquet"
    phoenix_frame(made["bodies"]).to_parquet(path)
    assert is_phoenix(path) and not is_phoenix(made["files"]["json"])
    rows, skipped, summary = rows_of(path)
    reference, _, _ = rows_of(made["files"]["json"])
    assert rows == reference
    assert summary.spans == 17 and sorted(s.reason for s in skipped) == [
        "no_input",
        "no_output",
        "no_retriever",
    ]
    assert rows == rows_of(path, source="phoenix")[0]


def test_a_rows_parquet_file_is_not_a_phoenix_export(tmp_path):
    import pandas

    path = tmp_path / "rows.parquet"
    pandas.DataFrame({"question": ["q"], "answer": ["a"]}).to_parquet(path)
    assert not is_phoenix(path)
    with pytest.raises(InputFormatError, match=r"no column context\.span_id, context\.trace_id"):
        list(read_rows(path, source="phoenix"))


def test_langfuse_observations_give_the_rows_of_the_same_spans(made, tmp_path):
    observations = langfuse_observations(made["bodies"])
    lines = tmp_path / "observations.jsonl"
    lines.write_text("".join(json.dumps(o) + "\n" for o in observations))
    page = tmp_path / "page.json"
    page.write_text(json.dumps({"data": observations, "meta": {}}, indent=2))
    reference, _, _ = rows_of(made["files"]["json"])
    ids = made["ids"]
    for path in (lines, page):
        assert is_langfuse(path) and not is_langfuse(made["files"]["json"])
        rows, skipped, _ = rows_of(path)
        for name in ("plain", "two_retrievers"):
            row, expected = dict(rows[ids[name]]), dict(reference[ids[name]])
            # Langfuse keeps times to the microsecond: the latency may differ by one.
            assert row.pop("latency_s") == pytest.approx(expected.pop("latency_s"), abs=2e-6)
            assert row == expected
        # Langfuse has no reranker type: the reranker is a plain span there.
        assert rows[ids["reranked"]]["retrieved_ids"] == ["d2", "d3", "d4", "d5"]
        assert {s.trace_id: s.reason for s in skipped} == {
            ids["no_retriever"]: "no_retriever",
            ids["no_output"]: "no_output",
            ids["custom"]: "no_input",
        }


def test_a_langfuse_trace_with_its_observations_is_its_own_root(tmp_path):
    trace = {
        "id": "trace-1",
        "timestamp": "2026-12-01T10:00:00.000Z",
        "name": "rag",
        "input": {"question": "How long is river 2?"},
        "output": "200 km.",
        "sessionId": "s-9",
        "latency": 1.5,
        "observations": [
            {
                "id": "obs-1",
                "type": "RETRIEVER",
                "startTime": "2026-12-01T10:00:00.100Z",
                "endTime": "2026-12-01T10:00:00.200Z",
                "output": {
                    "documents": [{"page_content": "River 2 is 200 km.", "metadata": {"id": "d2"}}]
                },
            },
            {
                "id": "obs-2",
                "type": "GENERATION",
                "parentObservationId": None,
                "startTime": "2026-12-01T10:00:00.300Z",
                "endTime": "2026-12-01T10:00:01.400Z",
                "model": "gpt-4o",
                "usageDetails": {"input": 20, "output": 3, "total": 23},
            },
        ],
    }
    path = tmp_path / "traces.json"
    path.write_text(json.dumps([trace]))
    (row,) = list(read_rows(path, source="langfuse"))
    assert row["id"] == row["span_id"] == "trace-1"
    assert (row["question"], row["answer"]) == ("How long is river 2?", "200 km.")
    assert row["retrieved_ids"] == ["d2"] and row["contexts"] == ["River 2 is 200 km."]
    assert row["models"] == ["gpt-4o"] and row["token_counts"]["total"] == 23
    assert row["session_id"] == "s-9" and row["latency_s"] == 1.5
    assert row["start_time"] == "2026-12-01T10:00:00.000000Z"


def test_chat_messages_as_input_and_output_give_the_question_and_the_answer(tmp_path):
    def produce(provider):
        tracer = provider.get_tracer("agent")
        with tracer.start_as_current_span("agent") as root:
            root.set_attribute(oi.SPAN_KIND, "AGENT")
            messages = [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Q?"},
            ]
            root.set_attribute(oi.INPUT_VALUE, json.dumps({"messages": messages}))
            root.set_attribute(oi.INPUT_MIME_TYPE, "application/json")
            with tracer.start_as_current_span("retrieve") as span:
                span.set_attribute(oi.SPAN_KIND, "RETRIEVER")
                span.set_attribute("retrieval.documents.0.document.id", "d1")
            reply = [*messages, {"role": "assistant", "content": "A."}]
            root.set_attribute(oi.OUTPUT_VALUE, json.dumps(reply))

    (row,) = list(read_rows(write_json_lines(export(produce), tmp_path / "agent.jsonl")))
    assert (row["question"], row["answer"]) == ("Q?", "A.")
    assert row["retrieved_ids"] == ["d1"] and row["contexts"] == []  # no contents recorded


def test_the_summary_says_one_trace_not_one_traces():
    summary = ExtractSummary(spans=1, traces=1, rows=1, before_since=1, judged_before=1)
    summary.skipped["no_input"] = 1
    summary.sampled_out = summary.duplicate_spans = summary.late_spans = 1
    text = " | ".join(summary.lines())
    assert text.startswith("1 trace (1 span) read: 1 row | 1 trace skipped (1 no_input)")
    for line in summary.lines():
        assert not line.startswith("1 traces") and not line.startswith("1 spans"), line


def test_encoded_protobuf_spans_decode_to_the_spans_read_at_once() -> None:
    """The receiver keeps protobuf spans encoded and decodes them when their trace is
    complete: every kind of value, the remote-parent flag and the refused ids come out as
    `spans_of_protobuf` gives them."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from judge.traces.otlp import decode_span, encoded_spans_of_protobuf, spans_of_protobuf

    values = [
        {"key": "s", "value": {"stringValue": "text ü"}},
        {"key": "empty", "value": {"stringValue": ""}},
        {"key": "none", "value": {}},
        {"key": "b", "value": {"boolValue": True}},
        {"key": "i", "value": {"intValue": "-7"}},
        {"key": "d", "value": {"doubleValue": 0.25}},
        {"key": "raw", "value": {"bytesValue": "AAE="}},
        {"key": "a", "value": {"arrayValue": {"values": [{"intValue": "1"}, {}]}}},
        {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "x", "value": {}}]}}},
    ]
    span = {
        "traceId": "AAECAwQFBgcICQoLDA0ODw==",
        "spanId": "AAECAwQFBgc=",
        "name": "child",
        "startTimeUnixNano": "5",
        "endTimeUnixNano": "9",
        "attributes": values,
    }
    spans = [
        span,
        dict(span, spanId="AQECAwQFBgc=", parentSpanId="AAECAwQFBgc=", flags=0x300, name=""),
        dict(span, spanId="AAE="),  # 2 bytes: refused
    ]
    body = json_format.ParseDict(
        {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}, ExportTraceServiceRequest()
    ).SerializeToString()
    read_rejected: list[str] = []
    read = spans_of_protobuf(body, read_rejected)
    encoded_rejected: list[str] = []
    encoded = encoded_spans_of_protobuf(body, encoded_rejected)
    assert encoded_rejected == read_rejected and len(read_rejected) == 1
    fields = ["trace_id", "span_id", "parent_id", "name", "start_ns", "end_ns", "attributes"]
    decoded = [decode_span(e.data) for e in encoded]
    assert [[getattr(s, f) for f in [*fields, "parent_remote"]] for s in decoded] == [
        [getattr(s, f) for f in [*fields, "parent_remote"]] for s in read
    ]
    assert [(e.trace_id, e.span_id, e.parent_id, e.parent_remote) for e in encoded] == [
        (s.trace_id, s.span_id, s.parent_id, s.parent_remote) for s in read
    ]
    assert read[1].parent_remote and read[0].attributes["raw"] == b"\x00\x01"
