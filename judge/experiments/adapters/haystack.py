"""A Haystack 2 `Pipeline` as a judge app (the extra `judge[haystack]`).

The pipeline is asked with `run_async` when it has one (Haystack 3's `Pipeline`, Haystack
2's `AsyncPipeline`), so judge's app concurrency applies; else with `run`, which judge
calls in a thread of its own. Each run is given:

- the question, at every unconnected input named `query` or `question` (the retriever's
  `query`, the prompt builder's `question`, the `AnswerBuilder`'s `query`), or at the
  inputs `question_inputs` names;
- the fixed `inputs`, if any (`{"retriever": {"top_k": 5}}`).

What the run gives becomes the reply:

- the answer: the first answer's `data` of the component with an `answers` output (an
  `AnswerBuilder`), else the first reply of the component with a `replies` output (a
  generator: a string, or a `ChatMessage`'s text); when several components have one, the
  one whose output goes nowhere else. `answer_from` names it instead.
- the contexts: the documents the generator saw, in order: those given to the
  `AnswerBuilder`'s `documents` input when the answer comes from one (the whole list,
  also when a `reference_pattern` keeps only the cited documents in the answer), else
  the output of the last component before the answer that outputs documents (a
  retriever, a ranker after it, a joiner). `documents_from` names it instead; naming an
  `AnswerBuilder`'s `answers` gives its answer's own documents. No such component: no
  contexts.
- the retrieved ids: the documents' `id`, each once at its first rank; the retrieved
  scores: their `score`, when every document has one.

The components chosen are read from the pipeline's graph once, when the app is made, so a
pipeline judge cannot read fails before the first question.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx
from haystack import Document
from haystack.core.pipeline.base import PipelineBase
from haystack.dataclasses import ChatMessage, GeneratedAnswer

from judge.experiments.adapters.common import AdapterError, first_occurrences

# The unconnected inputs given the question when `question_inputs` is not set.
QUESTION_NAMES = ("query", "question")
# The outputs read as the answer, in order of preference: AnswerBuilder's, a generator's.
ANSWER_OUTPUTS = ("answers", "replies")

Socket = tuple[str, str]  # (component, input or output)


def is_pipeline(obj: Any) -> bool:
    """Whether `obj` is a Haystack pipeline (`Pipeline`, or Haystack 2's `AsyncPipeline`)."""
    return isinstance(obj, PipelineBase)


def haystack_app(
    pipeline: Any,
    *,
    question_inputs: Mapping[str, str | Sequence[str]] | Sequence[str] | None = None,
    answer_from: str | None = None,
    documents_from: str | None = None,
    inputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> Callable[[str], Any]:
    """The judge app of a Haystack pipeline: a function question -> reply (async when the
    pipeline has `run_async`). What is read from the pipeline is in the module's docstring.

    Args:
        pipeline: a Haystack `Pipeline` (or `AsyncPipeline`) answering one question.
        question_inputs: the inputs that take the question, as
            `{"retriever": "query", "prompt_builder": "question"}` or
            `["retriever.query", "prompt_builder.question"]`. None (the default): every
            unconnected input named `query` or `question`.
        answer_from: the component, or `"component.output"`, whose output is the answer.
            None (the default): the `AnswerBuilder`, else the generator.
        documents_from: the component, or `"component.output"`, whose documents are the
            contexts. None (the default): the documents given to the `AnswerBuilder`, else
            those of the last component before the answer that outputs documents.
        inputs: fixed inputs of every run, by component: `{"retriever": {"top_k": 5}}`.
    """
    if not is_pipeline(pipeline):
        raise AdapterError(
            f"a {type(pipeline).__name__} is not a Haystack pipeline: give a "
            "haystack.Pipeline whose components answer one question"
        )
    plan = _plan(pipeline, question_inputs, answer_from, documents_from, inputs)
    run_async = getattr(pipeline, "run_async", None)
    if run_async is not None and inspect.iscoroutinefunction(run_async):

        async def ask(question: str) -> dict[str, Any]:
            return plan.reply(await run_async(plan.data(question), plan.include_outputs_from))

        return ask

    def call(question: str) -> dict[str, Any]:
        return plan.reply(pipeline.run(plan.data(question), plan.include_outputs_from))

    return call


@dataclass(frozen=True)
class HaystackPlan:
    """Where a pipeline takes the question and where its answer and documents are.

    Attributes:
        question_inputs: the (component, input) pairs given the question.
        fixed: the fixed inputs of every run, by component.
        answer: the (component, output) of the answer.
        documents: the (component, output) of the contexts, or None for none.
    """

    question_inputs: tuple[Socket, ...]
    fixed: Mapping[str, Mapping[str, Any]]
    answer: Socket
    documents: Socket | None

    @property
    def include_outputs_from(self) -> set[str]:
        """The components whose outputs the run must return, leaves or not."""
        return {self.answer[0]} | ({self.documents[0]} if self.documents else set())

    def data(self, question: str) -> dict[str, dict[str, Any]]:
        """The pipeline's input for one question."""
        data = {name: dict(values) for name, values in self.fixed.items()}
        for name, socket in self.question_inputs:
            data.setdefault(name, {})[socket] = question
        return data

    def reply(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """The judge reply of a run's result."""
        reply: dict[str, Any] = {"answer": _answer(_output(result, self.answer), self.answer)}
        documents = [] if self.documents is None else _documents(result, self.documents)
        reply["contexts"] = [doc.content or "" for doc in documents]
        if documents:
            scores = [doc.score for doc in documents]
            numbers = [float(s) for s in scores if s is not None and math.isfinite(s)]
            ids, kept = first_occurrences(
                [str(doc.id) for doc in documents], numbers if len(numbers) == len(scores) else None
            )
            reply["retrieved_ids"] = ids
            if kept is not None:
                reply["retrieved_scores"] = kept
        return reply


def _plan(
    pipeline: PipelineBase,
    question_inputs: Mapping[str, str | Sequence[str]] | Sequence[str] | None,
    answer_from: str | None,
    documents_from: str | None,
    inputs: Mapping[str, Mapping[str, Any]] | None,
) -> HaystackPlan:
    graph: networkx.MultiDiGraph = pipeline.graph
    open_inputs = pipeline.inputs()
    fixed = dict(inputs or {})
    for name, values in fixed.items():
        for socket in values:
            _check_socket(name, socket, open_inputs, "inputs", "an unconnected input")
    asked = _question_inputs(question_inputs, open_inputs)
    given = set(asked) | {(name, socket) for name, values in fixed.items() for socket in values}
    unfilled = [
        f"{name}.{socket}"
        for name, sockets in open_inputs.items()
        for socket, about in sockets.items()
        if about.get("is_mandatory") and (name, socket) not in given
    ]
    if unfilled:
        raise AdapterError(
            f"the pipeline needs {', '.join(unfilled)}, which judge does not fill: give "
            "the question there with haystack_app(pipeline, question_inputs=[...]), or a "
            'fixed value with haystack_app(pipeline, inputs={"component": {"input": ...}})'
        )
    outputs = pipeline.outputs(include_components_with_connected_outputs=True)
    leaves = pipeline.outputs()
    answer = (
        _named_output(answer_from, outputs, "answer_from", _answer_socket)
        if answer_from is not None
        else _find_answer(outputs, leaves)
    )
    documents = (
        _named_output(documents_from, outputs, "documents_from", _documents_socket)
        if documents_from is not None
        else _find_documents(graph, outputs, answer)
    )
    return HaystackPlan(asked, fixed, answer, documents)


def _question_inputs(
    given: Mapping[str, str | Sequence[str]] | Sequence[str] | None,
    open_inputs: Mapping[str, Mapping[str, Any]],
) -> tuple[Socket, ...]:
    if given is None:
        found = tuple(
            (name, socket)
            for name, sockets in open_inputs.items()
            for socket in sockets
            if socket in QUESTION_NAMES
        )
        if not found:
            listed = ", ".join(f"{n}.{s}" for n, sockets in open_inputs.items() for s in sockets)
            raise AdapterError(
                "the pipeline has no unconnected input named 'query' or 'question' to give "
                "the question to: name its inputs with haystack_app(pipeline, "
                'question_inputs=["retriever.query", "prompt_builder.question"]) '
                f"(its unconnected inputs: {listed or 'none'})"
            )
        return found
    pairs: list[Socket] = []
    if isinstance(given, Mapping):
        for name, sockets in given.items():
            for socket in [sockets] if isinstance(sockets, str) else sockets:
                pairs.append((name, socket))
    elif isinstance(given, str):
        pairs.append(_split(given, "question_inputs", None))
    else:
        pairs.extend(_split(item, "question_inputs", None) for item in given)
    if not pairs:
        raise AdapterError("question_inputs is empty: name at least one input")
    for name, socket in pairs:
        _check_socket(name, socket, open_inputs, "question_inputs", "an unconnected input")
    return tuple(pairs)


def _split(text: str, option: str, default: str | None) -> Socket:
    """("component", "socket") of "component.socket"; "component" alone gets `default`."""
    name, dot, socket = text.partition(".")
    if not name or (dot and not socket) or (not dot and default is None):
        raise AdapterError(
            f'{option}={text!r}: give "component.{"input" if default is None else "output"}"'
        )
    return name, socket if dot else default or ""


def _check_socket(
    name: str, socket: str, sockets: Mapping[str, Mapping[str, Any]], option: str, kind: str
) -> None:
    if name not in sockets:
        raise AdapterError(
            f"{option}: the pipeline has no component {name!r} with {kind} "
            f"(those with one: {', '.join(sockets) or 'none'})"
        )
    if socket not in sockets[name]:
        raise AdapterError(
            f"{option}: {name}.{socket} is not {kind} of the pipeline "
            f"({name}'s: {', '.join(sockets[name]) or 'none'})"
        )


def _named_output(
    text: str,
    outputs: Mapping[str, Mapping[str, Any]],
    option: str,
    default: Callable[[Mapping[str, Any]], str | None],
) -> Socket:
    name, socket = _split(text, option, "")
    if not socket and name in outputs:
        socket = default(outputs[name]) or ""
        if not socket:
            raise AdapterError(
                f"{option}={text!r}: say which output of {name} to read: "
                f'"{name}.OUTPUT" (its outputs: {", ".join(outputs[name])})'
            )
    _check_socket(name, socket, outputs, option, "an output")
    return name, socket


def _answer_socket(sockets: Mapping[str, Any]) -> str | None:
    found = [socket for socket in ANSWER_OUTPUTS if socket in sockets]
    return found[0] if found else next(iter(sockets)) if len(sockets) == 1 else None


def _documents_socket(sockets: Mapping[str, Any]) -> str | None:
    typed = [socket for socket, about in sockets.items() if _is_documents(about["type"])]
    return typed[0] if len(typed) == 1 else "documents" if "documents" in sockets else None


def _find_answer(
    outputs: Mapping[str, Mapping[str, Any]], leaves: Mapping[str, Mapping[str, Any]]
) -> Socket:
    for socket in ANSWER_OUTPUTS:
        found = [name for name, sockets in outputs.items() if socket in sockets]
        if len(found) > 1:  # a query rewriter's replies go on to the retriever: not the answer
            found = [name for name in found if socket in leaves.get(name, {})] or found
        if len(found) == 1:
            return found[0], socket
        if found:
            raise AdapterError(
                f"components {', '.join(found)} each give {socket!r}: say which one is the "
                f'answer with haystack_app(pipeline, answer_from="{found[-1]}")'
            )
    raise AdapterError(
        "no component of the pipeline gives 'answers' (an AnswerBuilder) or 'replies' (a "
        'generator): name the answer with haystack_app(pipeline, answer_from="component.output")'
    )


def _find_documents(
    graph: networkx.MultiDiGraph, outputs: Mapping[str, Mapping[str, Any]], answer: Socket
) -> Socket | None:
    # The documents handed to the AnswerBuilder are, by its contract, those the generator used.
    for sender, _, edge in graph.in_edges(answer[0], data=True):
        if edge["to_socket"].name == "documents":
            return sender, edge["from_socket"].name
    before = networkx.ancestors(graph, answer[0])
    found = [
        (name, socket)
        for name, sockets in outputs.items()
        if name in before
        for socket, about in sockets.items()
        if _is_documents(about["type"])
    ]
    names = {name for name, _ in found}
    # The last of them: the one no other is upstream of (the ranker after the retriever).
    last = [(n, s) for n, s in found if not (networkx.descendants(graph, n) & (names - {n}))]
    if len(last) > 1:
        raise AdapterError(
            f"{', '.join(f'{n}.{s}' for n, s in last)} each give documents before the "
            f'answer: say which are the contexts with haystack_app(pipeline, documents_from="'
            f'{last[-1][0]}")'
        )
    return last[0] if last else None


def _is_documents(kind: Any) -> bool:
    """Whether an output's type is a list of `Document` (`list[Document]`, `List[Document]`)."""
    return typing.get_origin(kind) is list and typing.get_args(kind) == (Document,)


def _output(result: Mapping[str, Any], where: Socket) -> Any:
    name, socket = where
    outputs = result.get(name)
    if not isinstance(outputs, Mapping) or socket not in outputs:
        raise AdapterError(
            f"the pipeline's run gave no {name}.{socket} (its outputs: "
            f"{', '.join(f'{n}.{s}' for n, v in result.items() for s in v) or 'none'}): "
            "did the component run for this question?"
        )
    return outputs[socket]


def _answer(value: Any, where: Socket) -> str:
    source = ".".join(where)
    if isinstance(value, (list, tuple)):
        if not value:
            raise AdapterError(f"{source} is empty: the pipeline gave no answer")
        value = value[0]
    if isinstance(value, str):
        return value
    if isinstance(value, GeneratedAnswer):
        return "" if value.data is None else str(value.data)
    if isinstance(value, ChatMessage):
        return value.text or ""
    raise AdapterError(
        f"{source} is a {type(value).__name__}: judge reads a GeneratedAnswer, a ChatMessage "
        f'or a string as the answer: name another with haystack_app(pipeline, answer_from="...")'
    )


def _documents(result: Mapping[str, Any], where: Socket) -> list[Document]:
    value = _output(result, where)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], GeneratedAnswer):
        value = value[0].documents  # documents_from an AnswerBuilder's answers
    if not isinstance(value, (list, tuple)) or not all(isinstance(d, Document) for d in value):
        raise AdapterError(
            f"{'.'.join(where)} is a {type(value).__name__}, not a list of Documents: name "
            'another with haystack_app(pipeline, documents_from="...")'
        )
    return list(value)
