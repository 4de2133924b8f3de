"""The LLM-judged metrics of one sample, registered by name: judgments in, a score out.

A metric reads the judgments it needs from a sample's `SampleJudgments` (made once and shared)
and hands them to a pure scorer in `judge.metrics.scorers`. Undefined cases score NaN with a
machine-readable reason instead of 0 or an exception.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.conversations import CONVERSATION_REFERENCE, FINAL_TURN
from judge.errors import JudgeError, UnknownMetricError
from judge.ir.measure_names import (
    cutoff_of,
    did_you_mean,
    parse_measure,
    retrieval_names,
    valid_names,
)
from judge.metrics import findings, scorers, turns
from judge.metrics.evidence import ANSWER, TRUTH, Evidence
from judge.metrics.findings import Finding, FindingsOf
from judge.metrics.judgments import SampleJudgments
from judge.metrics.tools import (
    INVALID_TOOL_CALLS,
    NO_EXPECTED_TOOLS,
    TOOL_METRICS,
    row_tool_calls,
)

NAN = float("nan")

# NaN reasons, as values a report can count.
EMPTY_ANSWER = "empty_answer"
NO_CONTEXTS = "no_contexts"
NO_CLAIMS = "no_claims"
NO_GROUND_TRUTH = "no_ground_truth"
JUDGE_ERROR = "judge_error"
NO_CITATIONS = "no_citations"
NO_SENTENCES = "no_sentences"
NOT_A_TURN = "not_a_turn"  # a conversation metric on a row that is no conversation's turn
NO_HISTORY = "no_history"  # a turn with no earlier user message to keep
NO_QUERY = "no_query"  # a turn whose retriever query was not recorded
NOT_FINAL_TURN = "not_final_turn"  # a conversation-level metric on a turn before the last
NO_REFERENCE = "no_reference"  # a conversation with no expected outcome


@dataclass(frozen=True)
class MetricScore:
    """A metric's value; when NaN, why (`reason`) and, for failures, the message (`error`)."""

    value: float
    reason: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if math.isnan(self.value) and self.reason is None:
            raise ValueError("a NaN score needs a reason")


@dataclass(frozen=True)
class Metric:
    """A named metric: how to compute it from a sample's judgments, and what it needs."""

    name: str
    description: str
    compute: Callable[[SampleJudgments], Awaitable[MetricScore]]
    verifies_answer: bool = False  # needs the answer's claims verified against contexts
    verifies_truth: bool = False  # needs the ground truth's claims verified
    needs_embeddings: bool = False
    higher_is_better: bool = True
    variables: frozenset[str] = frozenset()  # sample fields or columns a custom prompt reads
    version: str = ""  # a custom prompt's version (the built-ins' are tracked by name)
    claims_of: frozenset[str] = frozenset()  # texts whose claims it needs: answer, truth
    # What its evidence says, for reports; by default a custom metric's judge reply.
    findings: FindingsOf = findings.reply_findings


def _blank(text: str | None) -> bool:
    return text is None or not text.strip()


def _from_verdicts(
    side: str, score: Callable[[list[str]], float], *, strict: bool = False
) -> Callable[[SampleJudgments], Awaitable[MetricScore]]:
    """A metric on the verdicts of one side's claims (the answer's or the ground truth's)
    against the contexts, NaN with a reason when there is nothing to judge; with `strict`
    (the answer's side), "supported" does not count for a claim naming a number or name
    that no context mentions."""
    text, missing = (
        ("answer", EMPTY_ANSWER) if side == "answer" else ("ground_truth", NO_GROUND_TRUTH)
    )

    async def compute(j: SampleJudgments) -> MetricScore:
        if _blank(getattr(j.sample, text)):
            return MetricScore(NAN, missing)
        if not j.sample.contexts and not (side == "answer" and _said_before(j)):
            return MetricScore(NAN, NO_CONTEXTS)
        answer_verdicts, truth_verdicts = await j.verdicts()
        verdicts = answer_verdicts if side == "answer" else truth_verdicts
        if not verdicts:
            return MetricScore(NAN, NO_CLAIMS)
        labels: list[str] = [v.verdict for v in verdicts]
        if strict:
            labels = scorers.strict_verdicts(labels, [bool(t) for t in await j.unsourced()])
        return MetricScore(score(labels))

    return compute


def _said_before(j: SampleJudgments) -> bool:
    """Whether a turn's conversation said anything before its question: evidence for its
    answer's claims even when the turn retrieved nothing."""
    return j.sample.in_conversation and turns.has_earlier_messages(j.sample.history)


async def _supported_by_history(j: SampleJudgments) -> MetricScore:
    if not j.sample.in_conversation:
        return MetricScore(NAN, NOT_A_TURN)
    if _blank(j.sample.answer):
        return MetricScore(NAN, EMPTY_ANSWER)
    answer_verdicts, _ = await j.verdicts()
    if not answer_verdicts:
        return MetricScore(NAN, NO_CLAIMS)
    return MetricScore(scorers.share(j.sources, turns.HISTORY))


async def _knowledge_retention(j: SampleJudgments) -> MetricScore:
    if not j.sample.in_conversation:
        return MetricScore(NAN, NOT_A_TURN)
    if _blank(j.sample.answer):
        return MetricScore(NAN, EMPTY_ANSWER)
    if not turns.earlier_user_messages(j.sample.history):
        return MetricScore(NAN, NO_HISTORY)
    verdicts = await j.retention()
    return MetricScore(scorers.knowledge_retention([v.verdict for v in verdicts]))


async def _query_rewrite_fidelity(j: SampleJudgments) -> MetricScore:
    if not j.sample.in_conversation:
        return MetricScore(NAN, NOT_A_TURN)
    if turns.retriever_query(j.sample.extra) is None:
        return MetricScore(NAN, NO_QUERY)
    checked = await j.query_rewrite()
    return MetricScore(float(checked.verdict == "faithful"))


async def _goal_accuracy(j: SampleJudgments) -> MetricScore:
    s = j.sample
    if not s.in_conversation:
        return MetricScore(NAN, NOT_A_TURN)
    if s.extra.get(FINAL_TURN) is not True:
        return MetricScore(NAN, NOT_FINAL_TURN)
    outcome = s.extra.get(CONVERSATION_REFERENCE)
    if not isinstance(outcome, str) or not outcome.strip():
        return MetricScore(NAN, NO_REFERENCE)
    checked = await j.goal()
    return MetricScore(float(checked.verdict == "achieved"))


async def _trajectory_accuracy(j: SampleJudgments) -> MetricScore:
    try:
        called, expected = row_tool_calls(j.sample.extra)
    except ValueError:
        return MetricScore(NAN, INVALID_TOOL_CALLS)
    if expected is None:
        return MetricScore(NAN, NO_EXPECTED_TOOLS)
    verdict = await j.trajectory(called or [], expected)
    return MetricScore(scorers.trajectory_accuracy(verdict))


async def _answer_relevancy(j: SampleJudgments) -> MetricScore:
    if _blank(j.sample.answer):
        return MetricScore(NAN, EMPTY_ANSWER)
    generated, similarities = await j.reverse()
    return MetricScore(scorers.answer_relevancy(similarities, noncommittal=generated.noncommittal))


async def _answer_correctness(j: SampleJudgments) -> MetricScore:
    if _blank(j.sample.answer):
        return MetricScore(NAN, EMPTY_ANSWER)
    if _blank(j.sample.ground_truth):
        return MetricScore(NAN, NO_GROUND_TRUTH)
    precision, recall = await j.correctness()
    if not precision and not recall:
        # A claim-less answer ("I don't know") recalls none of the ground truth: 0. A
        # ground truth without claims leaves nothing to be correct about: undefined.
        truth_has_claims = bool(await j.truth_claims())
        answer_has_claims = bool(await j.answer_claims())
        if truth_has_claims and not answer_has_claims:
            return MetricScore(0.0)
        return MetricScore(NAN, NO_CLAIMS)
    return MetricScore(
        scorers.claims_f1([v.verdict for v in precision], [v.verdict for v in recall])
    )


async def _citation_accuracy(j: SampleJudgments) -> MetricScore:
    if _blank(j.sample.answer):
        return MetricScore(NAN, EMPTY_ANSWER)
    found, checks = await j.citations()
    if not found:
        return MetricScore(NAN, NO_CITATIONS)
    # A marker naming no context ([7] with 5 contexts) is a wrong citation, judged free.
    supported = iter(c.supported for c in checks)
    return MetricScore(
        scorers.citation_accuracy([c.context is not None and next(supported) for c in found])
    )


def _from_grades(
    score: Callable[[list[int]], float],
) -> Callable[[SampleJudgments], Awaitable[MetricScore]]:
    async def compute(j: SampleJudgments) -> MetricScore:
        if not j.sample.contexts:
            return MetricScore(NAN, NO_CONTEXTS)
        grades = await j.context_grades()
        return MetricScore(score([g.grade for g in grades]))

    return compute


async def _context_focus(j: SampleJudgments) -> MetricScore:
    if not j.sample.contexts:
        return MetricScore(NAN, NO_CONTEXTS)
    total, needed = await j.needed_sentences()
    if not total:
        return MetricScore(NAN, NO_SENTENCES)
    return MetricScore(scorers.context_focus(len(needed), total))


def relevant(grades: list[int]) -> list[bool]:
    """Which contexts count as relevant by their grades 0-3."""
    return [g >= 2 for g in grades]  # grade 2 (partly answers) and 3 (answers) are relevant


BUILTIN: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "faithfulness",
            "answer claims supported by the contexts / all answer claims",
            _from_verdicts("answer", scorers.faithfulness),
            verifies_answer=True,
            claims_of=frozenset({"answer"}),
            findings=findings.claims_findings(ANSWER),
        ),
        Metric(
            "faithfulness_strict",
            "faithfulness where a claim naming a number or name that no context mentions "
            "counts as unsupported, whatever the judge said (no extra request)",
            _from_verdicts("answer", scorers.faithfulness, strict=True),
            verifies_answer=True,
            claims_of=frozenset({"answer"}),
            findings=findings.verdicts_and_unsourced,
        ),
        Metric(
            "answer_relevancy",
            "mean cosine similarity of the question to questions generated from the answer; "
            "0 for a noncommittal answer",
            _answer_relevancy,
            needs_embeddings=True,
            findings=findings.reverse_findings,
        ),
        Metric(
            "context_precision",
            "rank-weighted precision of the contexts judged relevant (grade >= 2)",
            _from_grades(lambda g: scorers.context_precision(relevant(g))),
            findings=findings.grades_findings,
        ),
        Metric(
            "context_recall",
            "ground-truth claims supported by the contexts / all ground-truth claims",
            _from_verdicts("truth", scorers.context_recall),
            verifies_truth=True,
            claims_of=frozenset({"truth"}),
            findings=findings.claims_findings(TRUTH),
        ),
        Metric(
            "context_relevance",
            "share of the contexts judged relevant (grade >= 2)",
            _from_grades(lambda g: scorers.context_relevance(relevant(g))),
            findings=findings.grades_findings,
        ),
        Metric(
            "context_focus",
            "share of the contexts' sentences needed to answer the question (or to support "
            "the reference): text that does not help lowers it; one request",
            _context_focus,
            findings=findings.focus_findings,
        ),
        Metric(
            "answer_correctness",
            "F1 of answer claims supported by the ground truth and ground-truth claims "
            "supported by the answer",
            _answer_correctness,
            claims_of=frozenset({"answer", "truth"}),
            findings=findings.correctness_findings,
        ),
        Metric(
            "hallucination_rate",
            "1 if any answer claim is contradicted by or absent from the contexts (the mean "
            "over samples is the share of answers that hallucinate); lower is better",
            _from_verdicts("answer", scorers.hallucinated),
            verifies_answer=True,
            higher_is_better=False,
            claims_of=frozenset({"answer"}),
            findings=findings.claims_findings(ANSWER),
        ),
        Metric(
            "citation_accuracy",
            "share of the answer's citations [n] whose context n supports the citing statement",
            _citation_accuracy,
            findings=findings.citation_findings,
        ),
        Metric(
            "supported_by_history",
            "share of a conversation turn's answer claims supported by the conversation before "
            "it (what the user said, earlier supported answers) rather than by the turn's "
            "contexts; no extra request beyond faithfulness",
            _supported_by_history,
            verifies_answer=True,
            higher_is_better=False,
            claims_of=frozenset({"answer"}),
            findings=findings.claims_findings(ANSWER),
        ),
        Metric(
            "knowledge_retention",
            "1 if a conversation turn's answer neither contradicts nor asks again for what the "
            "user stated in earlier messages, else 0 (the mean is the share of turns that keep "
            "it); one request per turn",
            _knowledge_retention,
            findings=findings.retention_findings,
        ),
        Metric(
            "query_rewrite_fidelity",
            "1 if a conversation turn's recorded retriever query (`query`) asks for what the "
            "user's message asks, with its references resolved from the conversation, else 0; "
            "one request per turn",
            _query_rewrite_fidelity,
            findings=findings.query_rewrite_findings,
        ),
        Metric(
            "goal_accuracy",
            "on a conversation's final turn, 1 if the whole conversation reached its expected "
            "outcome (`reference` of the conversation), else 0; one request per conversation",
            _goal_accuracy,
            findings=findings.goal_findings,
        ),
        Metric(
            "trajectory_accuracy",
            "1 if the tool calls made (`tools_called`) serve the user's goal as the expected "
            "ones (`expected_tools`) would, else 0: the same calls are 1 and no call where "
            "calls were expected is 0 with no request; calls that differ are judged (one "
            "request)",
            _trajectory_accuracy,
            findings=findings.trajectory_findings,
        ),
        Metric(
            "context_ndcg",
            "nDCG of the retrieved order from the judged grades 0-3 (add @k for a cutoff)",
            _from_grades(scorers.context_ndcg),
            findings=findings.grades_findings,
        ),
    )
}

DEFAULT_METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")


def get_metric(name: str) -> Metric:
    """The metric registered under `name` (`context_ndcg@k` for any positive k)."""
    if name in BUILTIN:
        return BUILTIN[name]
    k = cutoff_of(name, "context_ndcg")
    if k is not None:
        base = BUILTIN["context_ndcg"]
        return Metric(
            name,
            base.description,
            _from_grades(lambda g: scorers.context_ndcg(g, k)),
            findings=base.findings,
        )
    raise unknown_metric(name)


def unknown_metric(name: str, others: Iterable[str] = ()) -> UnknownMetricError:
    """The error for a name no metric has: the known name closest to it (LLM-judged,
    retrieval, and `others` such as plugins'), else every valid name."""
    others = list(others)
    given = name.rpartition("@")[2] if "@" in name else ""
    ndcg = [f"context_ndcg@{given}"] if given.isdigit() and int(given) > 0 else []
    close = did_you_mean(name, [*BUILTIN, *ndcg, *TOOL_METRICS, *others, *retrieval_names(name)])
    if close is not None:
        return UnknownMetricError(f"unknown metric {name!r}; did you mean {close!r}?")
    valid = ", ".join([*BUILTIN, "context_ndcg@k", *TOOL_METRICS, *others, *valid_names()])
    return UnknownMetricError(
        f"unknown metric {name!r}; valid names: {valid} (k a positive integer)"
    )


def metric_range(name: str) -> tuple[float, float] | None:
    """The range every score of the metric lies in: (0, 1) for the LLM-judged built-ins
    (shares, 0/1 verdicts, nDCG) but answer_relevancy (a cosine similarity, which can fall
    below 0), the tool-call metrics and the retrieval metrics (`ndcg@10`, `mrr`); None for
    any other name (a custom metric may score on any scale)."""
    if name in TOOL_METRICS:
        return (0.0, 1.0)
    try:
        metric = get_metric(name)
    except UnknownMetricError:
        try:
            parse_measure(name)
        except JudgeError:
            return None
        return (0.0, 1.0)
    return None if metric.name == "answer_relevancy" else (0.0, 1.0)


def higher_is_better(name: str) -> bool:
    """The good direction of a metric (retrieval metrics and unknown names: up)."""
    try:
        return get_metric(name).higher_is_better
    except UnknownMetricError:
        return True


def findings_of(
    metric: str | Metric, evidence: Mapping[str, Any] | None, contexts: Sequence[str] = ()
) -> list[Finding]:
    """What a row's evidence says about one metric's score, as findings to format.

    Args:
        metric: the metric, or its name (a built-in's findings; any other name, a custom
            metric of a run read back, gets the default: its judge's reply).
        evidence: the row's evidence object (`ResultRow.evidence`).
        contexts: the row's contexts, quoted beside their grades.
    """
    if isinstance(metric, str):
        name = metric
        try:
            metric = get_metric(name)
        except UnknownMetricError:
            return findings.reply_findings(name, Evidence(evidence), contexts)
    return metric.findings(metric.name, Evidence(evidence), contexts)
