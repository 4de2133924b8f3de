"""The records of a golden test set: one accepted question (`TestsetItem`) or one rejected.

An item's id is a hash of its content (question, reference answer, gold chunks, type), so
the same question built twice has the same id, and an edited question gets a new one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judge.json_values import canonical_json, sha256_hex

QuestionType = Literal[
    "single_hop", "paraphrased", "multi_hop", "negation", "calculation", "unanswerable"
]
QUESTION_TYPES: tuple[QuestionType, ...] = (
    "single_hop",
    "paraphrased",
    "multi_hop",
    "negation",
    "calculation",
    "unanswerable",
)
# "mined": a real question from logs (judge.testset.mine), not one of the generated types.
ItemType = Literal[
    "single_hop", "paraphrased", "multi_hop", "negation", "calculation", "unanswerable", "mined"
]
ReviewStatus = Literal["draft", "auto_pass", "human_ok", "edited", "rejected"]
Origin = Literal["synthetic", "log", "human"]


class Evidence(BaseModel):
    """A quote from a gold chunk that supports the answer, with where it is."""

    model_config = ConfigDict(frozen=True)

    chunk_id: str
    quote: str
    start: int = Field(description="character offset of the quote in the chunk's text")
    end: int
    doc_start: int | None = Field(
        default=None, description="character offset in the document (split corpora only)"
    )
    doc_end: int | None = None


class Operand(BaseModel):
    """A number a calculation question needs, and the quote it was read from."""

    name: str
    value: float
    quote: str


class Calculation(BaseModel):
    """The arithmetic behind a calculation question, checked by judge (never `eval`)."""

    operands: list[Operand]
    expression: str
    value: float = Field(description="the expression's value, computed by judge")


class Difficulty(BaseModel):
    """Ranks of the first gold chunk in BM25 (and dense) top 50; None when not in it."""

    bm25_rank: int | None = None
    dense_rank: int | None = None


class Provenance(BaseModel):
    """How the item was made: model, prompt versions, seed and seed chunks."""

    model: str | None = None
    prompts: dict[str, str] = Field(default_factory=dict)
    seed: int | None = None
    seed_chunk_ids: list[str] = Field(default_factory=list)


class TestsetItem(BaseModel):
    """One question of a golden test set.

    `question`, `reference` and `relevance` use the column names `judge eval` reads
    (`reference` is the ground truth; `relevance` maps chunk ids to graded relevance).
    """

    model_config = ConfigDict(extra="forbid")
    __test__ = False  # not a pytest test class, despite the name

    id: str
    question: str
    reference: str
    gold_chunk_ids: list[str]
    gold_doc_ids: list[str]
    evidence: list[Evidence]
    type: ItemType
    hops: int
    answerable: bool
    expected_behaviour: Literal["answer", "abstain_or_correct_premise"] = "answer"
    language: str
    origin: Origin = "synthetic"
    relevance: dict[str, int] = Field(
        default_factory=dict, description="pooled judgments: chunk id -> grade 0-2"
    )
    calculation: Calculation | None = None
    difficulty: Difficulty = Field(default_factory=Difficulty)
    checks: dict[str, Any] = Field(default_factory=dict)
    review_status: ReviewStatus = "auto_pass"
    provenance: Provenance = Field(default_factory=Provenance)


class Rejected(BaseModel):
    """A generated (or attempted) question that did not pass, with why."""

    type: ItemType
    seed_chunk_ids: list[str]
    reason: str
    detail: str = ""
    question: str | None = None
    reference: str | None = None


def item_id(question: str, reference: str, gold_chunk_ids: list[str], qtype: str) -> str:
    """The content hash that names an item: `q` and 16 hex digits."""
    material = {"q": question, "a": reference, "gold": gold_chunk_ids, "type": qtype}
    return "q" + sha256_hex(canonical_json(material))[:16]
