"""What the judges found about one sample, as typed values.

A result row's `evidence` (results.jsonl) is one JSON object: the judgments the built-in
metrics share, each under its key here, and a custom metric's reply under the metric's
name. `Evidence` reads that object into the types below (leniently: an old run folder or a
hand-edited row with a field missing or of another type still reads) and `to_json` gives
each value back as the JSON it was read from, so the row's format never changes. The keys
are named here alone: the judgments write them (`judge.metrics.judgments`) and the metrics
read them back into findings (`judge.metrics.findings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The sides whose claims are split and verified: the answer's and the ground truth's.
ANSWER, TRUTH = "answer", "truth"
SIDES = (ANSWER, TRUTH)

CONTEXT_GRADES = "context_grades"
CONTEXT_GRADES_CAPPED = "context_grades_capped"
CONTEXT_SENTENCES = "context_sentences"
REVERSE_QUESTIONS = "reverse_questions"
CORRECTNESS = "correctness"
ANSWER_VS_TRUTH = "answer_claims_vs_ground_truth"
TRUTH_VS_ANSWER = "truth_claims_vs_answer"
CITATIONS = "citations"
CITATION_CHECKS = "citation_checks"
ANSWER_CLAIMS_UNSOURCED = "answer_claims_unsourced"
RETENTION = "retention"  # a turn's answer against each earlier user message
QUERY_REWRITE = "query_rewrite"  # a turn's retriever query against its message
GOAL = "goal"  # a conversation against its expected outcome (on its final turn)
TRAJECTORY = "trajectory"  # tool calls made against the expected ones (judged or settled)
SUPPORTED = "supported"


def claims_key(side: str) -> str:
    """The key of one side's claims (`answer_claims`, `truth_claims`)."""
    return f"{side}_claims"


def verdicts_key(side: str) -> str:
    """The key of the verdicts of one side's claims against the contexts."""
    return f"{side}_verdicts"


def dropped_claims_key(side: str) -> str:
    """The key of the claims dropped as not drawn from their text."""
    return f"{side}_claims_not_in_text"


def borrowed_key(side: str) -> str:
    """The key of the verdicts whose reason borrows the verify prompt example's words."""
    return f"{side}_verdicts_borrowed"


def _int(value: Any) -> int | None:
    """An integer field, or None when it is absent or not an integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class ClaimVerdict:
    """The judge's verdict on one claim: supported, contradicted or not found, and why.

    Attributes:
        claim: the claim's number (from 0) in its side's claims.
        verdict: `supported`, `contradicted` or `not_found`.
        reason: the judge's reason.
        context: the number of the context that supports it, when one does.
    """

    claim: int | None
    verdict: str
    reason: str
    context: Any = None  # an int as the judge writes it; kept as read otherwise

    @property
    def ok(self) -> bool:
        """Whether the claim is supported."""
        return self.verdict == SUPPORTED

    @classmethod
    def from_json(cls, data: Any) -> ClaimVerdict:
        """A verdict from its JSON object."""
        found = _mapping(data)
        return cls(
            _int(found.get("claim")),
            _text(found.get("verdict", "?")),
            _text(found.get("reason")),
            found.get("context"),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object, keys in the order the judges write them."""
        return {
            "claim": self.claim,
            "reason": self.reason,
            "verdict": self.verdict,
            "context": self.context,
        }


@dataclass(frozen=True)
class UnsourcedClaim:
    """An answer claim naming numbers or names that no context mentions."""

    claim: int | None
    terms: tuple[str, ...]

    @classmethod
    def from_json(cls, data: Any) -> UnsourcedClaim:
        """The value from its JSON object (leniently)."""
        found = _mapping(data)
        return cls(_int(found.get("claim")), tuple(map(str, _list(found.get("terms")))))

    def to_json(self) -> dict[str, Any]:
        """The JSON object, as the judgments write it."""
        return {"claim": self.claim, "terms": list(self.terms)}


@dataclass(frozen=True)
class Claims:
    """One side's claims and, when they were verified against the contexts, their verdicts.

    Attributes:
        side: `answer` or `truth`.
        claims: the claims, numbered from 0.
        verdicts: one per claim, or None when the claims were not verified.
    """

    side: str
    claims: tuple[str, ...]
    verdicts: tuple[ClaimVerdict, ...] | None

    def claim(self, number: int | None) -> str:
        """The text of claim `number`, or `?` when there is no such claim."""
        if number is None or not 0 <= number < len(self.claims):
            return "?"
        return self.claims[number]


@dataclass(frozen=True)
class ContextGrade:
    """A context's grade 0-3 against the question (3 gives the answer, 0 is unrelated)."""

    context: int | None
    grade: int | None
    reason: str
    raw: Mapping[str, Any]  # as read: a report shows an odd value as it is

    @property
    def relevant(self) -> bool:
        """Grades 2 (part of the answer) and 3 (the answer) count as relevant."""
        return self.grade is not None and self.grade >= 2

    @classmethod
    def from_json(cls, data: Any) -> ContextGrade:
        """The value from its JSON object (leniently)."""
        found = _mapping(data)
        return cls(
            _int(found.get("context")), _int(found.get("grade")), _text(found.get("reason")), found
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object, as the judgments write it."""
        return dict(self.raw)


@dataclass(frozen=True)
class ReverseQuestions:
    """Questions generated from the answer, with their similarity to the question asked."""

    questions: tuple[str, ...]
    noncommittal: bool
    similarities: tuple[float, ...]

    @classmethod
    def from_json(cls, data: Any) -> ReverseQuestions:
        """The value from its JSON object (leniently)."""
        found = _mapping(data)
        return cls(
            tuple(map(str, _list(found.get("questions")))),
            bool(found.get("noncommittal")),
            tuple(float(s) for s in _list(found.get("similarities"))),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object, as the judgments write it."""
        return {
            "questions": list(self.questions),
            "noncommittal": self.noncommittal,
            "similarities": list(self.similarities),
        }


@dataclass(frozen=True)
class Correctness:
    """The answer's claims checked against the ground truth, and the other way round."""

    answer_vs_truth: tuple[ClaimVerdict, ...]
    truth_vs_answer: tuple[ClaimVerdict, ...]

    @classmethod
    def from_json(cls, data: Any) -> Correctness:
        """The value from its JSON object (leniently)."""
        found = _mapping(data)
        return cls(
            tuple(map(ClaimVerdict.from_json, _list(found.get(ANSWER_VS_TRUTH)))),
            tuple(map(ClaimVerdict.from_json, _list(found.get(TRUTH_VS_ANSWER)))),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object, as the judgments write it."""
        return {
            ANSWER_VS_TRUTH: [v.to_json() for v in self.answer_vs_truth],
            TRUTH_VS_ANSWER: [v.to_json() for v in self.truth_vs_answer],
        }


@dataclass(frozen=True)
class CitationCheck:
    """Whether the context a statement cites supports it (`check`: the citation's number
    among those naming an existing context)."""

    check: int | None
    supported: bool
    reason: str

    @classmethod
    def from_json(cls, data: Any) -> CitationCheck:
        """The value from its JSON object (leniently)."""
        found = _mapping(data)
        return cls(
            _int(found.get("check")), found.get("supported") is True, _text(found.get("reason"))
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object, as the judgments write it."""
        return {"check": self.check, "supported": self.supported, "reason": self.reason}


@dataclass(frozen=True)
class Citation:
    """A citation marker in the answer: the statement citing, the marker as written, and
    the context it names (None for a marker naming no context)."""

    statement: str
    marker: Any
    context: int | None

    @classmethod
    def from_json(cls, data: Any) -> Citation:
        """The value from its JSON object (leniently)."""
        found = _mapping(data)
        return cls(_text(found.get("statement")), found.get("marker"), _int(found.get("context")))

    def to_json(self) -> dict[str, Any]:
        """The JSON object, as the judgments write it."""
        return {"statement": self.statement, "marker": self.marker, "context": self.context}


@dataclass(frozen=True)
class ContextSentences:
    """The contexts' sentences the question needs: how many each context has, the numbers
    of those needed, the judge's reason, and picks dropped as off the topic."""

    per_context: tuple[int, ...]
    needed: tuple[int, ...]
    reason: str
    not_on_topic: tuple[int, ...] | None = None

    @classmethod
    def from_json(cls, data: Any) -> ContextSentences:
        """The value from its JSON object (leniently)."""
        found = _mapping(data)
        dropped = found.get("not_on_topic")
        return cls(
            tuple(n for n in map(_int, _list(found.get("per_context"))) if n is not None),
            tuple(n for n in map(_int, _list(found.get("needed"))) if n is not None),
            _text(found.get("reason")),
            None if dropped is None else tuple(_list(dropped)),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object, as the judgments write it."""
        out: dict[str, Any] = {
            "per_context": list(self.per_context),
            "needed": list(self.needed),
            "reason": self.reason,
        }
        if self.not_on_topic is not None:
            out["not_on_topic"] = list(self.not_on_topic)
        return out


class Evidence:
    """A result row's evidence object read through typed values; the object itself is kept
    as read (`to_json`), so reading never changes a row."""

    def __init__(self, data: Mapping[str, Any] | None) -> None:
        self.data: Mapping[str, Any] = data if isinstance(data, Mapping) else {}

    def to_json(self) -> dict[str, Any]:
        """The evidence object, as read."""
        return dict(self.data)

    def claims(self, side: str) -> Claims | None:
        """One side's claims (`answer` or `truth`) with their verdicts, or None when the
        side's claims were not split."""
        claims = self.data.get(claims_key(side))
        if not isinstance(claims, list):
            return None
        verdicts = self.data.get(verdicts_key(side))
        return Claims(
            side,
            tuple(map(str, claims)),
            None
            if not isinstance(verdicts, list)
            else tuple(map(ClaimVerdict.from_json, verdicts)),
        )

    def unsourced(self) -> tuple[UnsourcedClaim, ...]:
        """The answer claims naming numbers or names that no context mentions."""
        return tuple(map(UnsourcedClaim.from_json, _list(self.data.get(ANSWER_CLAIMS_UNSOURCED))))

    def context_grades(self) -> tuple[ContextGrade, ...]:
        """The contexts' grades in retrieval order (none when no metric graded them)."""
        return tuple(map(ContextGrade.from_json, _list(self.data.get(CONTEXT_GRADES))))

    def capped_contexts(self) -> frozenset[int]:
        """The contexts whose grade was capped at 1 (no content shared with the topic)."""
        capped = _list(self.data.get(CONTEXT_GRADES_CAPPED))
        return frozenset(n for n in map(_int, capped) if n is not None)

    def reverse_questions(self) -> ReverseQuestions | None:
        """The reverse questions, or None when none were generated."""
        found = self.data.get(REVERSE_QUESTIONS)
        return ReverseQuestions.from_json(found) if isinstance(found, Mapping) else None

    def correctness(self) -> Correctness | None:
        """The answer and the ground truth checked against each other, or None."""
        found = self.data.get(CORRECTNESS)
        return Correctness.from_json(found) if isinstance(found, Mapping) else None

    def citation_checks(self) -> tuple[CitationCheck, ...]:
        """The checks of the answer's citations naming an existing context."""
        return tuple(map(CitationCheck.from_json, _list(self.data.get(CITATION_CHECKS))))

    def citations(self) -> tuple[Citation, ...]:
        """The answer's citation markers, in the answer's order."""
        return tuple(map(Citation.from_json, _list(self.data.get(CITATIONS))))

    def context_sentences(self) -> ContextSentences | None:
        """The context sentences the question needs, or None."""
        found = self.data.get(CONTEXT_SENTENCES)
        return ContextSentences.from_json(found) if isinstance(found, Mapping) else None

    def reply(self, name: str) -> Any:
        """A custom metric's judge reply (kept under the metric's name), or None."""
        return self.data.get(name)


def context_text(contexts: Sequence[str], number: int | None) -> str:
    """The text of context `number` (from 0), or '' when the row has no such context."""
    return contexts[number] if number is not None and 0 <= number < len(contexts) else ""
