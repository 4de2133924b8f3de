"""A LangChain `Runnable` as a judge app (the extra `judge[langchain]`).

The runnable is asked with `ainvoke`, so judge's app concurrency applies. A runnable whose
input has a `chat_history` or `history` key (a chain of `create_history_aware_retriever`),
or with a prompt that has a `MessagesPlaceholder("chat_history")` (or "history"), is a
conversational app: each user message is asked with the conversation before it under that
key, as LangChain messages (`convert_to_messages` of the OpenAI-style dicts). What it
returns becomes the reply:

- a mapping, as `create_retrieval_chain` returns (`{"input", "context", "answer"}`): the
  answer from "answer" (else "output", else "result"), the contexts from "context" (else
  "source_documents"), in order;
- a string or a chat message (`AIMessage`): the answer, with no contexts.

A context that is a `Document` gives its `page_content`; its retrieved id is
`metadata[id_key]` when the document has one, else `Document.id` (the vector store's id);
ids are given only when every document has one. The retrieved scores are
`metadata[score_key]` when every document has a finite number there (LangChain's
retrievers do not put scores in documents: a retriever that does is shown in the how-to
"add scores to retriever results").
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeGuard

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable

from judge.experiments.adapters.common import AdapterError

# Where a mapping output holds the answer and the documents, in order of preference:
# create_retrieval_chain's keys first, then agents' "output" and RetrievalQA's keys.
ANSWER_KEYS = ("answer", "output", "result")
CONTEXT_KEYS = ("context", "source_documents")
# The input keys of a conversational runnable's history, in order of preference.
HISTORY_KEYS = ("chat_history", "history")


def is_runnable(obj: Any) -> bool:
    """Whether `obj` is a LangChain `Runnable`."""
    return isinstance(obj, Runnable)


def langchain_app(
    runnable: Any,
    *,
    input_key: str | None = None,
    history_key: str | None = None,
    id_key: str = "id",
    score_key: str = "score",
) -> Callable[..., Awaitable[dict[str, Any]]]:
    """The judge app of a LangChain runnable: an async function question -> reply, or
    (question, history) -> reply for a runnable that takes a conversation.

    Args:
        runnable: a LangChain `Runnable`: a retrieval chain, an LCEL chain, a chat model.
        input_key: the runnable is invoked with `{input_key: question}`. None (the default)
            reads the runnable's input schema: a runnable that takes a string gets the
            question itself; one that takes a mapping gets it under "input" when it has
            that key (as `create_retrieval_chain`'s chains do), else under its only key
            besides the history's.
        history_key: the input key of the conversation before the question (a list of
            LangChain messages). None (the default): "chat_history" or "history" when the
            runnable's input has one; a runnable without one is asked each question alone.
        id_key: the `Document.metadata` key of a context's retrieved id (else
            `Document.id` is used).
        score_key: the `Document.metadata` key of a context's retrieval score.
    """
    if not is_runnable(runnable):
        raise AdapterError(
            f"a {type(runnable).__name__} is not a LangChain Runnable: give a chain "
            "(create_retrieval_chain(...), prompt | model | parser) or a chat model"
        )
    history_key = history_key or _history_key(runnable)
    make_input = _input_maker(runnable, input_key, history_key)
    if history_key is None:

        async def call(question: str) -> dict[str, Any]:
            output = await runnable.ainvoke(make_input(question))
            return reply_of(output, id_key=id_key, score_key=score_key)

        return call
    key = history_key

    async def chat(question: str, history: list[dict[str, str]]) -> dict[str, Any]:
        given = {**make_input(question), key: convert_to_messages(history)}
        output = await runnable.ainvoke(given)
        return reply_of(output, id_key=id_key, score_key=score_key)

    return chat


def _history_key(runnable: Runnable[Any, Any]) -> str | None:
    """The key of the runnable's input that takes the conversation, if it has one: in its
    input schema, else a `MessagesPlaceholder` of a prompt in its graph (a retrieval
    chain's schema is its retriever's, without the prompt's history)."""
    schema = runnable.get_input_jsonschema()
    if schema.get("type") != "object":
        return None
    keys = set(schema.get("properties", {}))
    try:
        nodes = list(runnable.get_graph().nodes.values())
    except Exception:  # a runnable that cannot draw its graph: its schema alone says
        nodes = []
    for node in nodes:
        if isinstance(node.data, ChatPromptTemplate):
            keys.update(
                m.variable_name for m in node.data.messages if isinstance(m, MessagesPlaceholder)
            )
    return next((key for key in HISTORY_KEYS if key in keys), None)


def _input_maker(
    runnable: Runnable[Any, Any], input_key: str | None, history_key: str | None = None
) -> Callable[[str], Any]:
    if input_key is not None:
        return lambda question: {input_key: question}
    schema = runnable.get_input_jsonschema()
    if schema.get("type") != "object":  # a string, a message, or any value
        if history_key is not None:
            raise AdapterError(
                f"history_key={history_key!r}: the runnable does not take a mapping, so it "
                "has no input for the conversation; build it to take one (a prompt with "
                "MessagesPlaceholder)"
            )
        return lambda question: question
    keys = [key for key in schema.get("properties", {}) if key != history_key]
    required = [key for key in schema.get("required", []) if key != history_key]
    if "input" in keys or not keys:
        key = "input"
    elif len(required) == 1 or len(keys) == 1:
        key = required[0] if required else keys[0]
    else:
        raise AdapterError(
            f"the runnable takes a mapping with keys {', '.join(map(repr, keys))}: say "
            "which one holds the question with langchain_app(runnable, input_key=...), "
            "or fill the others in the chain (RunnablePassthrough.assign)"
        )
    return lambda question: {key: question}


def reply_of(output: Any, *, id_key: str = "id", score_key: str = "score") -> dict[str, Any]:
    """The judge reply of what a runnable returned (see the module's docstring).

    Args:
        output: the runnable's output: a mapping, a string or a chat message.
        id_key: the `Document.metadata` key of a retrieved id (else `Document.id`).
        score_key: the `Document.metadata` key of a retrieval score.
    """
    if isinstance(output, (str, BaseMessage)):
        return {"answer": _text(output, "the runnable's output"), "contexts": []}
    if not isinstance(output, Mapping):
        raise AdapterError(
            f"the runnable returned a {type(output).__name__}: judge reads a string, a chat "
            "message, or a mapping with 'answer' and 'context' (as create_retrieval_chain "
            "returns)"
        )
    answer_key = next((key for key in ANSWER_KEYS if key in output), None)
    if answer_key is None:
        raise AdapterError(
            f"the runnable returned a mapping with keys {', '.join(map(repr, output)) or 'none'}"
            f": judge reads the answer from {' or '.join(map(repr, ANSWER_KEYS))}"
        )
    reply: dict[str, Any] = {"answer": _text(output[answer_key], repr(answer_key))}
    context_key = next((key for key in CONTEXT_KEYS if key in output), None)
    items = [] if context_key is None else output[context_key]
    if isinstance(items, (str, bytes)) or not isinstance(items, (list, tuple)):
        raise AdapterError(
            f"the runnable's {context_key!r} is a {type(items).__name__}, not a list of documents"
        )
    reply["contexts"] = [_content(item, context_key, i) for i, item in enumerate(items)]
    documents = [item for item in items if isinstance(item, Document)]
    if documents and len(documents) == len(items):
        reply.update(_ranking(documents, id_key, score_key))
    return reply


def _text(value: Any, where: str) -> str:
    """A string, or a chat message's text (its text blocks joined when its content is a
    list of blocks)."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        if isinstance(value.content, str):
            return value.content
        return "".join(
            block if isinstance(block, str) else str(block.get("text", ""))
            for block in value.content
            if isinstance(block, str) or block.get("type") == "text"
        )
    raise AdapterError(f"{where} is a {type(value).__name__}, not a string or a chat message")


def _content(item: Any, key: str | None, i: int) -> str:
    if isinstance(item, Document):
        return item.page_content
    if isinstance(item, str):
        return item
    raise AdapterError(f"the runnable's {key}[{i}] is a {type(item).__name__}, not a Document")


def _ranking(documents: list[Document], id_key: str, score_key: str) -> dict[str, Any]:
    """retrieved_ids and retrieved_scores, each when every document has one."""
    found: dict[str, Any] = {}
    ids = [_document_id(doc, id_key) for doc in documents]
    if all(item is not None for item in ids):
        found["retrieved_ids"] = ids
        scores = [doc.metadata.get(score_key) for doc in documents]
        numbers = [float(score) for score in scores if _is_number(score)]
        if len(numbers) == len(scores):
            found["retrieved_scores"] = numbers
    return found


def _document_id(document: Document, id_key: str) -> str | None:
    value = document.metadata.get(id_key, document.id)
    return None if value is None else str(value)


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
