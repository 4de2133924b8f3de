"""Pooling candidates for relevance grading, and turning a graded candidate into an item."""

from __future__ import annotations

from collections.abc import Sequence

from judge.llm.config import LLM
from judge.testset.checks import Candidate
from judge.testset.generate import prompt_name
from judge.testset.index import DIFFICULTY_DEPTH, Index, rank_of
from judge.testset.items import Difficulty, Provenance, TestsetItem, item_id
from judge.testset.review_calls import prompt_versions


def make_item(
    index: Index,
    candidate: Candidate,
    pool: Sequence[int],
    grades: Sequence[int],
    vector: Sequence[float] | None,
    seed: int,
    llm: LLM | None,
) -> TestsetItem | str:
    """The finished item, or the reason it is rejected after grading."""
    chunks = index.corpus.chunks
    if candidate.checks.get("kind") == "missing_detail" and 2 in grades:
        return "corpus_answers_it"  # the 'missing' detail is in another chunk
    gold = [c.chunk_id for c in candidate.gold]
    relevance = {chunks[p].chunk_id: g for p, g in zip(pool, grades, strict=True)}
    relevance.update(dict.fromkeys(gold, 2))
    gold_positions = [index.position[g] for g in gold]
    difficulty = Difficulty(
        bm25_rank=rank_of(index.bm25(candidate.question, DIFFICULTY_DEPTH), gold_positions),
        dense_rank=rank_of(index.nearest(vector, DIFFICULTY_DEPTH), gold_positions)
        if vector is not None
        else None,
    )
    draft = candidate.draft
    qtype = draft.type
    return TestsetItem(
        id=item_id(candidate.question, candidate.answer, gold, qtype),
        question=candidate.question,
        reference=candidate.answer,
        gold_chunk_ids=gold,
        gold_doc_ids=list(dict.fromkeys(c.doc_id for c in candidate.gold)),
        evidence=candidate.evidence,
        type=qtype,
        hops=len(draft.chunks),
        answerable=candidate.answerable,
        expected_behaviour="answer" if candidate.answerable else "abstain_or_correct_premise",
        language=candidate.language,
        relevance=relevance,
        calculation=candidate.calculation,
        difficulty=difficulty,
        checks=candidate.checks,
        provenance=Provenance(
            model=llm.model if llm else None,
            prompts=prompt_versions([prompt_name(qtype), "testset_critic", "testset_pool"]),
            seed=seed,
            seed_chunk_ids=[c.chunk_id for c in draft.chunks],
        ),
    )
