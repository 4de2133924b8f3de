"""The LangChain adapter with the real library and LangChain's own fake models: a chain of
`create_retrieval_chain`, LCEL chains, a chat model; what it returns equals what the
chain's retriever finds for the same question."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from langchain_classic.chains import create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough, chain

from judge.experiments.adapters import AdapterError, adapt
from judge.experiments.adapters.langchain import langchain_app, reply_of
from judge.experiments.app import as_app, load_target, parse_reply

TEXTS = [
    f"Fact number {i}: the river {name} is {i * 100} km long."
    for i, name in enumerate(["Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir"])
]
QUESTION = TEXTS[3]  # the fake embedding of a text is its own: chunk c3 ranks first

PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer from the context.\n\n{context}"), ("human", "{input}")]
)


def ask(app: Any, question: str = QUESTION) -> dict[str, Any]:
    return asyncio.run(app(question))


@pytest.fixture
def store():
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(
        [Document(page_content=text, metadata={"id": f"c{i}"}) for i, text in enumerate(TEXTS)],
        ids=[f"store-{i}" for i in range(len(TEXTS))],
    )
    return store


def retrieval_chain(retriever: Any, answers: list[str]) -> Any:
    model = FakeListChatModel(responses=answers)
    return create_retrieval_chain(retriever, create_stuff_documents_chain(model, PROMPT))


def test_a_retrieval_chain_gives_its_answer_and_the_retrievers_documents_in_order(store):
    retriever = store.as_retriever(search_kwargs={"k": 3})
    app = adapt(retrieval_chain(retriever, ["The Dogwood is 300 km long."]))
    assert app is not None and inspect.iscoroutinefunction(app)

    reply = ask(app)

    found = retriever.invoke(QUESTION)
    assert reply["answer"] == "The Dogwood is 300 km long."
    assert reply["contexts"] == [doc.page_content for doc in found]
    assert reply["retrieved_ids"] == [doc.metadata["id"] for doc in found]
    assert reply["retrieved_ids"][0] == "c3"
    assert "retrieved_scores" not in reply  # a plain retriever puts no score in documents


def test_ids_fall_back_to_the_stores_document_ids_and_scores_come_from_metadata(store):
    # The retriever of LangChain's how-to "add scores to retriever results"; not being a
    # BaseRetriever, create_retrieval_chain gives it the chain's input mapping.
    @chain
    def scored(inputs: dict[str, str]) -> list[Document]:
        found = store.similarity_search_with_score(inputs["input"], k=4)
        for document, score in found:
            document.metadata["score"] = score
        return [document for document, _ in found]

    app = langchain_app(retrieval_chain(scored, ["Answer."]), id_key="chunk")
    reply = ask(app)

    expected = store.similarity_search_with_score(QUESTION, k=4)
    assert reply["retrieved_ids"] == [doc.id for doc, _ in expected]
    assert reply["retrieved_ids"][0] == "store-3"
    assert reply["retrieved_scores"] == pytest.approx([score for _, score in expected])
    assert reply["contexts"] == [doc.page_content for doc, _ in expected]


def test_an_lcel_chain_that_takes_the_question_as_a_string(store):
    # The RAG chain of LangChain's tutorials: the question is the chain's input itself.
    retriever = store.as_retriever(search_kwargs={"k": 2})
    prompt = ChatPromptTemplate.from_messages([("human", "{context}\n\nQuestion: {question}")])
    rag = (
        {
            "context": retriever | (lambda docs: "\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | FakeListChatModel(responses=["300 km."])
        | StrOutputParser()
    )
    reply = ask(adapt(rag))
    assert reply == {"answer": "300 km.", "contexts": []}


def test_an_lcel_chain_returning_answer_and_context_under_its_own_input_key(store):
    retriever = store.as_retriever(search_kwargs={"k": 2})
    prompt = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])
    model = FakeListChatModel(responses=["Dogwood: 300 km."])
    rag = RunnablePassthrough.assign(
        context=RunnableLambda(lambda x: x["question"]) | retriever
    ).assign(answer=prompt | model | StrOutputParser())

    reply = ask(adapt(rag))  # the input schema names one key, "question"

    found = retriever.invoke(QUESTION)
    assert reply["answer"] == "Dogwood: 300 km."
    assert reply["contexts"] == [doc.page_content for doc in found]
    assert reply["retrieved_ids"] == [doc.metadata["id"] for doc in found]


def test_a_chat_model_alone_gives_its_messages_text():
    reply = ask(adapt(FakeListChatModel(responses=["Hello."])), "Hi?")
    assert reply == {"answer": "Hello.", "contexts": []}


def test_a_runnable_with_several_input_keys_needs_input_key():
    prompt = ChatPromptTemplate.from_messages([("human", "{topic}: {question}")])
    runnable = prompt | FakeListChatModel(responses=["About rivers."])
    with pytest.raises(AdapterError, match=r"'question'.*input_key="):
        adapt(runnable)
    filled = RunnablePassthrough.assign(topic=lambda _: "rivers") | runnable
    reply = ask(langchain_app(filled, input_key="question"), "How long?")
    assert reply == {"answer": "About rivers.", "contexts": []}


def test_message_content_blocks_and_unreadable_outputs():
    blocks = AIMessage(content=[{"type": "text", "text": "A "}, "B", {"type": "image"}])
    assert reply_of(blocks) == {"answer": "A B", "contexts": []}
    assert reply_of({"result": "R", "source_documents": ["x"]}) == {
        "answer": "R",
        "contexts": ["x"],
    }
    with pytest.raises(AdapterError, match=r"keys 'input', 'text'.*'answer'"):
        reply_of({"input": "q", "text": "t"})
    with pytest.raises(AdapterError, match="returned a int"):
        reply_of(3)
    with pytest.raises(AdapterError, match=r"context\[0\] is a int"):
        reply_of({"answer": "a", "context": [1]})


def test_as_app_takes_a_chain_and_its_reply_meets_the_contract(store):
    retriever = store.as_retriever(search_kwargs={"k": 3})
    app = as_app(retrieval_chain(retriever, ["Answer."]))
    assert app.is_async
    reply = parse_reply(asyncio.run(app.call(QUESTION)))
    assert reply.answer == "Answer."
    assert reply.retrieved_ids == [doc.metadata["id"] for doc in retriever.invoke(QUESTION)]


def test_adapt_leaves_other_objects_and_langchain_non_runnables_alone():
    def plain(question: str) -> dict[str, Any]:
        return {"answer": question, "contexts": []}

    assert adapt(plain) is None
    assert adapt(object()) is None
    assert adapt(Document(page_content="not a runnable")) is None
    with pytest.raises(AdapterError, match="not a LangChain Runnable"):
        langchain_app(plain)


def test_a_chain_named_as_a_file_target_goes_through_the_adapter(tmp_path):
    # `judge experiment DATA --app rag.py:chain`: the module-level object is adapted.
    (tmp_path / "rag.py").write_text(
        "from langchain_core.language_models.fake_chat_models import FakeListChatModel\n"
        "from langchain_core.output_parsers import StrOutputParser\n"
        "from langchain_core.prompts import ChatPromptTemplate\n"
        "prompt = ChatPromptTemplate.from_messages([('human', '{input}')])\n"
        "chain = prompt | FakeListChatModel(responses=['From the file.']) | StrOutputParser()\n",
        encoding="utf-8",
    )
    target = f"{tmp_path / 'rag.py'}:chain"
    app = as_app(load_target(target), target)
    assert app.is_async and app.target == target
    assert parse_reply(asyncio.run(app.call("Q?"))).answer == "From the file."
