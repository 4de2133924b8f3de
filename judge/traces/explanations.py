"""The `gen_ai.evaluation.explanation` of an evaluation event: a short, deterministic
account of a score from the row's evidence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judge.formatting import counted
from judge.run.rows import ResultRow

EXPLANATION_CHARS = 400  # an explanation stays short: a trace view shows it in one cell
_LISTED = 3  # claims or checks named in an explanation; the rest are counted
_CLAIM_CHARS = 80


def explain(metric: str, row: ResultRow) -> str | None:
    """A short, deterministic explanation of a defined score from the row's evidence, or
    None when the evidence says nothing of this metric (a retrieval metric, for one)."""
    evidence = row.evidence
    base = metric.partition("@")[0]
    text: str | None = None
    if base in ("faithfulness", "faithfulness_strict", "hallucination_rate"):
        text = _claims(evidence, "answer", "answer claim", "by the contexts")
    elif base == "context_recall":
        text = _claims(evidence, "truth", "ground-truth claim", "by the contexts")
    elif base in ("context_precision", "context_relevance", "context_ndcg"):
        grades = [g.get("grade") for g in evidence.get("context_grades") or []]
        if grades:
            text = f"context grades (0-3) in rank order: {', '.join(map(str, grades))}"
    elif base == "answer_correctness":
        text = _correctness(evidence.get("correctness"))
    elif base == "answer_relevancy":
        text = _relevancy(evidence.get("reverse_questions"))
    elif base == "citation_accuracy":
        text = _citations(evidence.get("citation_checks"))
    elif base == "context_focus":
        focus = evidence.get("context_sentences") or {}
        if focus:
            needed = len(focus.get("needed") or [])
            total = sum(focus.get("per_context") or [])
            text = (
                f"{needed} of {counted(total, 'context sentence')} needed. "
                f"{focus.get('reason') or ''}"
            )
    else:  # a custom metric keeps its judge's reply under its name
        reply = evidence.get(metric)
        if isinstance(reply, Mapping):
            for key in ("explanation", "reason", "reasoning", "rationale"):
                if isinstance(reply.get(key), str):
                    text = reply[key]
                    break
    return shorten(text.strip()) if text and text.strip() else None


def _claims(evidence: Mapping[str, Any], side: str, what: str, against: str) -> str | None:
    """How many claims were supported, and the first unsupported ones with their reasons
    (`what`: the claims' noun, singular)."""
    claims = evidence.get(f"{side}_claims")
    verdicts = evidence.get(f"{side}_verdicts")
    if not isinstance(claims, list) or not isinstance(verdicts, list):
        return None
    bad = [v for v in verdicts if v.get("verdict") != "supported"]
    if not bad:
        return f"{counted(len(verdicts), what)}, all supported {against}"
    named = []
    for v in bad[:_LISTED]:
        number = v.get("claim")
        claim = claims[number] if isinstance(number, int) and number < len(claims) else "?"
        named.append(f"{_clip(claim)!r} ({v.get('verdict')}: {v.get('reason')})")
    more = f"; and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
    return f"{len(bad)} of {counted(len(verdicts), what)} not supported {against}: " + (
        "; ".join(named) + more
    )


def _correctness(found: Any) -> str | None:
    """The two directions answer_correctness's F1 is made of."""
    if not isinstance(found, Mapping):
        return None
    answer = found.get("answer_claims_vs_ground_truth") or []
    truth = found.get("truth_claims_vs_answer") or []

    def supported(verdicts: list[Mapping[str, Any]]) -> int:
        return sum(v.get("verdict") == "supported" for v in verdicts)

    return (
        f"answer claims supported by the ground truth: {supported(answer)} of {len(answer)}; "
        f"ground-truth claims supported by the answer: {supported(truth)} of {len(truth)}"
    )


def _relevancy(found: Any) -> str | None:
    """Whether the answer was noncommittal, else its reverse questions' similarities."""
    if not isinstance(found, Mapping):
        return None
    if found.get("noncommittal"):
        return "the answer is noncommittal"
    similarities = found.get("similarities") or []
    shown = ", ".join(f"{s:.2f}" for s in similarities)
    return f"similarity of the question to questions generated from the answer: {shown}"


def _citations(checks: Any) -> str | None:
    """The citations not supported by the context they cite, with the judge's reasons."""
    if not isinstance(checks, list) or not checks:
        return None
    bad = [c for c in checks if not c.get("supported")]
    if not bad:
        return f"{counted(len(checks), 'citation')}, all supported by the cited context"
    reasons = "; ".join(str(c.get("reason")) for c in bad[:_LISTED])
    return f"{len(bad)} of {counted(len(checks), 'citation')} not supported: {reasons}"


def _clip(text: str) -> str:
    return text if len(text) <= _CLAIM_CHARS else text[: _CLAIM_CHARS - 3] + "..."


def shorten(text: str) -> str:
    """An explanation cut to EXPLANATION_CHARS."""
    text = " ".join(text.split())
    return text if len(text) <= EXPLANATION_CHARS else text[: EXPLANATION_CHARS - 3] + "..."
