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

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from judge.aio import sync_twin
from judge.cache.store import Cache
from judge.errors import JudgeError
from judge.llm.config import LLM, Embeddings
from judge.llm.session import LLMSession
from judge.testset.corpus import Corpus, load_corpus
from judge.testset.estimate import require_price
from judge.testset.generate import prompt_name
from judge.testset.index import Index
from judge.testset.items import QUESTION_TYPES, QuestionType, Rejected, TestsetItem
from judge.testset.outputs import write_set
from judge.testset.review_calls import prompt_versions
from judge.testset.rounds import Builder
from judge.testset.sampling import MixLike, allocate, parse_mix
from judge.testset.split import DEFAULT_CHUNK_SIZE

DEFAULT_POOL_DEPTH = 10  # candidates graded per question, besides the gold chunks
MAX_ROUNDS = 5  # rejected drafts are replaced up to four times


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

    def manifest(self) -> dict[str, Any]:
        """What was built from what, with what, at what cost."""
        reasons: dict[str, int] = {}
        for rejected in self.rejected:
            reasons[rejected.reason] = reasons.get(rejected.reason, 0) + 1
        thin: dict[str, int] = {}
        for chunk in self.corpus.chunks:
            if chunk.thin:
                thin[chunk.thin] = thin.get(chunk.thin, 0) + 1
        total = self.usage["total"]
        accepted = len(self.items)
        return {
            "corpus": {
                "source": self.corpus.source,
                "sha256": self.corpus.digest,
                "chunks": len(self.corpus.chunks),
                "documents": len({c.doc_id for c in self.corpus.chunks}),
                "split": self.corpus.split,
                "thin_chunks": dict(sorted(thin.items())),
            },
            "config": self.config,
            "counts": {
                "requested": self.requested,
                "accepted": self.accepted,
                "shortfall": self.shortfall,
                "rejected": len(self.rejected),
                "rejected_by_reason": dict(sorted(reasons.items())),
                "budget_reached": self.budget_reached,
            },
            "requests_per_accepted_question": total["requests"] / accepted if accepted else None,
            "usage": self.usage,
        }

    def write(self, out: str | os.PathLike[str]) -> None:
        """Write testset.jsonl, qrels.txt, qrels_docs.txt, queries.tsv, chunks.jsonl,
        rejected.jsonl and manifest.json to the folder `out`."""
        write_set(out, self.items, self.rejected, self.corpus, self.manifest())


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
    mix: MixLike = None,
    seed: int = 0,
    embeddings: Embeddings | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
    column_map: Mapping[str, str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    pool_depth: int = DEFAULT_POOL_DEPTH,
    budget: float | None = None,
    max_rounds: int = MAX_ROUNDS,
    progress: Callable[[str], None] | None = None,
) -> BuildResult:
    """Build a golden test set of `n` questions from a corpus (`build` from sync code,
    `abuild` awaited).

    Args:
        corpus: a `Corpus`, or a path `load_corpus` reads (chunks file, documents folder).
        llm: the model that writes, critiques and grades.
        n: the number of questions wanted.
        mix: the question types' shares, "single_hop=0.5,multi_hop=0.5" or a mapping;
            default DEFAULT_MIX.
        seed: seeds the sampling of seed chunks.
        embeddings: an embedding model, for dense pooling and difficulty.
        cache: a `Cache` or a path to one; calls are looked up there first.
        column_map, chunk_size: for a path, as in `load_corpus`.
        pool_depth: candidates graded per question, besides the gold chunks.
        budget: USD; the build stops cleanly when it is reached.
        max_rounds: rounds of replacing rejected drafts, the first included.
        progress: called with a line after each round, e.g. `print`.

    Returns:
        a BuildResult; `result.write(folder)` writes the files.
    """
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
        builder = Builder(session, corpus, Index(corpus, vectors), seed, pool_depth, budget)
        await builder.run(requested, max_rounds, progress)
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
        "prompts": prompt_versions(prompts_used(list(mixture))),
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


build = sync_twin(abuild)


def prompts_used(types: list[QuestionType]) -> list[str]:
    """The prompt files a build with these types calls."""
    return [prompt_name(t) for t in types] + ["testset_critic", "testset_pool"]


__all__ = ["BuildResult", "abuild", "build", "check_request", "prompts_used"]
