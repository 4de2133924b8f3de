"""One trace (its spans) as one `judge eval` row, or the reason it cannot be one.

Which span gives what, by span kind and parentage. The spans are walked as one forest,
depth first: every span without a parent, or whose parent is not in the trace, is a root
(Langfuse's low-level SDK makes every observation top-level), the roots in start order.


- the question and the answer: the input and output of the first span, from the roots
  down in start order, that has an input (normally the root CHAIN span): its `span_id`
  is the row's, the span evaluation results link to;
- the retrievals: every RETRIEVER and RERANKER span (GenAI: operation "retrieval"), in
  start order, each with its ranked ids, scores and contents;
- the contexts, `retrieved_ids` and `retrieved_scores`: the documents the generator saw,
  in order: the retrievals in start order, each retriever adding its documents (a document
  found twice kept once, at its first place) and each reranker replacing what came before
  with its output: the last reranker's output, then the documents of any retriever after it;
- `models` and `token_counts`: the LLM spans' model names and summed token counts;
- `session_id`: `session.id` (GenAI: `gen_ai.conversation.id`) of the first span having it;
- `tools_called`, only when the trace has tool spans (OpenInference TOOL, GenAI
  execute_tool): each one's call in start order, {"name", "arguments", "output"} as
  recorded (what `trajectory_accuracy` and the tool-call metrics read, beside an
  `expected_tools` column of your own);
- `start_time` and `latency_s`: from the earliest start among the trace's spans to the
  latest end (a child can end after its root).

A `mapping` (`--map field=attribute`) reads a field from an attribute of custom
instrumentation instead: the first span, in start order, that has the attribute gives it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.errors import JudgeError
from judge.traces import openinference as oi
from judge.traces.spans import Span, iso_utc

# The fields `--map` can read from an attribute.
MAPPABLE = ("question", "answer", "contexts", "retrieved_ids", "retrieved_scores", "session_id")


@dataclass(frozen=True)
class Skip:
    """Why a trace gave no row: a short code and a sentence."""

    trace_id: str
    reason: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """The line of skipped.jsonl."""
        return {"trace_id": self.trace_id, "reason": self.reason, "message": self.message}


def check_mapping(mapping: Mapping[str, str] | None) -> dict[str, str]:
    """The mapping field -> attribute, checked: every field is one `--map` can set."""
    checked = dict(mapping or {})
    for field, attribute in checked.items():
        if field not in MAPPABLE:
            raise JudgeError(
                f"mapping: {field!r} is not a field read from traces; map one of "
                f"{', '.join(MAPPABLE)} (e.g. mapping={{'question': 'app.query'}})"
            )
        if not attribute:
            raise JudgeError(f"mapping: give the attribute that holds {field}")
    return checked


def started(span: Span) -> int:
    """When a span started, for putting spans in order: its start time, else (lost in a
    damaged export: 0 in OTLP) its end, which a sequential agent's spans keep in order."""
    return span.start_ns or span.end_ns


def forest_order(spans: Sequence[Span]) -> list[Span]:
    """The spans as one forest, depth first: the roots (spans without a parent, or whose
    parent is not among the spans) in start order, each span's children in start order
    (then end order: those starting in one tick of the clock ran in the order they ended).
    Each span once, however many times it was given."""
    by_id = {span.span_id: span for span in reversed(spans)}  # the first of a repeated id
    unique = list(by_id.values())
    children: dict[str | None, list[Span]] = {}
    roots: list[Span] = []
    for span in unique:
        if span.parent_id is None or span.parent_id not in by_id or span.parent_id == span.span_id:
            roots.append(span)
        else:
            children.setdefault(span.parent_id, []).append(span)
    # Siblings that start in one tick of a coarse clock (a millisecond export, a Windows
    # clock) in the order they ran, as far as their ends say; their ids are random.
    order = lambda s: (started(s), s.end_ns, s.span_id)  # noqa: E731
    for kids in children.values():
        kids.sort(key=order)
    out: list[Span] = []
    seen: set[str] = set()
    stack = sorted(roots, key=order, reverse=True)
    while stack:
        span = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        out.append(span)
        stack.extend(reversed(children.get(span.span_id, ())))
    return out


def mapped_value(spans: Sequence[Span], attribute: str) -> tuple[Span, Any] | None:
    """The first span (in the order given) that has `attribute`, and its value; None."""
    for span in spans:
        if attribute in span.attributes:
            return span, span.attributes[attribute]
    return None


def as_list(value: Any) -> list[Any] | None:
    """An attribute's value as a list: a sequence, JSON text of one, or one text alone."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [value]
    return list(value) if isinstance(value, (list, tuple)) else None


def trace_row(
    spans: Sequence[Span],
    root: Span,
    mapping: Mapping[str, str] | None = None,
    *,
    chat_turn: bool = False,
) -> dict[str, Any] | Skip:
    """The row of one trace, or why there is none.

    Args:
        spans: every span of the trace, in any order (a span given twice is read once).
        root: its root span (`assemble.Trace.root`): it gives the trace's id.
        mapping: field -> attribute for custom instrumentation (`check_mapping`).
        chat_turn: the trace is a turn of a conversation (`--sessions`): one without a
            retriever span is a turn too (no contexts, no ranking), and one without an
            answer (the app failed) a row whose answer is None (`no_answer`), not
            skipped: what the user said in it is the history of the turns after it.
    """
    trace_id = root.trace_id
    ordered = forest_order(spans)
    mapping = mapping or {}
    kinds = [(span, oi.kind_of(span)) for span in ordered]

    # The span of the question and the answer.
    qa_span: Span | None = None
    question: str | None = None
    if "question" in mapping:
        found = mapped_value(ordered, mapping["question"])
        if found is not None:
            qa_span, question = found[0], str(found[1])
    else:
        for span, kind in kinds:
            if kind in (oi.RETRIEVER, oi.RERANKER, oi.LLM, "EMBEDDING"):
                continue  # their input is a query or a prompt, not the user's question
            question = oi.question_of(span)
            if question is not None:
                qa_span = span
                break
    if qa_span is None or question is None:
        where = f"attribute {mapping['question']!r}" if "question" in mapping else "input.value"
        return Skip(
            trace_id, "no_input", f"no span of the trace has an input ({where}): no question"
        )
    if "answer" in mapping:
        found = mapped_value(ordered, mapping["answer"])
        answer = None if found is None else str(found[1])
    else:
        answer = oi.answer_of(qa_span)
    if answer is None and not chat_turn:
        return no_answer(trace_id, qa_span)

    # The retrievals in start order, and what the generator saw: a retriever adds its
    # documents (one found before is kept at its first place), a reranker replaces what
    # came before with its output; so after two rounds, the reranked documents and then
    # those of the retrievers that came after the reranker.
    retrievals: list[dict[str, Any]] = []
    rounds: list[tuple[str, list[dict[str, Any]]]] = []
    found_spans = sorted(
        ((span, kind) for span, kind in kinds if kind in (oi.RETRIEVER, oi.RERANKER)),
        key=lambda item: started(item[0]),
    )
    for span, kind in found_spans:
        docs = oi.retrieved(span, kind)
        entry: dict[str, Any] = {
            "span_id": span.span_id,
            "kind": kind,
            "ids": [d.get("id") for d in docs],
            "scores": [d.get("score") for d in docs],
        }
        if any("content" in d for d in docs):
            entry["contents"] = [d.get("content") for d in docs]
        retrievals.append(entry)
        rounds.append((kind, docs))
    last_reranker = max((n for n, (kind, _) in enumerate(rounds) if kind == oi.RERANKER), default=0)
    seen: list[dict[str, Any]] = []
    ids_seen: set[Any] = set()
    for _, docs in rounds[last_reranker:]:
        for doc in docs:
            doc_id = doc.get("id")
            if doc_id is not None and doc_id in ids_seen:
                continue
            ids_seen.add(doc_id)
            seen.append(doc)
    contexts: list[Any] | None = [d.get("content") for d in seen]
    retrieved_ids: list[Any] | None = [d.get("id") for d in seen]
    retrieved_scores: list[Any] | None = [d.get("score") for d in seen]
    for field in ("contexts", "retrieved_ids", "retrieved_scores"):
        if field in mapping:
            found = mapped_value(ordered, mapping[field])
            if found is not None:
                value = as_list(found[1])
                if field == "contexts":
                    contexts = value
                elif field == "retrieved_ids":
                    retrieved_ids = value
                else:
                    retrieved_scores = value
                if not any(r["span_id"] == found[0].span_id for r in retrievals):
                    retrievals.append(
                        {"span_id": found[0].span_id, "kind": oi.RETRIEVER, "ids": [], "scores": []}
                    )
                entry = next(r for r in retrievals if r["span_id"] == found[0].span_id)
                if field == "retrieved_ids" and value is not None:
                    entry["ids"] = [str(v) for v in value]
                elif field == "retrieved_scores" and value is not None:
                    entry["scores"] = value
                elif value is not None:
                    entry["contents"] = value
    if not retrievals and not chat_turn:
        return Skip(
            trace_id,
            "no_retriever",
            "the trace has no retriever span (openinference.span.kind RETRIEVER or RERANKER, "
            "or gen_ai.operation.name retrieval): nothing to judge the retrieval by",
        )
    if not retrievals:  # a chat turn answered without retrieving: no ranking
        retrieved_ids = None
    elif retrieved_ids is not None and any(i is None for i in retrieved_ids):
        retrieved_ids = None  # a document without an id: no ranking to score
    else:
        retrieved_ids = [str(i) for i in retrieved_ids or ()]
    if contexts is not None and all(c is None for c in contexts):
        contexts = []  # ids without contents: judged by retrieval metrics only
    elif contexts is not None and any(not isinstance(c, str) for c in contexts):
        contexts = [c if isinstance(c, str) else "" for c in contexts]
    if retrieved_scores is not None and (
        any(not isinstance(s, (int, float)) or isinstance(s, bool) for s in retrieved_scores)
        or len(retrieved_scores) != len(contexts or retrieved_ids or ())
    ):
        retrieved_scores = None

    # Models, tokens, session.
    models: list[str] = []
    prompt = completion = total = 0
    for span, kind in kinds:
        if kind != oi.LLM:
            continue
        model = oi.model_of(span)
        if model is not None and model not in models:
            models.append(model)
        p, c, t = oi.tokens_of(span)
        prompt, completion, total = prompt + p, completion + c, total + t
    session = None
    if "session_id" in mapping:
        found = mapped_value(ordered, mapping["session_id"])
        session = None if found is None else str(found[1])
    else:
        for span in ordered:
            session = oi.session_of(span)
            if session is not None:
                break
    # The trace's time: from its first span's start to its last span's end (a child may
    # outlive the request: async work, a stream). A span without a start time (0 in
    # OTLP: a damaged export) says nothing of when the trace started.
    start_ns = min((span.start_ns for span in ordered if span.start_ns > 0), default=0)
    end_ns = max(span.end_ns for span in ordered)
    row = {
        "id": trace_id,
        "question": question,
        "answer": answer,
        "contexts": contexts or [],
        "retrieved_ids": retrieved_ids,
        "retrieved_scores": retrieved_scores,
        "trace_id": trace_id,
        "span_id": qa_span.span_id,
        "retrievals": retrievals,
        "start_time": iso_utc(start_ns),
        "latency_s": round(max(0, end_ns - start_ns) / 1e9, 6),
        "models": models,
        "token_counts": {"prompt": prompt, "completion": completion, "total": total},
        "session_id": session,
    }
    tools = sorted((span for span in ordered if oi.is_tool(span)), key=started)
    if tools:  # a trace without tool spans keeps the row it always had
        row["tools_called"] = [_tool_called(span) for span in tools]
    return row


def no_answer(trace_id: str, span: Span) -> Skip:
    """Why a trace gives no row to judge: `span`, the one with the question, has no output."""
    return Skip(
        trace_id,
        "no_output",
        f"the span {span.span_id} ({span.name}) that has the question has no output "
        "(output.value): the app failed or the trace is incomplete",
    )


def _tool_called(span: Span) -> dict[str, Any]:
    """A tool span's call as a row records it: its name, arguments and output as recorded."""
    call = oi.tool_call_of(span)
    output = oi.tool_output_of(span)
    if output is not None:
        call["output"] = output
    return call


def retriever_query(spans: Sequence[Span], question: str) -> str | None:
    """The query the trace's first retriever span (in start order) was given, when it is
    recorded (`input.value`; GenAI: `gen_ai.retrieval.query.text`) and is not the question
    (a chat app rewrites a turn into a standalone query); else None."""
    retrievers = sorted(
        (span for span in spans if oi.kind_of(span) == oi.RETRIEVER),
        key=lambda span: (started(span), span.end_ns, span.span_id),
    )
    for span in retrievers:
        query = span.attributes.get(oi.GEN_AI_RETRIEVAL_QUERY)
        if not isinstance(query, str):
            query = oi.question_of(span)
        if query is not None and query.strip():
            return None if query.strip() == question.strip() else query
    return None
