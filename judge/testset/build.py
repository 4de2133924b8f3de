"""`judge.testset.build`: a golden test set from a corpus, in rounds of generate, check,
critique and pool.

Per question: one generation call, local checks (no call), one critic call, one listwise
grading call of the pooled chunks: three calls for an accepted question. Questions
rejected in a round are replaced from fresh seeds in the next (at most `max_rounds`), so
exactly `n` come out unless the corpus, the rounds or the budget run out; the shortfall
is reported by type. Results are ordered by type, then by seed order, so the same corpus,
seed and cache give the same test set, byte for byte.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from judge.errors import ContextWindowError, InvalidOutputError, JudgeError, LLMCallError
from judge.llm.cache import Cache
from judge.llm.config import LLM, Embeddings
from judge.llm.session import LLMSession
from judge.testset.checks import Candidate, CheckFailed, Deduplicator, check_draft
from judge.testset.corpus import Chunk, Corpus, load_corpus
from judge.testset.estimate import require_price
from judge.testset.generate import Draft, generate, prompt_name
from judge.testset.index import DIFFICULTY_DEPTH, Index
from judge.testset.items import QUESTION_TYPES, QuestionType, Rejected, TestsetItem
from judge.testset.make_item import make_item, pool_positions
from judge.testset.review_calls import critic_failure, critique, grade_pool
from judge.testset.sampling import SeedPool, allocate, parse_mix
from judge.testset.split import DEFAULT_CHUNK_SIZE
from judge.testset.text import jaccard, shingles

T = TypeVar("T")
DEFAULT_POOL_DEPTH = 10  # candidates graded per question, besides the gold chunks
MAX_ROUNDS = 3


class BudgetReached(JudgeError):
    """Raised inside a question's pipeline when the spending limit is reached."""


@dataclass
class BuildResult:
    """A built test set: accepted items, rejected drafts, counts, usage and configuration."""

    items: list[TestsetItem]
    rejected: list[Rejected]
    corpus: Corpus
    requested: dict[QuestionType, int]
    config: dict[str, Any]
    usage: dict[str, Any]
    budget_reached: bool = False
    accepted: dict[QuestionType, int] = field(init=False)

    def __post_init__(self) -> None:
        self.accepted = {t: sum(i.type == t for i in self.items) for t in self.requested}

    @property
    def shortfall(self) -> dict[QuestionType, int]:
        """Questions asked for but not delivered, by type (only types short of their count)."""
        return {t: c - self.accepted[t] for t, c in self.requested.items() if self.accepted[t] < c}

    def write(self, out: str | os.PathLike[str]) -> None:
        """Write testset.jsonl, qrels.txt, qrels_docs.txt, queries.tsv, chunks.jsonl,
        rejected.jsonl and manifest.json to the folder `out`."""
        from judge.testset.outputs import write_outputs

        write_outputs(self, out)


def check_request(
    corpus: Corpus, n: int, mix: Mapping[QuestionType, float]
) -> dict[QuestionType, int]:
    """Questions per type; a JudgeError when `n` is impossible for the corpus."""
    if n < 1:
        raise JudgeError(f"-n {n}: ask for at least one question")
    seeds = len(corpus.seeds)
    if n > seeds:
        raise JudgeError(
            f"-n {n} is more than the corpus can supply: {seeds} of its {len(corpus.chunks)} "
            "chunks can seed a question (one question per seed chunk; the others are thin). "
            "Ask for fewer, or give a larger corpus"
        )
    return allocate(n, mix)


async def abuild(
    corpus: Corpus | str | os.PathLike[str],
    *,
    llm: LLM,
    n: int,
    mix: str | Mapping[str, float] | None = None,
    seed: int = 0,
    embeddings: Embeddings | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
    column_map: Mapping[str, str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    pool_depth: int = DEFAULT_POOL_DEPTH,
    budget: float | None = None,
    max_rounds: int = MAX_ROUNDS,
) -> BuildResult:
    """Build a golden test set (async form of `build`, which documents the arguments)."""
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus, column_map=column_map, chunk_size=chunk_size)
    mixture = parse_mix(mix)
    requested = check_request(corpus, n, mixture)
    if budget is not None:
        require_price(llm.model, budget)
    store = Cache(cache) if isinstance(cache, (str, os.PathLike)) else cache
    session = LLMSession(llm, embeddings=embeddings, cache=store)
    try:
        vectors = await session.embed([c.text for c in corpus.chunks]) if embeddings else None
        builder = _Builder(session, corpus, Index(corpus, vectors), seed, pool_depth, budget)
        await builder.run(requested, max_rounds)
    finally:
        await session.aclose()
    items = sorted(builder.items, key=lambda pair: pair[0])
    config = {
        "n": n,
        "mix": mixture,
        "seed": seed,
        "model": llm.model,
        "embedding_model": embeddings.model if embeddings else None,
        "pool_depth": pool_depth,
        "max_rounds": max_rounds,
        "budget": budget,
    }
    return BuildResult(
        items=[item for _, item in items],
        # Rejections arrive as calls finish: sorted, so the file is stable across runs.
        rejected=sorted(
            builder.rejected,
            key=lambda r: (QUESTION_TYPES.index(r.type), r.seed_chunk_ids, r.reason),
        ),
        corpus=corpus,
        requested=requested,
        config=config,
        usage={
            "total": session.usage.total().as_dict(),
            "by_call": {k: v.as_dict() for k, v in sorted(session.usage.by_label.items())},
        },
        budget_reached=builder.budget_reached,
    )


def build(
    corpus: Corpus | str | os.PathLike[str], *, llm: LLM, n: int, **options: Any
) -> BuildResult:
    """Build a golden test set of `n` questions from a corpus.

    Args:
        corpus: a `Corpus`, or a path `load_corpus` reads (chunks file, documents folder).
        llm: the model that writes, critiques and grades.
        n: the number of questions wanted.
        **options: mix ("single_hop=0.5,multi_hop=0.5" or a mapping; default DEFAULT_MIX),
            seed (default 0), embeddings (dense pooling and difficulty), cache (a Cache or
            a path), column_map and chunk_size (for a path, see `load_corpus`),
            pool_depth (candidates graded per question, default 10), budget (USD; stops
            cleanly when reached), max_rounds (default 3).

    Returns:
        a BuildResult; `result.write(folder)` writes the files.
    """
    return asyncio.run(abuild(corpus, llm=llm, n=n, **options))


class _Builder:
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
        self._order = 0

    async def run(self, requested: Mapping[QuestionType, int], max_rounds: int) -> None:
        """Rounds until every type has its count, the seeds run out or the budget is spent."""
        done: dict[str, int] = dict.fromkeys(requested, 0)
        for _ in range(max_rounds):
            tasks: list[tuple[QuestionType, tuple[Chunk, ...]]] = []
            for qtype in QUESTION_TYPES:
                missing = requested.get(qtype, 0) - done.get(qtype, 0)
                for chunk in self.seeds.take(qtype, missing) if missing > 0 else []:
                    chunks = self._with_partner(chunk) if qtype == "multi_hop" else (chunk,)
                    if chunks is None:
                        self._reject(qtype, (chunk,), "no_multi_hop_partner", "no related chunk")
                    else:
                        tasks.append((qtype, chunks))
            if not tasks or self.budget_reached:
                return
            for item in await self._round(tasks):
                done[item.type] += 1

    def _with_partner(self, seed: Chunk) -> tuple[Chunk, Chunk] | None:
        """The seed and its closest other chunk by BM25 that is not a near copy of it."""
        own = shingles(seed.text)
        for position in self.index.bm25(seed.text, 20):
            other = self.corpus.chunks[position]
            if (
                other.chunk_id != seed.chunk_id
                and other.thin is None
                and jaccard(own, shingles(other.text)) < 0.8
            ):
                return seed, other
        return None

    async def _guarded(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run one call unless the budget is spent."""
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
        return await make()

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
            except CheckFailed as failed:
                self._reject(qtype, chunks, failed.reason, failed.detail, draft)
                continue
            candidates.append(candidate)
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
        vectors = await self._question_vectors(passed)
        pools = [
            pool_positions(self.index, c, self.depth, v)
            for c, v in zip(passed, vectors, strict=True)
        ]
        texts = [[self.corpus.chunks[p].text for p in pool] for pool in pools]
        grades = await self._gather(
            [partial(grade_pool, self.session, c, t) for c, t in zip(passed, texts, strict=True)],
            [(c.draft.type, c.draft.chunks) for c in passed],
        )
        made = []
        for candidate, pool, graded, vector in zip(passed, pools, grades, vectors, strict=True):
            if graded is None:
                continue
            result = make_item(
                self.index, candidate, pool, graded, vector, self.seed, self.session.llm
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

    async def _question_vectors(self, candidates: list[Candidate]) -> list[list[float] | None]:
        """Question embeddings for dense pooling (one batched request), or Nones."""
        if not self.index.dense or not candidates:
            return [None] * len(candidates)
        found = await self.session.embed(
            [c.question for c in candidates], label="testset_embeddings"
        )
        return list(found)

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
                return await self._guarded(call)
            except BudgetReached:
                self._reject(qtype, chunks, "budget_reached", "stopped before this call")
            except InvalidOutputError as exc:
                self._reject(qtype, chunks, "invalid_output", str(exc))
            except LLMCallError as exc:
                self._reject(qtype, chunks, "llm_error", str(exc))
            except ContextWindowError as exc:
                self._reject(qtype, chunks, "too_long", str(exc))
            return None

        return list(
            await asyncio.gather(*(one(c, t, ch) for c, (t, ch) in zip(calls, work, strict=True)))
        )

    def _reject(
        self,
        qtype: QuestionType,
        chunks: tuple[Chunk, ...],
        reason: str,
        detail: str,
        draft: Draft | None = None,
    ) -> None:
        reply = draft.reply if draft is not None else None
        self.dedup.forget(_name(chunks))  # a rejected question blocks no later one
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


def _name(chunks: tuple[Chunk, ...]) -> str:
    """How a question is named in duplicate reasons: by its seed chunk."""
    return f"the question from chunk {chunks[0].chunk_id}"


def prompts_used(types: list[QuestionType]) -> list[str]:
    """The prompt files a build with these types calls."""
    return [prompt_name(t) for t in types] + ["testset_critic", "testset_pool"]


__all__ = ["DIFFICULTY_DEPTH", "BuildResult", "abuild", "build", "check_request", "prompts_used"]
