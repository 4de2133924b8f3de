"""The LlamaIndex adapter with the real library and its own MockLLM and MockEmbedding: a
query engine over a small VectorStoreIndex; what it returns equals what the index's
retriever finds for the same question. Models are passed as arguments, never through the
global `Settings`, so no test leaks state into another."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter

from judge.experiments.adapters import AdapterError, adapt
from judge.experiments.adapters.llamaindex import llamaindex_app
from judge.experiments.app import as_app, parse_reply

RIVERS = ["Alder", "Birch", "Cedar", "Dogwood", "Elm"]
QUESTION = "How long is the river Dogwood?"


def ask(app: Any, question: str = QUESTION) -> dict[str, Any]:
    return asyncio.run(app(question))


def long_text(name: str) -> str:
    return " ".join(
        f"Sentence {j} about the river {name}, its banks and its towns." for j in range(8)
    )


@pytest.fixture
def index() -> VectorStoreIndex:
    documents = [Document(text=long_text(name), id_=f"doc-{name}") for name in RIVERS]
    return VectorStoreIndex.from_documents(
        documents,
        embed_model=MockEmbedding(embed_dim=8),
        transformations=[SentenceSplitter(chunk_size=48, chunk_overlap=0)],
    )


def retrieved(index: VectorStoreIndex, k: int) -> list[Any]:
    return asyncio.run(index.as_retriever(similarity_top_k=k).aretrieve(QUESTION))


def test_a_query_engine_gives_its_answer_and_the_retrievers_nodes_in_order(index):
    engine = index.as_query_engine(llm=MockLLM(max_tokens=6), similarity_top_k=4)
    app = adapt(engine)
    assert app is not None and inspect.iscoroutinefunction(app)

    reply = ask(app)

    nodes = retrieved(index, 4)
    assert reply["answer"] == str(asyncio.run(engine.aquery(QUESTION)).response)
    assert reply["answer"] == "text text text text text text"  # MockLLM's reply
    assert reply["contexts"] == [n.node.get_content() for n in nodes]
    assert reply["retrieved_ids"] == [n.node.node_id for n in nodes]
    assert reply["retrieved_scores"] == pytest.approx([n.score for n in nodes])
    assert len(set(reply["retrieved_ids"])) == 4


def test_document_ids_give_each_source_document_once_at_its_best_rank(index):
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=10)
    reply = ask(llamaindex_app(engine, ids="document"))

    nodes = retrieved(index, 10)
    assert reply["contexts"] == [n.node.get_content() for n in nodes]  # every chunk
    expected: dict[str, float] = {}
    for n in nodes:
        expected.setdefault(n.node.ref_doc_id, n.score)
    assert len(nodes) > len(expected) > 1  # chunks of one document were retrieved together
    assert reply["retrieved_ids"] == list(expected)
    assert reply["retrieved_scores"] == pytest.approx(list(expected.values()))


def test_as_app_takes_a_query_engine_and_its_reply_meets_the_contract(index):
    app = as_app(index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=3))
    assert app.is_async
    reply = parse_reply(asyncio.run(app.call(QUESTION)))
    assert reply.retrieved_ids == [n.node.node_id for n in retrieved(index, 3)]
    assert reply.contexts and reply.answer == "text text"


def test_a_streaming_engine_and_a_bad_ids_option_are_errors_that_say_what_to_do(index):
    with pytest.raises(AdapterError, match='ids="node" or ids="document"'):
        llamaindex_app(index.as_query_engine(llm=MockLLM()), ids="chunk")  # type: ignore[arg-type]
    streaming = index.as_query_engine(llm=MockLLM(max_tokens=2), streaming=True)
    with pytest.raises(AdapterError, match="without streaming=True"):
        ask(adapt(streaming))


def test_adapt_leaves_llamaindex_objects_that_are_not_query_engines_alone(index):
    assert adapt(index) is None
    assert adapt(Document(text="a document")) is None
    with pytest.raises(AdapterError, match="not a LlamaIndex query engine"):
        llamaindex_app(index)
