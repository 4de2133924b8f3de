"""A LangChain `Runnable` as a judge app (the extra `judge[langchain]`).

The runnable is asked with `ainvoke`, so judge's app concurrency applies. What it returns
becomes the reply:

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
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from judge.experiments.adapters.common import AdapterError

# Where a mapping output holds the answer and the documents, in order of preference:
# create_retrieval_chain's keys first, then agents' "output" and RetrievalQA's keys.
ANSWER_KEYS = ("answer", "output", "result")
CONTEXT_KEYS = ("context", "source_documents")


def is_runnable(obj: Any) -> bool:
    """Whether `obj` is a LangChain `Runnable`."""
    return isinstance(obj, Runnable)


def langchain_app(
    runnable: Any,
    *,
    input_key: str | None = None,
    id_key: str = "id",
    score_key: str = "score",
) -> Callable[[str], Awaitable[dict[str, Any]]]:
    """The judge app of a LangChain runnable: an async function question -> reply.

    Args:
        runnable: a LangChain `Runnable`: a retrieval chain, an LCEL chain, a chat model.
        input_key: the runnable is invoked with `{input_key: question}`. None (the default)
            reads the runnable's input schema: a runnable that takes a string gets the
            question itself; one that takes a mapping gets it under "input" when it has
            that key (as `create_retrieval_chain`'s chains do), else under its only key.
        id_key: the `Document.metadata` key of a context's retrieved id (else
            `Document.id` is used).
        score_key: the `Document.metadata` key of a context's retrieval score.
    """
    if not is_runnable(runnable):
        raise AdapterError(
            f"a {type(runnable).__name__} is not a LangChain Runnable: give a chain "
            "(create_retrieval_chain(...), prompt | model | parser) or a chat model"
        )
    make_input = _input_maker(runnable, input_key)

    async def call(question: str) -> dict[str, Any]:
        output = await runnable.ainvoke(make_input(question))
        return reply_of(output, id_key=id_key, score_key=score_key)

    return call


def _input_maker(runnable: Runnable[Any, Any], input_key: str | None) -> Callable[[str], Any]:
    if input_key is not None:
        return lambda question: {input_key: question}
    schema = runnable.get_input_jsonschema()
    if schema.get("type") != "object":  # a string, a message, or any value
        return lambda question: question
    keys = list(schema.get("properties", {}))
    required = list(schema.get("required", []))
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
