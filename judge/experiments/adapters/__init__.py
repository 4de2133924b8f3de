"""Framework objects (a LangChain runnable, a LlamaIndex query engine, a Haystack pipeline)
as judge apps.

Each adapter lives in its own module and imports its framework only when used: `adapt`
recognises a framework object by the modules its classes come from, so the base install
never imports LangChain, LlamaIndex or Haystack, and a user's plain function never loads them.

- `judge.experiments.adapters.langchain.langchain_app`: a LangChain `Runnable` (a chain
  from `create_retrieval_chain`, an LCEL chain, a chat model).
- `judge.experiments.adapters.llamaindex.llamaindex_app`: a LlamaIndex query engine
  (`index.as_query_engine()`); `llamaindex_chat_app`: a chat engine
  (`index.as_chat_engine()`), a conversational app.
- `judge.experiments.adapters.haystack.haystack_app`: a Haystack `Pipeline` (a retriever,
  a prompt builder, a generator and an `AnswerBuilder`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from judge.experiments.adapters.common import AdapterError, defined_in

__all__ = ["AdapterError", "adapt"]


def adapt(obj: Any) -> Callable[..., Any] | None:
    """The app (question -> reply mapping; (question, history) -> reply for a
    conversational one) of a framework object, or None when `obj` is not one judge has an
    adapter for.

    Args:
        obj: any object; a LangChain `Runnable`, a LlamaIndex query engine or chat engine
            or a Haystack pipeline gets its adapter with the default options
            (`langchain_app(obj)`, `llamaindex_app(obj)`, `llamaindex_chat_app(obj)`,
            `haystack_app(obj)`), anything else gives None.
    """
    if defined_in(obj, "langchain_core.", "langchain.", "langchain_classic."):
        from judge.experiments.adapters.langchain import is_runnable, langchain_app

        return langchain_app(obj) if is_runnable(obj) else None
    if defined_in(obj, "llama_index.core."):
        from judge.experiments.adapters.llamaindex import (
            is_chat_engine,
            is_query_engine,
            llamaindex_app,
            llamaindex_chat_app,
        )

        if is_chat_engine(obj):
            return llamaindex_chat_app(obj)
        return llamaindex_app(obj) if is_query_engine(obj) else None
    if defined_in(obj, "haystack."):
        from judge.experiments.adapters.haystack import haystack_app, is_pipeline

        return haystack_app(obj) if is_pipeline(obj) else None
    return None
