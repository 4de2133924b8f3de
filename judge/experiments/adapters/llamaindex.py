"""A LlamaIndex query engine or chat engine as a judge app (the extra `judge[llamaindex]`).

A query engine is asked with `aquery`, so judge's app concurrency applies. A chat engine
(`index.as_chat_engine(...)`, any `BaseChatEngine`) is a conversational app: each user
message is asked with `achat(message, chat_history=...)`, the conversation before it as
LlamaIndex `ChatMessage`s (an empty one for the first: it replaces the engine's memory).
A chat engine keeps that memory on the object, so one engine is asked one message at a
time (`--app-concurrency` does not apply to it); its `AgentChatResponse` is read as a
query engine's `Response`. The response becomes the reply: the answer is
`str(response.response)`, the contexts are `node.get_content()` of `response.source_nodes`
in order, the retrieved ids are the nodes' `node_id` (or, with `ids="document"`, their
source documents' `ref_doc_id`, each document once, at the rank of its best node), and the
retrieved scores are the nodes' scores when every node has one.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.base.response.schema import PydanticResponse, Response
from llama_index.core.chat_engine.types import AgentChatResponse, BaseChatEngine
from llama_index.core.schema import NodeWithScore

from judge.experiments.adapters.common import AdapterError, first_occurrences

IdKind = Literal["node", "document"]


def is_query_engine(obj: Any) -> bool:
    """Whether `obj` is a LlamaIndex query engine."""
    return isinstance(obj, BaseQueryEngine)


def is_chat_engine(obj: Any) -> bool:
    """Whether `obj` is a LlamaIndex chat engine."""
    return isinstance(obj, BaseChatEngine)


def llamaindex_chat_app(
    engine: Any, *, ids: IdKind = "node"
) -> Callable[[str, list[dict[str, str]]], Awaitable[dict[str, Any]]]:
    """The judge app of a LlamaIndex chat engine: an async function (question, history) ->
    reply, asking the engine one message at a time (it keeps the conversation in its
    memory, which each call replaces with `history`).

    Args:
        engine: a chat engine (`index.as_chat_engine(...)`, any `BaseChatEngine`).
        ids: "node" or "document", as in `llamaindex_app`.
    """
    if not is_chat_engine(engine):
        raise AdapterError(
            f"a {type(engine).__name__} is not a LlamaIndex chat engine: give "
            "index.as_chat_engine(...) or another BaseChatEngine"
        )
    if ids not in ("node", "document"):
        raise AdapterError(f'ids={ids!r}: give ids="node" or ids="document"')
    # Calls run on the app's one event loop: the lock keeps a conversation's memory from
    # being replaced by another's while the engine awaits its retriever.
    lock = asyncio.Lock()

    async def call(question: str, history: list[dict[str, str]]) -> dict[str, Any]:
        messages = [ChatMessage(role=m["role"], content=m["content"]) for m in history]
        async with lock:
            response = await engine.achat(question, chat_history=messages)
        return reply_of(response, ids=ids)

    return call


def llamaindex_app(
    engine: Any, *, ids: IdKind = "node"
) -> Callable[[str], Awaitable[dict[str, Any]]]:
    """The judge app of a LlamaIndex query engine: an async function question -> reply.

    Args:
        engine: a query engine (`index.as_query_engine(...)`, any `BaseQueryEngine`),
            made without `streaming=True`.
        ids: "node" gives each source node's `node_id` as its retrieved id (the chunk);
            "document" gives its source document's `ref_doc_id`, each document once at
            the rank of its best node, for relevance labels given per document.
    """
    if not is_query_engine(engine):
        raise AdapterError(
            f"a {type(engine).__name__} is not a LlamaIndex query engine: give "
            "index.as_query_engine(...) or another BaseQueryEngine"
        )
    if ids not in ("node", "document"):
        raise AdapterError(f'ids={ids!r}: give ids="node" or ids="document"')

    async def call(question: str) -> dict[str, Any]:
        return reply_of(await engine.aquery(question), ids=ids)

    return call


def reply_of(response: Any, *, ids: IdKind = "node") -> dict[str, Any]:
    """The judge reply of a query engine's response (see the module's docstring).

    Args:
        response: what `aquery` returned (a `Response` or a `PydanticResponse`), or
            what a chat engine's `achat` returned (an `AgentChatResponse`).
        ids: "node" or "document", as in `llamaindex_app`.
    """
    if isinstance(response, AgentChatResponse):
        answer = response.response
    elif isinstance(response, Response):
        answer = "" if response.response is None else str(response.response)
    elif isinstance(response, PydanticResponse):
        answer = "" if response.response is None else response.response.model_dump_json()
    else:
        raise AdapterError(
            f"the query engine returned a {type(response).__name__}: judge reads a "
            "Response; build the engine without streaming=True"
        )
    nodes: list[NodeWithScore] = list(response.source_nodes)
    reply: dict[str, Any] = {
        "answer": answer,
        "contexts": [item.node.get_content() for item in nodes],
    }
    if not nodes:
        return reply
    scores = [item.score for item in nodes]
    found_scores = (
        [float(score) for score in scores if score is not None]
        if all(score is not None and math.isfinite(score) for score in scores)
        else None
    )
    if ids == "node":
        found_ids = [item.node.node_id for item in nodes]
    else:
        missing = [item.node.node_id for item in nodes if item.node.ref_doc_id is None]
        if missing:
            raise AdapterError(
                f"node {missing[0]} has no source document (ref_doc_id): use "
                'llamaindex_app(engine, ids="node")'
            )
        found_ids, found_scores = first_occurrences(
            [str(item.node.ref_doc_id) for item in nodes], found_scores
        )
    reply["retrieved_ids"] = found_ids
    if found_scores is not None:
        reply["retrieved_scores"] = found_scores
    return reply
