"""One trace (its spans) as one `judge eval` row, or the reason it cannot be one.

Which span gives what, by span kind and parentage:

- the question and the answer: the input and output of the first span, from the root
  down in start order, that has an input (normally the root CHAIN span): its `span_id`
  is the row's, the span evaluation results link to;
- the retrievals: every RETRIEVER and RERANKER span (GenAI: operation "retrieval"), in
  start order, each with its ranked ids, scores and contents;
- the contexts, `retrieved_ids` and `retrieved_scores`: the documents the generator saw,
  in order: the last reranker's output when there is a reranker, else the documents of
  every retriever in start order (a document found twice kept once, at its first place);
- `models` and `token_counts`: the LLM spans' model names and summed token counts;
- `session_id`: `session.id` (GenAI: `gen_ai.conversation.id`) of the first span having it.

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


def _ordered(spans: Sequence[Span], root: Span) -> list[Span]:
    """The spans from the root down, depth first, each span's children in start order."""
    children: dict[str | None, list[Span]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    for kids in children.values():
        kids.sort(key=lambda s: (s.start_ns, s.span_id))
    out: list[Span] = []
    stack = [root]
    while stack:
        span = stack.pop()
        out.append(span)
        stack.extend(reversed(children.get(span.span_id, ())))
    return out


def _mapped(spans: Sequence[Span], attribute: str) -> tuple[Span, Any] | None:
    for span in spans:
        if attribute in span.attributes:
            return span, span.attributes[attribute]
    return None


def _as_list(value: Any) -> list[Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [value]
    return list(value) if isinstance(value, (list, tuple)) else None


def trace_row(
    spans: Sequence[Span], root: Span, mapping: Mapping[str, str] | None = None
) -> dict[str, Any] | Skip:
    """The row of one trace, or why there is none.

    Args:
        spans: every span of the trace, in any order.
        root: its root span (no parent).
        mapping: field -> attribute for custom instrumentation (`check_mapping`).
    """
    trace_id = root.trace_id
    ordered = _ordered(spans, root)
    mapping = mapping or {}
    kinds = [(span, oi.kind_of(span)) for span in ordered]

    # The span of the question and the answer.
    qa_span: Span | None = None
    question: str | None = None
    if "question" in mapping:
        found = _mapped(ordered, mapping["question"])
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
        found = _mapped(ordered, mapping["answer"])
        answer = None if found is None else str(found[1])
    else:
        answer = oi.answer_of(qa_span)
    if answer is None:
        return Skip(
            trace_id,
            "no_output",
            f"the span {qa_span.span_id} ({qa_span.name}) that has the question has no output "
            "(output.value): the app failed or the trace is incomplete",
        )

    # The retrievals, and what the generator saw.
    retrievals: list[dict[str, Any]] = []
    reranked: list[dict[str, Any]] | None = None
    for span, kind in kinds:
        if kind not in (oi.RETRIEVER, oi.RERANKER):
            continue
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
        if kind == oi.RERANKER:
            reranked = docs
    seen: list[dict[str, Any]]
    if reranked is not None:
        seen = reranked
    else:
        seen, ids_seen = [], set()
        for entry in retrievals:
            contents = entry.get("contents") or [None] * len(entry["ids"])
            for doc_id, score, content in zip(entry["ids"], entry["scores"], contents, strict=True):
                if doc_id is not None and doc_id in ids_seen:
                    continue
                ids_seen.add(doc_id)
                seen.append({"id": doc_id, "score": score, "content": content})
    contexts: list[Any] | None = [d.get("content") for d in seen]
    retrieved_ids: list[Any] | None = [d.get("id") for d in seen]
    retrieved_scores: list[Any] | None = [d.get("score") for d in seen]
    for field in ("contexts", "retrieved_ids", "retrieved_scores"):
        if field in mapping:
            found = _mapped(ordered, mapping[field])
            if found is not None:
                value = _as_list(found[1])
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
    if not retrievals:
        return Skip(
            trace_id,
            "no_retriever",
            "the trace has no retriever span (openinference.span.kind RETRIEVER or RERANKER, "
            "or gen_ai.operation.name retrieval): nothing to judge the retrieval by",
        )
    if retrieved_ids is not None and any(i is None for i in retrieved_ids):
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
        found = _mapped(ordered, mapping["session_id"])
        session = None if found is None else str(found[1])
    else:
        for span in ordered:
            session = oi.session_of(span)
            if session is not None:
                break
    return {
        "id": trace_id,
        "question": question,
        "answer": answer,
        "contexts": contexts or [],
        "retrieved_ids": retrieved_ids,
        "retrieved_scores": retrieved_scores,
        "trace_id": trace_id,
        "span_id": qa_span.span_id,
        "retrievals": retrievals,
        "start_time": iso_utc(root.start_ns),
        "latency_s": round(max(0, root.end_ns - root.start_ns) / 1e9, 6),
        "models": models,
        "token_counts": {"prompt": prompt, "completion": completion, "total": total},
        "session_id": session,
    }
