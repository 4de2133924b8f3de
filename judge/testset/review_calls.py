"""The two LLM calls after generation: one critic call per question, and one listwise
relevance grading of its pooled candidate chunks. With generation that makes three calls
per accepted question (fewer for a draft rejected early)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, Field, create_model, model_validator

from judge.llm.config import PromptRef
from judge.llm.session import LLMSession
from judge.metrics.prompts import Prompt, load_prompt
from judge.testset.checks import Candidate


class Critique(BaseModel):
    """The critic's four checks of one question, after its reason (written first, so the
    checks follow from it rather than from the example's pattern)."""

    reason: str
    self_contained: bool
    answerable: bool
    answer_correct: bool
    needs_all_chunks: bool


class Grade(BaseModel):
    """The relevance grade of one pooled candidate chunk."""

    chunk: int = Field(ge=0)
    grade: int = Field(ge=0, le=2)


class GradeList(BaseModel):
    """One grade per candidate, numbered from 0 in order."""

    grades: list[Grade]

    @model_validator(mode="after")
    def _in_order(self) -> GradeList:
        if [g.chunk for g in self.grades] != list(range(len(self.grades))):
            raise ValueError("give one grade per candidate, numbered from 0 in order")
        return self


@functools.cache
def _grades_of(count: int) -> type[GradeList]:
    """The grades schema for exactly `count` candidates (a wrong count is re-asked)."""
    sized: Any = Annotated[list[Grade], Field(min_length=count, max_length=count)]
    model: type[GradeList] = create_model(f"Grades{count}", __base__=GradeList, grades=sized)
    return model


def _ref(prompt: Prompt) -> PromptRef:
    return PromptRef(prompt.name, prompt.version)


def critic_failure(candidate: Candidate, critique: Critique) -> str | None:
    """The reason code of the first failed critic check, or None when all pass."""
    if not critique.self_contained:
        return "critic_not_self_contained"
    if critique.answerable != candidate.answerable:
        return "critic_answerable" if not candidate.answerable else "critic_not_answerable"
    if not critique.answer_correct:
        return "critic_answer_wrong"
    if not critique.needs_all_chunks:
        return "critic_one_chunk_suffices"
    return None


async def critique(session: LLMSession, candidate: Candidate) -> Critique:
    """One critic call: self-contained, answerable, answer correct, every chunk needed."""
    prompt = load_prompt("testset_critic")
    (reply,) = await session.chat(
        prompt.render(
            type=candidate.draft.type,
            question=candidate.question,
            reference=candidate.answer,
            chunks=[c.text for c in candidate.draft.chunks],
        ),
        Critique,
        prompt=_ref(prompt),
        label=prompt.name,
        sample=candidate.draft.chunks[0].chunk_id,
    )
    return reply


async def grade_pool(session: LLMSession, candidate: Candidate, texts: Sequence[str]) -> list[int]:
    """One listwise call: a 0-2 grade per pooled chunk text, in order."""
    if not texts:
        return []
    prompt = load_prompt("testset_pool")
    (reply,) = await session.chat(
        prompt.render(
            question=candidate.question, reference=candidate.answer, candidates=list(texts)
        ),
        _grades_of(len(texts)),
        prompt=_ref(prompt),
        label=prompt.name,
        sample=candidate.draft.chunks[0].chunk_id,
    )
    return [g.grade for g in reply.grades]


def prompt_versions(names: Sequence[str]) -> dict[str, str]:
    """name -> version (hash) of the prompts used."""
    return {name: load_prompt(name).version for name in names}
