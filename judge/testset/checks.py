"""Checks that need no LLM call: schema-level sense, language, quotes, arithmetic,
paraphrase distance, negation, and near-duplicate questions. A failed check names the
reason that goes to rejected.jsonl; passing measures go into the item's `checks`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.testset.calc import CalculationError, evaluate, matches, numbers
from judge.testset.corpus import Chunk
from judge.testset.generate import Draft
from judge.testset.items import Calculation, Evidence, Operand
from judge.testset.text import find_quote, jaccard, language, normalise, overlap, shingles

PARAPHRASE_MAX_OVERLAP = 0.5  # a paraphrased question shares at most half its terms
TRIVIAL_OVERLAP = 0.8  # tagged lexically trivial: BM25 finds it by shared words alone
NEAR_DUPLICATE = 0.8  # Jaccard of character trigrams
ANSWER_LANGUAGE_LETTERS = 12  # shorter answers are names or numbers: no language to check
_NEGATION = re.compile(
    r"\b(not|no|never|none|nor|without|except|excluding|cannot)\b|n't|不|没|无|非|除|未|禁止",
    re.IGNORECASE,
)


class CheckFailed(Exception):
    """A draft that fails a check: `reason` is a short code, `detail` says more."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class Candidate:
    """A draft that passed the local checks, on its way to the critic and pooling."""

    draft: Draft
    question: str
    answer: str
    evidence: list[Evidence]
    language: str
    answerable: bool
    calculation: Calculation | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    vector: list[float] | None = None  # the question's embedding, with an embedding model

    @property
    def gold(self) -> tuple[Chunk, ...]:
        """The gold chunks: none for an unanswerable question."""
        return () if not self.answerable else self.draft.chunks


def _evidence_in(chunks: Sequence[Chunk], number: int, quote: str) -> Evidence:
    """A multi-hop quote in the chunk it names, else in the other one: a real model (Qwen2.5
    0.5B) numbered a verbatim quote with the wrong chunk; the text is what must match."""
    for chunk in (chunks[number], *(c for i, c in enumerate(chunks) if i != number)):
        if find_quote(quote, chunk.text) is not None:
            return _evidence(chunk, quote)
    return _evidence(chunks[number], quote)


def _evidence(chunk: Chunk, quote: str) -> Evidence:
    span = find_quote(quote, chunk.text)
    if span is None:
        raise CheckFailed("quote_not_in_chunk", f"{quote!r} is not in chunk {chunk.chunk_id}")
    start, end = span
    offset = chunk.start
    return Evidence(
        chunk_id=chunk.chunk_id,
        quote=chunk.text[start:end],
        start=start,
        end=end,
        doc_start=None if offset is None else offset + start,
        doc_end=None if offset is None else offset + end,
    )


def check_draft(draft: Draft) -> Candidate:
    """The candidate made from a draft, or CheckFailed with the first failed check."""
    reply, chunks, qtype = draft.reply, draft.chunks, draft.type
    question, answer = reply.question.strip(), reply.answer.strip()
    if not question or not answer:
        raise CheckFailed("empty", "the question or the answer is empty")
    wanted = language(chunks[0].text)
    # The question must be in the chunk's language. A short answer may be a bare name or
    # number ("Alvar Aalto", "216"), which is in no language; a longer one must match too.
    letters = sum(c.isalpha() for c in answer)
    if language(question) != wanted or (
        letters >= ANSWER_LANGUAGE_LETTERS and language(answer) != wanted
    ):
        raise CheckFailed("wrong_language", f"the source chunk is {wanted}")
    calculation = None
    if qtype == "multi_hop":
        evidence = [_evidence_in(chunks, q.chunk, q.quote) for q in reply.evidence]
        if {e.chunk_id for e in evidence} != {c.chunk_id for c in chunks}:
            raise CheckFailed(
                "evidence_not_from_both_chunks", "a multi-hop answer quotes each chunk"
            )
    elif qtype == "calculation":
        evidence = [_evidence(chunks[0], o.quote) for o in reply.operands]
        calculation = _calculation(reply)
    else:
        evidence = [_evidence(chunks[0], q) for q in reply.evidence]
    answerable = qtype != "unanswerable"
    if not evidence and (answerable or reply.kind == "false_premise"):
        raise CheckFailed("no_evidence", "no supporting quote")
    if qtype == "negation" and not _NEGATION.search(question):
        raise CheckFailed("not_a_negation", "the question has no negation")
    share = max(overlap(question, c.text) for c in chunks)
    if qtype == "paraphrased" and share > PARAPHRASE_MAX_OVERLAP:
        raise CheckFailed("paraphrase_reuses_wording", f"{share:.0%} of its terms are the chunk's")
    checks: dict[str, Any] = {
        "quotes": "pass",
        "language": "pass",
        "lexical_overlap": round(share, 3),
        "lexically_trivial": share >= TRIVIAL_OVERLAP,
    }
    if calculation is not None:
        checks["calculation"] = "pass"
    kind = getattr(reply, "kind", None)
    if kind is not None:
        checks["kind"] = kind
    return Candidate(draft, question, answer, evidence, wanted, answerable, calculation, checks)


def _calculation(reply: Any) -> Calculation:
    operands = {}
    for operand in reply.operands:
        if not any(
            abs(n - operand.value) <= 1e-9 * max(1.0, abs(n)) for n in numbers(operand.quote)
        ):
            raise CheckFailed(
                "operand_not_in_quote", f"{operand.value:g} is not in {operand.quote!r}"
            )
        operands[operand.name] = operand.value
    try:
        value = evaluate(reply.expression, operands)
    except CalculationError as exc:
        raise CheckFailed("bad_expression", str(exc)) from None
    if not matches(value, reply.answer):
        raise CheckFailed(
            "calculation_mismatch", f"{reply.expression} = {value:g}, not in the answer"
        )
    return Calculation(
        operands=[Operand(name=o.name, value=o.value, quote=o.quote) for o in reply.operands],
        expression=reply.expression,
        value=value,
    )


class Deduplicator:
    """Remembers accepted questions; refuses exact and near duplicates of them."""

    def __init__(self) -> None:
        self._seen: list[tuple[str, set[str], str]] = []

    def check(self, question: str, name: str) -> None:
        """Raise CheckFailed when the question repeats one seen; else remember it as `name`."""
        text, grams = normalise(question), shingles(question)
        for other_text, other_grams, other in self._seen:
            if text == other_text:
                raise CheckFailed("duplicate", f"the same question as {other}")
            if jaccard(grams, other_grams) >= NEAR_DUPLICATE:
                raise CheckFailed("near_duplicate", f"nearly the same question as {other}")
        self._seen.append((text, grams, name))

    def forget(self, name: str) -> None:
        """Drop a question remembered as `name` (it was rejected later)."""
        self._seen = [entry for entry in self._seen if entry[2] != name]
