"""`judge.score`: the LLM-judged metrics of one sample, with the evidence behind them."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge import aio
from judge.aio import sync_twin
from judge.cache.store import Cache
from judge.errors import CacheStoreError, JudgeError, LLMConfigError
from judge.llm.config import LLM, Embeddings
from judge.llm.judge import Judge
from judge.llm.session import LLMSession
from judge.llm.usage import UsageLedger
from judge.metrics.judgments import Conversations, SampleJudgments
from judge.metrics.prompts import Prompt
from judge.metrics.registry import JUDGE_ERROR, Metric, MetricScore
from judge.metrics.resolve import MetricLike, resolve_metrics
from judge.samples import Sample


@dataclass
class SampleResult:
    """Scores of one sample, why any is NaN, the judgments behind them, and what it cost."""

    sample: Sample
    scores: dict[str, float]
    reasons: dict[str, str] = field(default_factory=dict)  # metric -> NaN reason
    errors: dict[str, str] = field(default_factory=dict)  # metric -> judge failure message
    evidence: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    # metric -> its good direction, from the metrics scored (a custom one's too)
    higher_is_better: dict[str, bool] = field(default_factory=dict)

    def __getitem__(self, metric: str) -> float:
        return self.scores[metric]


def judge_models(
    llm: LLM | LLMSession | None,
    embeddings: Embeddings | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
) -> tuple[LLM | None, Embeddings | None]:
    """The judge and embedding models the user's arguments name, checked before anything
    is opened (a session passed in brings its own)."""
    if llm is None:
        return None, None
    if isinstance(llm, LLMSession):
        given = [name for name, value in (("embeddings", embeddings), ("cache", cache)) if value]
        if given:
            raise JudgeError(
                f"{' and '.join(given)} cannot be given beside an LLMSession, which has its own: "
                f"pass them to LLMSession(...) instead"
            )
        return llm.llm, llm.embeddings
    if not isinstance(llm, LLM):
        raise JudgeError("llm must be judge.LLM(model=...) (or an LLMSession); there is no default")
    return llm, embeddings


def make_session(
    llm: LLM | LLMSession,
    embeddings: Embeddings | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
) -> LLMSession:
    """An LLMSession from the user's arguments (a session passed in is used as it is)."""
    if llm is None:
        raise JudgeError("llm must be judge.LLM(model=...) (or an LLMSession); there is no default")
    judge_models(llm, embeddings, cache)
    if isinstance(llm, LLMSession):
        return llm
    if cache is not None and not isinstance(cache, Cache):
        cache = Cache(cache)
    return LLMSession(llm, embeddings=embeddings, cache=cache)


async def score_sample(
    sample: Sample,
    metrics: list[Metric],
    session: Judge,
    *,
    reverse_n: int = 3,
    prompts: Mapping[str, Prompt] | None = None,
    conversations: Conversations | None = None,
) -> SampleResult:
    """Compute metrics on one sample; a failing judge gives NaN with its error, not a crash,
    except a configuration error (`LLMConfigError`), which is raised. `prompts` are the
    run's built-in prompts (`load_prompts()`); those missing are read when used."""
    usage = UsageLedger()
    judgments = SampleJudgments(
        sample,
        session,
        verify_answer=any(m.verifies_answer for m in metrics),
        verify_truth=any(m.verifies_truth for m in metrics),
        claim_texts=frozenset().union(*(m.claims_of for m in metrics)),
        reverse_n=reverse_n,
        ledger=usage,
        prompts=prompts or {},
    )
    if conversations is not None and sample.in_conversation:
        judgments.earlier = conversations

    async def one(metric: Metric) -> MetricScore:
        try:
            return await metric.compute(judgments)
        except (LLMConfigError, CacheStoreError):
            raise  # no judge of any sample can work: stop, rather than a NaN per metric and row
        except JudgeError as exc:
            return MetricScore(math.nan, JUDGE_ERROR, f"{type(exc).__name__}: {exc}")

    outcomes = await aio.gather_or_cancel(
        [
            aio.start_eagerly(one(m)) if _builtin(m) else asyncio.ensure_future(one(m))
            for m in metrics
        ]
    )
    result = SampleResult(sample, {}, evidence=judgments.evidence)
    for metric, outcome in zip(metrics, outcomes, strict=True):
        result.scores[metric.name] = outcome.value
        result.higher_is_better[metric.name] = metric.higher_is_better
        if outcome.reason is not None:
            result.reasons[metric.name] = outcome.reason
        if outcome.error is not None:
            result.errors[metric.name] = outcome.error
    total = usage.total()
    result.usage = {
        "total": total.as_dict(),
        "by_judge": {k: v.as_dict() for k, v in sorted(usage.by_label.items())},
    }
    return result


def _builtin(metric: Metric) -> bool:
    """Whether judge's own code computes the metric, so it may be started eagerly (up to
    its first wait, inside the caller's task): a user's compute might enter something that
    belongs to one task, such as a timeout, before it first waits."""
    return (getattr(metric.compute, "__module__", None) or "").startswith("judge.metrics.")


async def ascore(
    question: str,
    answer: str | None = None,
    contexts: Sequence[str] = (),
    ground_truth: str | None = None,
    *,
    metrics: Sequence[MetricLike] | None = None,
    llm: LLM | LLMSession,
    embeddings: Embeddings | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
    sample_id: str | None = None,
) -> SampleResult:
    """Score one RAG sample with LLM-judged metrics (`score` from sync code, `ascore`
    awaited).

    Args:
        question: the user's question.
        answer: the generated answer.
        contexts: the retrieved contexts, in retrieval order.
        ground_truth: the reference answer, if any (needed by context_recall).
        metrics: metric names; default faithfulness, answer_relevancy (when embeddings
            are given), context_precision and context_recall.
        llm: the judge model, `judge.LLM(model=...)`; there is no default model.
        embeddings: the embedding model, `judge.Embeddings(model=...)`.
        cache: a `judge.Cache` or a path to one; judgments are looked up there first.
        sample_id: an id shown in error messages.

    Returns:
        A `SampleResult`: `scores` per metric (NaN when undefined, with `reasons`),
        `errors` of failed judges, the `evidence` (claims, verdicts with reasons, reverse
        questions and similarities, context grades) and the `usage` (requests, cache hits,
        tokens, cost; cost None when the model's price is unknown).

    Raises:
        judge.errors.LLMConfigError: the API key is missing or refused, the model is
            unknown, or no server answers at `api_base`; the message says what to fix.
    """
    sample = Sample.create(question, answer, contexts, ground_truth, sample_id)
    session = make_session(llm, embeddings, cache)
    try:
        chosen = resolve_metrics(metrics, embeddings=session.embeddings is not None)
        return await score_sample(sample, chosen, session)
    finally:
        if session is not llm:  # ours: close its connections before the loop ends
            await session.aclose()


score = sync_twin(ascore)
