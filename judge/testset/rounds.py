"""The rounds of a build: generate, check, critique, pool and grade, for a batch of seeds.

Calls within a step run concurrently; their results are then taken in seed order, so the
outcome does not depend on which call finished first. A call that fails (invalid output
after re-asking, a provider failure after retries, a request too long) or that the budget
does not allow rejects its question with the reason; configuration errors stop the build.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TypeVar

import numpy as np

from judge.aio import gather_or_cancel
from judge.errors import JudgeError
from judge.llm.session import LLMSession
from judge.testset.checks import Candidate, CheckFailed, Deduplicator, check_draft
from judge.testset.corpus import Chunk, Corpus
from judge.testset.failures import CallFailed, settle
from judge.testset.generate import Draft, generate
from judge.testset.index import Index, pool
from judge.testset.items import QUESTION_TYPES, QuestionType, Rejected, TestsetItem
from judge.testset.make_item import make_item
from judge.testset.review_calls import critic_failure, critique, grade_pool
from judge.testset.sampling import SeedPool
from judge.testset.text import jaccard, shingles

T = TypeVar("T")
PARTNER_DEPTH = 50  # BM25 neighbours searched for a multi-hop partner
PARTNER_NEAR_COPY = 0.9  # trigram Jaccard above which a neighbour is a copy, not a partner
DENSE_DUPLICATE = 0.95  # cosine of two question embeddings: the same question reworded


class BudgetReached(JudgeError):
    """Raised inside a question's pipeline when the spending limit is reached."""


class Builder:
    """The state of one build: seeds, accepted items, rejections, the budget."""

    def __init__(
        self,
        session: LLMSession,
        corpus: Corpus,
        index: Index,
        seed: int,
        depth: int,
        budget: float | None,
    ):
        self.session, self.corpus, self.index = session, corpus, index
        self.seed, self.depth, self.budget = seed, depth, budget
        self.seeds = SeedPool(corpus.seeds, seed)
        self.dedup = Deduplicator()
        self.items: list[tuple[tuple[int, int], TestsetItem]] = []
        self.rejected: list[Rejected] = []
        self.budget_reached = False
        self.vectors: list[tuple[np.ndarray, str]] = []  # unit question vectors, and names
        self._order = 0
        llm = session.llm
        self._slots = asyncio.Semaphore(llm.max_concurrency if llm is not None else 1)

    async def run(
        self,
        requested: Mapping[QuestionType, int],
        max_rounds: int,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        """Rounds until every type has its count, the seeds run out or the budget is spent;
        `progress` gets a line after each round."""
        done: dict[str, int] = dict.fromkeys(requested, 0)
        for number in range(1, max_rounds + 1):
            tasks: list[tuple[QuestionType, tuple[Chunk, ...]]] = []
            for qtype in QUESTION_TYPES:
                missing = requested.get(qtype, 0) - done.get(qtype, 0)
                for chunk in self.seeds.take(qtype, missing) if missing > 0 else []:
                    chunks = self._with_partner(chunk) if qtype == "multi_hop" else (chunk,)
                    if chunks is None:
                        why = f"none of the {PARTNER_DEPTH} nearest chunks by BM25 will do"
                        self._reject(qtype, (chunk,), "no_multi_hop_partner", why)
                    else:
                        tasks.append((qtype, chunks))
            if not tasks or self.budget_reached:
                return
            for item in await self._round(tasks):
                done[item.type] += 1
            if progress is not None:
                spent = self.session.usage.total()
                progress(
                    f"round {number}: {sum(done.values())}/{sum(requested.values())} questions "
                    f"accepted, {len(self.rejected)} drafts rejected, {spent.requests} requests, "
                    f"{spent.cache_hits} cache hits"
                )

    def _with_partner(self, seed: Chunk) -> tuple[Chunk, Chunk] | None:
        """The seed and its closest other chunk by BM25 that is neither thin nor a near copy
        of it (a copy adds no second fact)."""
        own = shingles(seed.text)
        for position in self.index.bm25(seed.text, PARTNER_DEPTH):
            other = self.corpus.chunks[position]
            if (
                other.chunk_id != seed.chunk_id
                and other.thin is None
                and jaccard(own, shingles(other.text)) < PARTNER_NEAR_COPY
            ):
                return seed, other
        return None

    async def _guarded(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run one call unless the budget is spent."""
        if self.budget is None:
            return await make()
        # The budget is read when a slot frees, not when the call is queued: a round's calls
        # are queued at once, and only those in flight (at most the concurrency) overshoot.
        async with self._slots:
            self._check_budget()
            return await make()

    def _check_budget(self) -> None:
        """Raise BudgetReached (or refuse an unpriced server) when nothing more may be spent."""
        if self.budget is not None:
            spent = self.session.usage.total()
            if spent.unpriced_requests:
                raise JudgeError(
                    "--budget: this server's replies have no known price (a local or "
                    "self-hosted server), so the spending cannot be counted; drop --budget. "
                    "The calls made so far are cached: rerunning without it resumes them"
                )
            if spent.known_cost >= self.budget:
                self.budget_reached = True
                raise BudgetReached("budget reached")

    async def _round(
        self, tasks: list[tuple[QuestionType, tuple[Chunk, ...]]]
    ) -> list[TestsetItem]:
        drafts = await self._gather(
            [partial(generate, self.session, t, c) for t, c in tasks], tasks
        )
        candidates: list[Candidate] = []
        for (qtype, chunks), draft in zip(tasks, drafts, strict=True):
            if draft is None:
                continue
            try:
                candidate = check_draft(draft)
                self.dedup.check(candidate.question, _name(chunks))
                candidate.checks["duplicates"] = "pass"
            except CheckFailed as failed:
                self._reject(qtype, chunks, failed.reason, failed.detail, draft)
                continue
            candidates.append(candidate)
        candidates = await self._dense_duplicates(candidates)
        work = [(c.draft.type, c.draft.chunks) for c in candidates]
        critiques = await self._gather(
            [partial(critique, self.session, c) for c in candidates], work
        )
        passed = []
        for candidate, review in zip(candidates, critiques, strict=True):
            if review is None:
                continue
            failure = critic_failure(candidate, review)
            if failure is not None:
                self._reject(
                    candidate.draft.type,
                    candidate.draft.chunks,
                    failure,
                    review.reason,
                    candidate.draft,
                )
                continue
            candidate.checks["critic"] = "pass"
            passed.append(candidate)
        vectors = [c.vector for c in passed]
        pools = [
            pool(self.index, c.question, self.depth, v, {g.chunk_id for g in c.gold})
            for c, v in zip(passed, vectors, strict=True)
        ]
        texts = [[self.corpus.chunks[p].text for p in taken] for taken in pools]
        grades = await self._gather(
            [partial(grade_pool, self.session, c, t) for c, t in zip(passed, texts, strict=True)],
            [(c.draft.type, c.draft.chunks) for c in passed],
        )
        made = []
        for candidate, positions, graded, vector in zip(
            passed, pools, grades, vectors, strict=True
        ):
            if graded is None:
                continue
            result = make_item(
                self.index, candidate, positions, graded, vector, self.seed, self.session.llm
            )
            if isinstance(result, str):
                self._reject(
                    candidate.draft.type, candidate.draft.chunks, result, "", candidate.draft
                )
                continue
            self.items.append(((QUESTION_TYPES.index(result.type), self._next()), result))
            made.append(result)
        return made

    def _next(self) -> int:
        self._order += 1
        return self._order

    async def _dense_duplicates(self, candidates: list[Candidate]) -> list[Candidate]:
        """With an embedding model: embed the questions (one batched request, kept for
        pooling) and reject those whose cosine with an accepted or earlier question is
        DENSE_DUPLICATE or more, which shared characters alone miss (rewordings)."""
        if not self.index.dense or not candidates:
            return candidates
        found = await self.session.embed(
            [c.question for c in candidates], label="testset_embeddings"
        )
        kept = []
        for candidate, vector in zip(candidates, found, strict=True):
            unit = _unit(vector)
            twin = next(
                (
                    (name, float(unit @ v))
                    for v, name in self.vectors
                    if unit @ v >= DENSE_DUPLICATE
                ),
                None,
            )
            if twin is not None:
                detail = f"cosine {twin[1]:.3f} with the question {twin[0]}"
                self._reject(
                    candidate.draft.type,
                    candidate.draft.chunks,
                    "near_duplicate",
                    detail,
                    candidate.draft,
                )
                continue
            candidate.vector = vector
            kept.append(candidate)
            self.vectors.append((unit, _name(candidate.draft.chunks)))
        return kept

    async def _gather(
        self,
        calls: list[Callable[[], Awaitable[T]]],
        work: list[tuple[QuestionType, tuple[Chunk, ...]]],
    ) -> list[T | None]:
        """Run calls concurrently; a failed or unbudgeted one is rejected and gives None."""

        async def one(
            call: Callable[[], Awaitable[T]], qtype: QuestionType, chunks: tuple[Chunk, ...]
        ) -> T | None:
            try:
                outcome = await settle(self._guarded(call))
            except BudgetReached:
                self._reject(qtype, chunks, "budget_reached", "stopped before this call")
                return None
            if isinstance(outcome, CallFailed):
                self._reject(qtype, chunks, outcome.reason, outcome.detail)
                return None
            return outcome

        # A configuration error stops the build: the other calls are cancelled, not left
        # running against a session about to close.
        return await gather_or_cancel(one(c, t, ch) for c, (t, ch) in zip(calls, work, strict=True))

    def _reject(
        self,
        qtype: QuestionType,
        chunks: tuple[Chunk, ...],
        reason: str,
        detail: str,
        draft: Draft | None = None,
    ) -> None:
        reply = draft.reply if draft is not None else None
        # A rejected question blocks no later one.
        self.dedup.forget(_name(chunks))
        self.vectors = [(v, name) for v, name in self.vectors if name != _name(chunks)]
        self.rejected.append(
            Rejected(
                type=qtype,
                seed_chunk_ids=[c.chunk_id for c in chunks],
                reason=reason,
                detail=detail,
                question=getattr(reply, "question", None),
                reference=getattr(reply, "answer", None),
            )
        )


def _unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def _name(chunks: tuple[Chunk, ...]) -> str:
    """How a question is named in duplicate reasons: by its seed chunk."""
    return f"the question from chunk {chunks[0].chunk_id}"
