"""An agent's traces hop by hop: each retriever span's documents scored against relevance
labels with `judge.ir`'s exact metrics, where a gold document was found and lost, and the
tool calls against the expected ones (`judge.metrics.tools`).

The Python twin of `judge traces hops`. In a trace (read by the readers of `judge traces
extract`: OTLP, Phoenix, Langfuse):

- a hop is a retriever span (OpenInference RETRIEVER, GenAI operation "retrieval"), in
  start order; its ranking is its documents in the order recorded (a repeated id once, a
  document without an id left out), as `judge traces extract --retriever-run` ranks them;
- the generator is the trace's last LLM span (in start order) that gave the trace's
  answer, else its last LLM span; its input is the documents
  it lists (`input.documents`, by id) or else the text of its prompt (input.value,
  llm.input_messages, llm.prompts, llm.prompt_template.variables, gen_ai.input.messages):
  a document is in it when its content (as a hop recorded it, white space collapsed) is
  found in that text;
- the tool calls are the tool spans (OpenInference or Langfuse TOOL, GenAI execute_tool),
  in start order.

Per trace, with gold documents those graded at least `relevance_level`:

- `first_gold_hop`: the first hop that retrieved a gold document;
- `lost_at_hop`: the hop after which a gold document was no longer passed on: a gold
  document retrieved at that hop, absent from every later hop and from the generator's
  input (the earliest such hop; every such document in `lost`);
- `generator_saw_gold`: whether a gold document is in the generator's input.

Each is null with a reason (`REASONS`) when it cannot be said.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from judge.errors import InputFormatError, JudgeError
from judge.ir.trec import check_trec_id
from judge.metrics.tools import (
    TOOL_METRICS,
    ToolCall,
    parse_tool_calls,
    score_tool_calls,
    tool_call,
)
from judge.traces import openinference as oi
from judge.traces.assemble import DEFAULT_LINGER, AssemblyCounts, Trace
from judge.traces.extract import read_traces
from judge.traces.rows import as_list, check_mapping, forest_order, mapped_value, started
from judge.traces.spans import Span

if TYPE_CHECKING:
    from judge.run.output_folder import OutputFolder

PathLike = str | os.PathLike[str]

# Why a per-trace field is null.
NO_RELEVANCE_JUDGMENTS = "no_relevance_judgments"  # no labels for the trace (by id or question)
NO_GOLD = "no_gold"  # its labels grade no document at relevance_level or above
NO_HOPS = "no_hops"  # the trace has no retriever span
NO_GOLD_RETRIEVED = "no_gold_retrieved"  # no hop retrieved a gold document
NONE_LOST = "none_lost"  # every gold document retrieved reached the generator
NO_GENERATOR_INPUT = "no_generator_input"  # no LLM span, or one that records no input
NO_DOCUMENT_CONTENTS = "no_document_contents"  # prompt text only, and no gold content to find
NOT_SUPPORTED = "not_supported"  # a claim no context supports: no hop to attribute it to
CONTEXT_NOT_IN_HOPS = "context_not_in_hops"  # its supporting context is no hop's document
REASONS = {
    NO_RELEVANCE_JUDGMENTS: "no relevance labels for the trace: not by its id (--qrels), nor "
    "by its question (--rows)",
    NO_GOLD: "its labels grade no document at the relevance level or above",
    NO_HOPS: "the trace has no retriever span",
    NO_GOLD_RETRIEVED: "no hop retrieved a gold document",
    NONE_LOST: "every gold document retrieved reached the generator's input",
    NO_GENERATOR_INPUT: "the trace has no LLM span, or its generator records no input "
    "(input.documents, input.value, llm.input_messages, ...): what the generator saw is unknown",
    NO_DOCUMENT_CONTENTS: "the generator's input is recorded as text only, and the hops "
    "recorded no content of the gold documents they retrieved, to look for in it",
    NOT_SUPPORTED: "the claim is not supported by a context (or its verdict names none): "
    "no hop to attribute it to",
    CONTEXT_NOT_IN_HOPS: "the context that supports the claim is no document a hop recorded "
    "(a reranker's, or one without content)",
}


@dataclass(frozen=True)
class Hop:
    """One retriever span: its ranked document ids and the contents it recorded."""

    span_id: str
    name: str
    ids: list[str]
    contents: dict[str, str] = field(default_factory=dict)


@dataclass
class AgentTrace:
    """What `judge traces hops` reads of one trace.

    Args:
        trace_id: the trace's id.
        question: the question (as `judge traces extract` reads it), or None.
        hops: the retriever spans, in start order.
        generator_ids: the ids of the documents the generator lists in its input
            (`input.documents`), or None when it lists none.
        generator_text: the texts of the generator's input, white space collapsed, or
            None when there is no LLM span or it records no input.
        tool_calls: the tool spans' calls, in start order.
    """

    trace_id: str
    question: str | None
    hops: list[Hop]
    generator_ids: list[str] | None = None
    generator_text: list[str] | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)

    def generator_saw(self, doc_id: str) -> bool | None:
        """Whether a document is in the generator's input; None when that is unknown."""
        if self.generator_ids is not None:
            return doc_id in self.generator_ids
        if self.generator_text is None:
            return None
        content = next((h.contents[doc_id] for h in self.hops if h.contents.get(doc_id)), None)
        if content is None:
            return None
        return any(content in text for text in self.generator_text)


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _question(spans: Sequence[Span], attribute: str | None = None) -> str | None:
    """The question as `trace_row` finds it: the mapped attribute's text on the first span,
    from the roots down, that has it; else the input of the first span that is no
    retriever, reranker, LLM or embedding span."""
    if attribute is not None:
        found = mapped_value(spans, attribute)
        return found[1] if found is not None and isinstance(found[1], str) else None
    for span in spans:
        if oi.kind_of(span) in (oi.RETRIEVER, oi.RERANKER, oi.LLM, "EMBEDDING"):
            continue
        question = oi.question_of(span)
        if question is not None:
            return question
    return None


# What `--map` can name for hops: the question (labels by question) and the ranked ids
# of custom retrieval spans (every span holding the attribute is a hop).
HOP_MAPPABLE = ("question", "retrieved_ids")


def check_hop_mapping(mapping: Mapping[str, str] | None) -> dict[str, str]:
    """The mapping field -> attribute, checked for hops (`HOP_MAPPABLE`)."""
    checked = check_mapping(mapping)
    other = [field for field in checked if field not in HOP_MAPPABLE]
    if other:
        raise JudgeError(
            f"mapping: {', '.join(repr(f) for f in other)} is not read by hops; map "
            f"{' or '.join(HOP_MAPPABLE)} (e.g. mapping={{'retrieved_ids': 'app.doc_ids'}})"
        )
    return checked


def _outputs(span: Span) -> list[str]:
    """What an LLM span answered: its output, and its output messages' contents."""
    found = [oi.answer_of(span)]
    found += [
        value
        for key, value in span.attributes.items()
        if key.startswith("llm.output_messages.") and key.endswith(".message.content")
    ]
    return [_collapsed(text) for text in found if isinstance(text, str) and text.strip()]


def _generator(spans: Sequence[Span], llms: Sequence[Span]) -> Span:
    """The LLM span that generated the trace's answer: the last that gave it (an agent may
    ask a model something after it answered: follow-up suggestions, a summary for its
    memory), else the last LLM span."""
    answer = next(
        (
            oi.answer_of(span)
            for span in spans
            if oi.kind_of(span) not in (oi.RETRIEVER, oi.RERANKER, oi.LLM, "EMBEDDING")
            and oi.question_of(span) is not None
        ),
        None,
    )
    if answer is not None and answer.strip():
        gave = [span for span in llms if _collapsed(answer) in _outputs(span)]
        if gave:
            return gave[-1]
    return llms[-1]


def agent_trace(trace: Trace, mapping: Mapping[str, str] | None = None) -> AgentTrace:
    """The hops, generator input and tool calls of one trace (`read_traces` gives them);
    `mapping` (`check_hop_mapping`) reads the question, and each hop's ranked ids, from
    attributes of custom instrumentation."""
    mapping = mapping or {}
    spans = forest_order(trace.spans)
    by_start = sorted(spans, key=started)  # stable: the forest order in a tie
    hops = []
    ids_attribute = mapping.get("retrieved_ids")
    for span in by_start:
        if ids_attribute is not None and ids_attribute in span.attributes:
            listed = as_list(span.attributes[ids_attribute]) or []
            ranked = [str(d) for d in listed if d is not None]
            hops.append(Hop(span.span_id, span.name, list(dict.fromkeys(ranked)), {}))
            continue
        if oi.kind_of(span) != oi.RETRIEVER:
            continue
        docs = oi.retrieved(span, oi.RETRIEVER)
        ids = list(dict.fromkeys(str(d["id"]) for d in docs if d.get("id") is not None))
        contents: dict[str, str] = {}
        for doc in docs:
            content = doc.get("content")
            if doc.get("id") is not None and isinstance(content, str) and content.strip():
                contents.setdefault(str(doc["id"]), _collapsed(content))
        hops.append(Hop(span.span_id, span.name, ids, contents))
    llms = [span for span in by_start if oi.kind_of(span) == oi.LLM]
    generator_ids = generator_text = None
    if llms:
        generator = _generator(spans, llms)
        listed = oi.documents(generator, oi.INPUT_DOCUMENTS)
        if any(d.get("id") is not None for d in listed):
            generator_ids = [str(d["id"]) for d in listed if d.get("id") is not None]
        texts = [_collapsed(t) for t in oi.input_texts(generator)]
        if any(texts):
            generator_text = [t for t in texts if t]
    calls = [tool_call(oi.tool_call_of(span)) for span in by_start if oi.is_tool(span)]
    question = _question(spans, mapping.get("question"))
    return AgentTrace(trace.trace_id, question, hops, generator_ids, generator_text, calls)


def read_agent_traces(
    paths: PathLike | Sequence[PathLike],
    *,
    source: str | None = None,
    linger: int = DEFAULT_LINGER,
    counts: AssemblyCounts | None = None,
    mapping: Mapping[str, str] | None = None,
) -> Iterator[AgentTrace]:
    """The agent traces of trace files, streamed (the readers of `judge traces extract`);
    `mapping` reads the question and hops of custom instrumentation (`agent_trace`)."""
    checked = check_hop_mapping(mapping)
    path_list = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    for trace in read_traces(path_list, linger=linger, counts=counts, source=source):
        yield agent_trace(trace, checked)


def question_key(question: str) -> str:
    """A question as labels are looked up by it: white space collapsed."""
    return _collapsed(question)


@dataclass
class Labels:
    """Relevance labels and expected tool calls, by trace id and by question."""

    relevance_by_trace: dict[str, dict[str, int]] = field(default_factory=dict)
    relevance_by_question: dict[str, dict[str, int]] = field(default_factory=dict)
    tools_by_trace: dict[str, list[ToolCall]] = field(default_factory=dict)
    tools_by_question: dict[str, list[ToolCall]] = field(default_factory=dict)
    # trace id -> its answer's claims as a judge eval run verified them (`read_claims`)
    claims_by_trace: dict[str, list[JudgedClaim]] = field(default_factory=dict)

    def relevance(self, trace: AgentTrace) -> dict[str, int] | None:
        """The trace's relevance labels: by its id, else by its question; None if none."""
        found = self.relevance_by_trace.get(trace.trace_id)
        if found is None and trace.question is not None:
            found = self.relevance_by_question.get(question_key(trace.question))
        return found or None

    def expected_tools(self, trace: AgentTrace) -> list[ToolCall] | None:
        """The trace's expected tool calls: by its id, else by its question; None if none."""
        found = self.tools_by_trace.get(trace.trace_id)
        if found is None and trace.question is not None:
            found = self.tools_by_question.get(question_key(trace.question))
        return found

    @property
    def has_tools(self) -> bool:
        """Whether any expected tool calls are given."""
        return bool(self.tools_by_trace or self.tools_by_question)


@dataclass(frozen=True)
class JudgedClaim:
    """One claim of a trace's answer as a `judge eval` run verified it: its verdict, the
    number of the context that supports it, and that context's text (white space
    collapsed), when one does."""

    claim: str
    verdict: str
    context: int | None
    text: str | None


def read_claims(results: PathLike, labels: Labels) -> None:
    """The answer claims of a `judge eval` run of the traces (its folder or results.jsonl),
    by trace id (the row's `trace_id`, else its id: a run of `extract --sessions`'s
    conversations names its turns "session#turn"), into `labels.claims_by_trace`: a
    claim's hop is found by the text of the context that supports it, among the hops'
    documents."""
    from judge.metrics.evidence import Evidence
    from judge.traces.reading import read_results

    for row in read_results(results):
        trace_id = row.trace_id if row.trace_id is not None else row.id
        if trace_id is None:
            continue
        claims = Evidence(row.evidence).claims("answer")
        if claims is None:
            continue
        contexts = row.contexts or []
        judged = []
        for number, text in enumerate(claims.claims):
            verdict = next((v for v in claims.verdicts or () if v.claim == number), None)
            index = verdict.context if verdict is not None and verdict.ok else None
            if not isinstance(index, int) or isinstance(index, bool):
                index = None
            context = contexts[index] if index is not None and 0 <= index < len(contexts) else None
            judged.append(
                JudgedClaim(
                    text,
                    verdict.verdict if verdict is not None else "not_verified",
                    index,
                    _collapsed(context) if isinstance(context, str) else None,
                )
            )
        labels.claims_by_trace[str(trace_id)] = judged


def attribute_claims(trace: AgentTrace, claims: Sequence[JudgedClaim]) -> list[dict[str, Any]]:
    """Each claim with the hop whose documents supported it: the first hop that retrieved
    the document whose content is the supporting context's text (`hop` null, with a
    `reason`, for a claim not supported, or supported by a context no hop recorded)."""
    by_content: dict[str, tuple[str, int]] = {}
    for number, hop in enumerate(trace.hops, 1):
        for doc, content in hop.contents.items():
            by_content.setdefault(content, (doc, number))
    out = []
    for claim in claims:
        entry: dict[str, Any] = {
            "claim": claim.claim,
            "verdict": claim.verdict,
            "context": claim.context,
            "doc_id": None,
            "hop": None,
        }
        if claim.text is None:
            entry["reason"] = NOT_SUPPORTED
        elif claim.text in by_content:
            entry["doc_id"], entry["hop"] = by_content[claim.text]
        else:
            entry["reason"] = CONTEXT_NOT_IN_HOPS
        out.append(entry)
    return out


def _keep(table: dict[str, Any], key: str, value: Any, what: str, where: str) -> None:
    """Put a label in its table; the same key with other labels is an error."""
    if key in table and table[key] != value:
        raise InputFormatError(f"{what} {key!r} has two different labels", path=where)
    table[key] = value


def read_labels(
    *,
    qrels: PathLike | None = None,
    rows: PathLike | None = None,
    expected_tools: PathLike | None = None,
) -> Labels:
    """The labels of `judge traces hops`.

    Args:
        qrels: a TREC qrels file whose query ids are trace ids.
        rows: a test set (JSONL, JSON, CSV, Parquet, as `judge eval` reads it) with a
            question column and a relevance column (relevant ids, or {id: grade}) and/or an
            `expected_tools` column; a `trace_id` column, when present, keys a row by trace.
        expected_tools: JSON lines {"trace_id" (or "question"), "expected_tools": [...]}.
    """
    labels = Labels()
    if qrels is not None:
        from judge.ir.trec import read_qrels

        labels.relevance_by_trace.update(read_qrels(qrels))
    if rows is not None:
        _rows_labels(rows, labels)
    if expected_tools is not None:
        from judge.traces.reading import read_rows

        where = str(expected_tools)
        for number, record in enumerate(read_rows(expected_tools), 1):
            try:
                calls = parse_tool_calls(
                    record.get("expected_tools"), "expected_tools", strict=True
                )
            except ValueError as exc:
                raise InputFormatError(str(exc), path=where, line=number) from None
            if calls is None:
                raise InputFormatError(
                    "no expected_tools: give a list of {name, arguments}", path=where, line=number
                )
            if record.get("trace_id") is not None:
                _keep(labels.tools_by_trace, str(record["trace_id"]), calls, "trace", where)
            elif isinstance(record.get("question"), str):
                key = question_key(record["question"])
                _keep(labels.tools_by_question, key, calls, "question", where)
            else:
                raise InputFormatError(
                    "give the trace_id (or the question) the expected tools are for",
                    path=where,
                    line=number,
                )
    return labels


def _rows_labels(path: PathLike, labels: Labels) -> None:
    from judge.run.data import parse_relevance, read_records, resolve_columns

    records, source = read_records(path)
    names = dict.fromkeys(k for r in records for k in r)
    columns = resolve_columns(names, None, source)
    relevance_column = columns.get("relevance")
    tools_column = "expected_tools" if "expected_tools" in names else None
    if relevance_column is None and tools_column is None:
        raise InputFormatError(
            f"{source}: no relevance column (relevance, qrels, relevant_ids, "
            "reference_context_ids) nor expected_tools: nothing to score the traces with"
        )
    question_column = columns["question"]
    for number, record in enumerate(records, 1):
        question = record.get(question_column)
        trace_id = record.get("trace_id")
        if not isinstance(question, str) and trace_id is None:
            continue
        try:
            relevance = (
                parse_relevance(record[relevance_column])
                if relevance_column is not None and record.get(relevance_column) is not None
                else None
            )
            tools = (
                parse_tool_calls(record.get(tools_column), "expected_tools", strict=True)
                if tools_column is not None
                else None
            )
        except ValueError as exc:
            raise InputFormatError(f"row {number}: {exc}", path=source) from None
        for value, by_trace, by_question, what in (
            (relevance, labels.relevance_by_trace, labels.relevance_by_question, "relevance"),
            (tools, labels.tools_by_trace, labels.tools_by_question, "expected_tools"),
        ):
            if value is None:
                continue
            if trace_id is not None:
                _keep(by_trace, str(trace_id), value, f"{what} of trace", source)
            elif isinstance(question, str):
                _keep(by_question, question_key(question), value, f"{what} of question", source)


@dataclass
class HopRow:
    """One hop index's line of the table: the traces that have that hop, the metric means
    over them, and how many of those retrieved a gold document there."""

    hop: int
    traces: int
    metrics: dict[str, float]
    gold_found: int

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON values."""
        return {
            "hop": self.hop,
            "traces": self.traces,
            "gold_found": self.gold_found,
            "metrics": dict(self.metrics),
        }


@dataclass
class HopsReport:
    """What `hops` found: the table per hop index, counts, the diagnosis and tool scores
    summed over the traces, and the per-trace records when no `on_record` took them."""

    metrics: list[str]
    relevance_level: int
    per_hop: list[HopRow] = field(default_factory=list)
    traces: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    first_gold_hop: Counter[int | None] = field(default_factory=Counter)
    lost_at_hop: Counter[int] = field(default_factory=Counter)
    generator_saw_gold: Counter[bool | None] = field(default_factory=Counter)
    unknown_generator: Counter[str] = field(default_factory=Counter)
    claims_by_hop: Counter[int | str] = field(default_factory=Counter)
    tools: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON values (without the per-trace records)."""
        out: dict[str, Any] = {
            "metrics": list(self.metrics),
            "relevance_level": self.relevance_level,
            "per_hop": [row.to_dict() for row in self.per_hop],
            "counts": dict(sorted(self.counts.items())),
            "first_gold_hop": {
                "never" if k is None else str(k): v
                for k, v in sorted(self.first_gold_hop.items(), key=_none_last)
            },
            "lost_at_hop": {str(k): v for k, v in sorted(self.lost_at_hop.items())},
            "generator_saw_gold": {
                str(k).lower(): self.generator_saw_gold[k] for k in (True, False, None)
            },
            "generator_unknown": dict(sorted(self.unknown_generator.items())),
        }
        if self.claims_by_hop:
            out["claims_by_hop"] = {
                str(k): v for k, v in sorted(self.claims_by_hop.items(), key=lambda i: str(i[0]))
            }
        if self.tools is not None:
            out["tools"] = self.tools
        return out


def _none_last(item: tuple[int | None, int]) -> tuple[bool, int]:
    return item[0] is None, item[0] or 0


def _unfit(trace: AgentTrace) -> str | None:
    """Why a trace's ids cannot go in a TREC file (white space, control characters, empty):
    its message; None when they can."""
    try:
        check_trec_id(trace.trace_id, "the trace id")
        for hop in trace.hops:
            for doc in hop.ids:
                check_trec_id(doc, f"document id of trace {trace.trace_id}")
    except InputFormatError as exc:
        return str(exc)
    return None


def diagnose(trace: AgentTrace, gold: Iterable[str]) -> dict[str, Any]:
    """Where the trace's gold documents were found and lost, and whether the generator saw
    one: `first_gold_hop`, `lost_at_hop`, `lost` [{doc_id, hop}], `generator_saw_gold`,
    with `reasons` for the fields that are null (hops numbered from 1)."""
    gold_set = set(gold)
    reasons: dict[str, str] = {}
    out: dict[str, Any] = {"first_gold_hop": None, "lost_at_hop": None, "lost": []}
    last_hop: dict[str, int] = {}
    for number, hop in enumerate(trace.hops, 1):
        for doc in hop.ids:
            if doc in gold_set:
                if out["first_gold_hop"] is None:
                    out["first_gold_hop"] = number
                last_hop[doc] = number
    if not trace.hops:
        reasons["first_gold_hop"] = reasons["lost_at_hop"] = NO_HOPS
    elif out["first_gold_hop"] is None:
        reasons["first_gold_hop"] = reasons["lost_at_hop"] = NO_GOLD_RETRIEVED
    # What the generator saw of the gold: by the ids it lists, else by the gold documents'
    # contents in its prompt (those never retrieved have no content to look for).
    if trace.generator_ids is not None:
        seen_any: bool | None = bool(gold_set & set(trace.generator_ids))
    else:
        looked = [trace.generator_saw(doc) for doc in sorted(last_hop)]
        if trace.generator_text is None:
            seen_any = None
            reasons["generator_saw_gold"] = NO_GENERATOR_INPUT
        elif True in looked:
            seen_any = True
        elif None in looked or not looked:
            seen_any = None
            reasons["generator_saw_gold"] = NO_DOCUMENT_CONTENTS
        else:
            seen_any = False
    out["generator_saw_gold"] = seen_any
    if last_hop:
        unknown = None
        for doc, at in sorted(last_hop.items(), key=lambda item: (item[1], item[0])):
            saw = trace.generator_saw(doc)
            if saw is None:
                unknown = (
                    NO_GENERATOR_INPUT if trace.generator_text is None else NO_DOCUMENT_CONTENTS
                )
            elif not saw:
                out["lost"].append({"doc_id": doc, "hop": at})
        if out["lost"]:
            out["lost_at_hop"] = out["lost"][0]["hop"]
        else:
            reasons["lost_at_hop"] = unknown or NONE_LOST
    out["reasons"] = reasons
    return out


def hops(
    traces: Iterable[AgentTrace],
    labels: Labels,
    metrics: Sequence[str],
    *,
    relevance_level: int = 1,
    output: PathLike | None = None,
    trec_runs: PathLike | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    chunk: int = 4096,
) -> HopsReport:
    """Score every hop of every trace, diagnose each trace, and score its tool calls,
    streamed: the traces are scored a chunk at a time, memory holding the chunk and each
    hop's scores (8 bytes a metric and trace), not the traces.

    Args:
        traces: the traces (`read_agent_traces`).
        labels: the relevance labels and expected tool calls (`read_labels`).
        metrics: `judge.ir` metric names (`ndcg@10`, `recall@5`, ...).
        relevance_level: the smallest grade that counts as relevant (gold).
        output: a JSON-lines file where to write each trace's record (NaN as null), in
            the order read.
        trec_runs: a folder where to write, per hop N, `hop-N.run` (qid = the trace id,
            the hop's ranking) and `hop-N.qrels` (the labels of the traces that have hop
            N: `judge ir` on the two gives the table's line N), and `qrels` (every
            labelled trace: a trace without hop N scores 0 there, as trec_eval -c counts
            it). Hop files of an earlier report with more hops are removed.
        on_record: called with each trace's record, in the order read. Without `output`
            or `on_record`, the records are kept in the report's `traces`.
        chunk: traces scored at a time.

    Returns:
        A `HopsReport`: per hop index, the mean of each metric over the traces that have
        that hop (trec_eval's values: `judge ir` on the hop's run and qrels gives them);
        per trace, each hop's ids and scores, `first_gold_hop`, `lost_at_hop`, `lost`,
        `generator_saw_gold` and, with expected tools, the tool-call scores.
    """
    from judge.ir.measure_names import parse_measures

    if isinstance(relevance_level, bool) or not isinstance(relevance_level, int):
        raise JudgeError(f"relevance_level must be an integer, got {relevance_level!r}")
    names = [m.name for m in parse_measures(list(metrics))]
    report = HopsReport(names, relevance_level)
    state = _State(report, labels)
    with contextlib.ExitStack() as stack:
        files = stack.enter_context(_HopFiles(trec_runs)) if trec_runs is not None else None
        records = None
        if output is not None:
            # In the folder of the TREC files: that folder's lock is already held, here.
            folder = files.folder if files is not None else None
            if folder is not None and Path(output).parent.resolve() != folder.path.resolve():
                folder = None
            records = stack.enter_context(_Records(output, folder))
        sinks: list[Callable[[dict[str, Any]], None]] = []
        if on_record is not None:
            sinks.append(on_record)
        if records is not None:
            sinks.append(records.write)

        def emit(record: dict[str, Any]) -> None:
            for sink in sinks or [report.traces.append]:
                sink(record)

        pending: list[tuple[dict[str, Any], AgentTrace, dict[str, int] | None]] = []
        for trace in traces:
            pending.append(state.record(trace))
            if len(pending) >= chunk:
                _score_chunk(pending, state, files)
                for record, _, _ in pending:
                    emit(record)
                pending.clear()
        _score_chunk(pending, state, files)
        for record, _, _ in pending:
            emit(record)
        if records is not None:
            records.publish()
        if files is not None:
            files.publish(len(state.values))
    for number, values in enumerate(state.values, 1):
        count = len(values[names[0]])
        means = {name: math.fsum(values[name]) / count for name in names}  # as judge ir
        report.per_hop.append(HopRow(number, count, means, state.gold_found[number - 1]))
    if labels.has_tools:
        report.tools = state.tool_summary()
    return report


class _State:
    """What `hops` keeps across chunks: each hop's per-trace values, counts, tool scores."""

    def __init__(self, report: HopsReport, labels: Labels) -> None:
        self.report = report
        self.labels = labels
        self.values: list[dict[str, array[float]]] = []  # per hop: metric -> per trace
        self.gold_found: list[int] = []
        self.seen: set[str] = set()
        self.tool_values: dict[str, array[float]] = {name: array("d") for name in TOOL_METRICS}
        self.tool_reasons: dict[str, Counter[str]] = {name: Counter() for name in TOOL_METRICS}

    def record(self, trace: AgentTrace) -> tuple[dict[str, Any], AgentTrace, dict[str, int] | None]:
        """A trace's record, without its hops' scores; its relevance when it is scored."""
        report = self.report
        report.counts["traces"] += 1
        record: dict[str, Any] = {"trace_id": trace.trace_id, "question": trace.question}
        unfit = _unfit(trace)
        if unfit is None and trace.trace_id in self.seen:
            unfit = f"trace {trace.trace_id} was read before (its spans came too late)"
            record.update(skipped="duplicate_trace", message=unfit)
            report.counts["duplicate_trace"] += 1
            return record, trace, None
        if unfit is not None:
            report.counts["unfit_id"] += 1
            record.update(skipped="unfit_id", message=unfit)
            return record, trace, None
        self.seen.add(trace.trace_id)
        record["hops"] = [
            {"hop": n, "span_id": h.span_id, "name": h.name, "ids": h.ids}
            for n, h in enumerate(trace.hops, 1)
        ]
        relevance = self.labels.relevance(trace)
        if relevance is None:
            report.counts[NO_RELEVANCE_JUDGMENTS] += 1
            record["reasons"] = {"relevance": NO_RELEVANCE_JUDGMENTS}
        else:
            level = report.relevance_level
            gold = sorted(doc for doc, grade in relevance.items() if grade >= level)
            gold_set = set(gold)
            record["gold"] = gold
            record.update(diagnose(trace, gold))
            if not gold:
                record["reasons"]["relevance"] = NO_GOLD
            for entry in record["hops"]:
                entry["gold"] = [doc for doc in entry["ids"] if doc in gold_set]
            report.counts["labelled"] += 1
            report.first_gold_hop[record["first_gold_hop"]] += 1
            if record["lost_at_hop"] is not None:
                report.lost_at_hop[record["lost_at_hop"]] += 1
            report.generator_saw_gold[record["generator_saw_gold"]] += 1
            if record["generator_saw_gold"] is None:
                report.unknown_generator[record["reasons"]["generator_saw_gold"]] += 1
        if not trace.hops:
            report.counts[NO_HOPS] += 1
        judged = self.labels.claims_by_trace.get(trace.trace_id)
        if judged is not None:
            record["claims"] = attribute_claims(trace, judged)
            for claim in record["claims"]:
                report.claims_by_hop[claim["hop"] or claim["reason"]] += 1
        if self.labels.has_tools or trace.tool_calls:
            scores = score_tool_calls(trace.tool_calls, self.labels.expected_tools(trace))
            record["tools"] = scores.to_dict()
            if self.labels.has_tools:
                for name in TOOL_METRICS:
                    if name in scores.reasons:
                        self.tool_reasons[name][scores.reasons[name]] += 1
                    else:
                        self.tool_values[name].append(scores.scores[name])
        return record, trace, relevance

    def tool_summary(self) -> dict[str, Any]:
        """Each tool metric's mean over the traces where it is defined, their count, and
        the reasons of the others."""
        return {
            name: {
                "mean": math.fsum(values) / len(values) if values else None,
                "traces": len(values),
                "reasons": dict(sorted(self.tool_reasons[name].items())),
            }
            for name, values in self.tool_values.items()
        }


def _score_chunk(
    pending: Sequence[tuple[dict[str, Any], AgentTrace, dict[str, int] | None]],
    state: _State,
    files: _HopFiles | None,
) -> None:
    """Score a chunk's hops, a hop index at a time, into their records and the state."""
    from judge.ir.evaluate import score_queries

    labelled = [(record, trace, rel) for record, trace, rel in pending if rel is not None]
    if files is not None:
        for _, trace, relevance in labelled:
            files.qrels(0, trace.trace_id, relevance)
    names = state.report.metrics
    depth = max((len(trace.hops) for _, trace, _ in labelled), default=0)
    for n in range(depth):
        having = [(r, t, rel) for r, t, rel in labelled if len(t.hops) > n]
        qrels = {t.trace_id: rel for _, t, rel in having}
        ranked = {t.trace_id: _scored(t.hops[n].ids) for _, t, _ in having if t.hops[n].ids}
        scores = score_queries(qrels, ranked, names, relevance_level=state.report.relevance_level)
        place = {qid: i for i, qid in enumerate(scores.qids)}
        columns = {name: scores.values[name].tolist() for name in names}
        while len(state.values) <= n:
            state.values.append({name: array("d") for name in names})
            state.gold_found.append(0)
        for record, trace, relevance in having:
            i = place[trace.trace_id]
            values = {name: columns[name][i] for name in names}
            record["hops"][n]["metrics"] = values
            for name in names:
                state.values[n][name].append(values[name])
            state.gold_found[n] += bool(record["hops"][n]["gold"])
            if files is not None:
                files.qrels(n + 1, trace.trace_id, relevance)
                files.run(n + 1, trace.trace_id, trace.hops[n].ids)


def _scored(ids: Sequence[str]) -> dict[str, float]:
    """A ranking as run scores that keep its order (n, n-1, ...), as the TREC runs hold it."""
    return {doc: float(len(ids) - rank) for rank, doc in enumerate(ids)}


class _HopFiles:
    """The TREC files of `hops(trec_runs=...)`, written as the chunks are scored, under
    temporary names, and published whole at the end (`OutputFolder`)."""

    def __init__(self, folder: PathLike) -> None:
        from judge.run.output_folder import OutputFolder

        self.folder = OutputFolder(folder)
        self.stack = contextlib.ExitStack()
        self.handles: dict[str, IO[str]] = {}

    def __enter__(self) -> _HopFiles:
        self.stack.enter_context(self.folder)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def _handle(self, name: str) -> IO[str]:
        if name not in self.handles:
            path = self.stack.enter_context(self.folder.writing(name))
            handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 (the stack closes it)
            self.handles[name] = self.stack.enter_context(handle)
        return self.handles[name]

    def qrels(self, hop: int, trace_id: str, relevance: Mapping[str, int]) -> None:
        """A trace's labels into `qrels` (hop 0) or `hop-N.qrels`, docs sorted."""
        out = self._handle("qrels" if hop == 0 else f"hop-{hop}.qrels")
        for doc in sorted(relevance):
            check_trec_id(doc, f"judged document id of trace {trace_id}")
            out.write(f"{trace_id} 0 {doc} {int(relevance[doc])}\n")

    def run(self, hop: int, trace_id: str, ids: Sequence[str]) -> None:
        """A hop's ranking into `hop-N.run`."""
        from judge.traces.extract import write_run_lines

        out = self._handle(f"hop-{hop}.run")
        write_run_lines(out, trace_id, ids)

    def publish(self, depth: int) -> None:
        """Close the files, publish them, and remove the hop files of an earlier report
        with more hops (they would pass for this one's)."""
        self._handle("qrels")  # even when no trace is labelled: an empty file, not a stale one
        names = ["qrels"]
        for hop in range(1, depth + 1):
            self._handle(f"hop-{hop}.qrels")
            self._handle(f"hop-{hop}.run")  # a hop that found nothing: an empty run
            names += [f"hop-{hop}.qrels", f"hop-{hop}.run"]
        for handle in self.handles.values():
            handle.close()  # flushed (a full disk says so here), before the renames
        self.folder.publish(names)
        for stale in self.folder.path.glob("hop-*.*"):
            if stale.name not in names and re.fullmatch(r"hop-[0-9]+\.(run|qrels)", stale.name):
                stale.unlink()


class _Records:
    """The per-trace records as JSON lines (NaN as null), written under a temporary name
    and published whole at the end (`OutputFolder`)."""

    def __init__(self, path: PathLike, folder: OutputFolder | None = None) -> None:
        from judge.run.output_folder import OutputFolder

        self.path = Path(path)
        self.own = folder is None  # else the folder is open already, and closed by its owner
        self.folder = OutputFolder(self.path.parent) if folder is None else folder
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> _Records:
        from judge.json_values import dumps_nan_as_null

        if self.own:
            self.stack.enter_context(self.folder)
        temporary = self.stack.enter_context(self.folder.writing(self.path.name))
        self.handle = self.stack.enter_context(open(temporary, "w", encoding="utf-8"))
        self.dumps = dumps_nan_as_null
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def write(self, record: dict[str, Any]) -> None:
        """One record's line."""
        self.handle.write(self.dumps(record) + "\n")

    def publish(self) -> None:
        """Close the file and move it into place."""
        self.handle.close()
        self.folder.publish([self.path.name])


def hop_table(report: HopsReport, digits: int = 4) -> str:
    """The per-hop table as text: hop, traces, traces with a gold document there, means."""
    header = ["hop", "traces", "gold_found", *report.metrics]
    lines = [header]
    for row in report.per_hop:
        values = [f"{row.metrics[m]:.{digits}f}" for m in report.metrics]
        lines.append([str(row.hop), str(row.traces), str(row.gold_found), *values])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True))
        for line in lines
    )


def summary_lines(report: HopsReport) -> list[str]:
    """The diagnosis counted over the labelled traces, and the tool scores, as sentences."""
    out = []
    labelled = report.counts["labelled"]
    if labelled:
        first = report.first_gold_hop
        found = ", ".join(f"hop {h}: {n}" for h, n in sorted((k, v) for k, v in first.items() if k))
        out.append(
            f"first gold document retrieved at {found or 'no hop'}; never: {first[None]} "
            f"(of {labelled} labelled traces)"
        )
        if report.lost_at_hop:
            out.append(
                "gold document lost after "
                + ", ".join(f"hop {h}: {n}" for h, n in sorted(report.lost_at_hop.items()))
            )
        saw = report.generator_saw_gold
        unknown = ", ".join(f"{n} {r}" for r, n in sorted(report.unknown_generator.items()))
        out.append(
            f"the generator saw a gold document in {saw[True]} traces, not in {saw[False]}, "
            f"unknown in {saw[None]}" + (f" ({unknown})" if unknown else "")
        )
    for reason in (NO_RELEVANCE_JUDGMENTS, NO_HOPS, "unfit_id", "duplicate_trace"):
        if report.counts[reason]:
            out.append(f"{report.counts[reason]} traces: {reason}")
    if report.claims_by_hop:
        hops_of = sorted(k for k in report.claims_by_hop if isinstance(k, int))
        others = sorted(k for k in report.claims_by_hop if isinstance(k, str))
        out.append(
            "answer claims supported by "
            + ", ".join(
                [f"hop {h}: {report.claims_by_hop[h]}" for h in hops_of]
                + [f"{r}: {report.claims_by_hop[r]}" for r in others]
            )
        )
    if report.tools is not None:
        parts = []
        for name, entry in report.tools.items():
            mean = "–" if entry["mean"] is None else f"{entry['mean']:.4f}"
            parts.append(f"{name} {mean} (n={entry['traces']})")
        out.append("tool calls: " + ", ".join(parts))
    return out
