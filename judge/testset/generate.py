"""Question generation: one prompt file and one LLM call per question, by type.

Each type has its prompt (`judge/prompts/testset_<type>.txt`) and its pydantic output schema;
calls go through `LLMSession`, so the cache, `--replay`, usage and cost apply as for
every judge. The replies are checked afterwards (`judge.testset.checks`), not trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from judge.llm.config import PromptRef
from judge.llm.session import LLMSession
from judge.metrics.prompts import load_prompt
from judge.testset.corpus import Chunk
from judge.testset.items import QuestionType


class Generated(BaseModel):
    """A question with its answer and supporting quotes from one chunk."""

    question: str
    answer: str
    evidence: list[str] = Field(description="quotes copied exactly from the chunk")


class HopQuote(BaseModel):
    """A quote from one of the two chunks of a multi-hop question."""

    chunk: int = Field(ge=0, le=1)
    quote: str


class MultiHop(BaseModel):
    """A question needing a fact from each of two chunks."""

    question: str
    answer: str
    kind: Literal["bridge", "comparison"]
    evidence: list[HopQuote]


class OperandReply(BaseModel):
    """One number of a calculation, named, with the quote holding it."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    value: float
    quote: str


class CalculationReply(BaseModel):
    """A calculation question: operands, expression and the answer stating its value."""

    question: str
    answer: str
    operands: list[OperandReply] = Field(min_length=1)
    expression: str


class Unanswerable(BaseModel):
    """A question the corpus cannot answer: a false premise or a missing detail."""

    question: str
    answer: str
    kind: Literal["false_premise", "missing_detail"]
    evidence: list[str]


OUTPUTS: dict[QuestionType, type[BaseModel]] = {
    "single_hop": Generated,
    "paraphrased": Generated,
    "negation": Generated,
    "multi_hop": MultiHop,
    "calculation": CalculationReply,
    "unanswerable": Unanswerable,
}


@dataclass(frozen=True)
class Draft:
    """A generated reply with the chunks it was written from (seed first)."""

    type: QuestionType
    chunks: tuple[Chunk, ...]
    reply: Any


def prompt_name(qtype: QuestionType) -> str:
    """The prompt file of a question type."""
    return f"testset_{qtype}"


async def generate(session: LLMSession, qtype: QuestionType, chunks: tuple[Chunk, ...]) -> Draft:
    """One call: a question of the type from the chunks (two for multi_hop, else one)."""
    prompt = load_prompt(prompt_name(qtype))
    values: dict[str, Any] = (
        {"chunks": [c.text for c in chunks]} if qtype == "multi_hop" else {"chunk": chunks[0].text}
    )
    (reply,) = await session.chat(
        prompt.render(**values),
        OUTPUTS[qtype],
        prompt=PromptRef(prompt.name, prompt.version),
        label=prompt.name,
        sample=chunks[0].chunk_id,
    )
    return Draft(qtype, chunks, reply)
