"""The LangChain and LlamaIndex adapters as conversational apps, with the real libraries and
their own fake models: each user message of a conversation is asked with the conversation
before it, in the framework's own idiom (a chain's `chat_history` input of messages, a chat
engine's `achat(message, chat_history=...)`)."""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path
from typing import Any

from langchain_classic.chains import create_history_aware_retriever, create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document as LlamaDocument
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM

from judge import experiment
from judge.experiments.adapters import adapt
from judge.experiments.app import as_app

RIVERS = ["Alder", "Birch", "Cedar"]
PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from the context.\n\n{context}"),
        MessagesPlaceholder("chat_history"),
        ("human", "{input}"),
    ]
)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def chat(cid: str, *questions: str, relevance: dict[str, int] | None = None) -> dict[str, Any]:
    turns: list[dict[str, Any]] = []
    for question in questions:
        turns.append({"role": "user", "content": question})
        turns.append({"role": "assistant", "relevance": relevance or {"c0": 1}})
    return {"id": cid, "turns": turns}


def store() -> InMemoryVectorStore:
    vectors = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    vectors.add_documents(
        [
            Document(
                page_content=f"The river {name} is {i + 1}00 km long.", metadata={"id": f"c{i}"}
            )
            for i, name in enumerate(RIVERS)
        ]
    )
    return vectors


def spied(seen: list[list[Any]], answers: list[str]) -> Any:
    """LangChain's fake chat model, the prompts it is given kept in `seen`."""

    def keep(prompt: Any) -> Any:
        seen.append(prompt.to_messages())
        return prompt

    return RunnableLambda(keep) | FakeListChatModel(responses=answers)


def shown(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.type, m.content) for m in messages]


def test_a_history_aware_retrieval_chain_is_asked_with_the_conversation_so_far(tmp_path):
    seen: list[list[Any]] = []
    condense = FakeListChatModel(responses=["How long is the Birch?"])
    retriever = create_history_aware_retriever(
        condense,
        store().as_retriever(search_kwargs={"k": 2}),
        ChatPromptTemplate.from_messages(
            [MessagesPlaceholder("chat_history"), ("human", "{input}")]
        ),
    )
    chain = create_retrieval_chain(
        retriever, create_stuff_documents_chain(spied(seen, ["First.", "Second."]), PROMPT)
    )
    data = [chat("c1", "How long is the Alder?", "And the Birch?")]
    result = experiment(chain, data, out=tmp_path / "out", metrics=["mrr"], progress=False)
    assert result.config.app["input"] == "question+history"
    assert [shown(prompt)[1:] for prompt in seen] == [
        [("human", "How long is the Alder?")],
        [("human", "How long is the Alder?"), ("ai", "First."), ("human", "And the Birch?")],
    ]
    turns = read_jsonl(tmp_path / "out" / "app_outputs.jsonl")[0]["turns"]
    assert [turns[1]["content"], turns[3]["content"]] == ["First.", "Second."]
    assert len(turns[3]["retrieved_ids"]) == 2  # the chain's documents, ids from metadata
    assert [row.id for row in result.rows] == ["c1#2", "c1#4"]


def test_a_chain_whose_prompt_takes_the_history_is_conversational_though_its_schema_says_not():
    seen: list[list[Any]] = []
    retriever = store().as_retriever(search_kwargs={"k": 1})
    chain = create_retrieval_chain(
        retriever, create_stuff_documents_chain(spied(seen, ["Yes."]), PROMPT)
    )
    assert "chat_history" not in chain.get_input_jsonschema()["properties"]
    app = adapt(chain)
    assert app is not None and list(inspect.signature(app).parameters) == ["question", "history"]
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    reply = asyncio.run(app("Is the Elm long?", history))
    assert reply["answer"] == "Yes."
    assert shown(seen[0])[1:] == [("human", "Hi"), ("ai", "Hello"), ("human", "Is the Elm long?")]


def test_a_chain_without_history_is_asked_each_question_alone():
    chain = create_retrieval_chain(
        store().as_retriever(),
        create_stuff_documents_chain(
            FakeListChatModel(responses=["x"]),
            ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{input}")]),
        ),
    )
    assert as_app(chain).chat is None


def transcript(turns: list[dict[str, Any]], upto: int) -> str:
    """The conversation before turn `upto` (0-based), as LlamaIndex's MockLLM echoes a
    chat: each message as "role: content" on its line, the new answer's "assistant: "."""
    lines = [f"{m['role']}: {m['content']}" for m in turns[:upto]]
    return "\n".join(lines) + "\nassistant: "


def test_a_llamaindex_chat_engine_is_asked_with_each_conversations_own_history(tmp_path):
    index = VectorStoreIndex.from_documents(
        [LlamaDocument(text=f"The river {name} is long.", id_=f"doc-{name}") for name in RIVERS],
        embed_model=MockEmbedding(embed_dim=8),
    )
    # MockLLM without max_tokens answers with the prompt it was given: the chat engine's
    # system message with the contexts, then the conversation.
    engine = index.as_chat_engine(chat_mode="context", llm=MockLLM(), similarity_top_k=2)
    data = [
        chat("a", "How long is the Alder?", "And the Birch?", "And the Cedar?"),
        chat("b", "Which river is longest?", "Why?"),
    ]
    result = experiment(
        engine, data, out=tmp_path / "out", metrics=["mrr"], app_concurrency=2, progress=False
    )
    assert result.config.app["input"] == "question+history"
    assert result.config.app["errors"] == {}
    for line in read_jsonl(tmp_path / "out" / "app_outputs.jsonl"):
        turns = line["turns"]
        for position in range(1, len(turns), 2):
            answer = turns[position]["content"]
            # Its own conversation, whole and in order, and nothing of the other one.
            assert answer.endswith(transcript(turns, position)), (line["id"], position)
            assert len(turns[position]["contexts"]) == 2
    assert len(result.rows) == 5
