"""The `gen_ai.evaluation.explanation` of an evaluation event: a short, deterministic
account of a score, the summaries of the metric's findings (`judge.metrics.findings`)."""

from __future__ import annotations

from judge.metrics.registry import findings_of
from judge.run.rows import ResultRow

EXPLANATION_CHARS = 400  # an explanation stays short: a trace view shows it in one cell


def explain(metric: str, row: ResultRow) -> str | None:
    """A short, deterministic explanation of a defined score from the row's evidence, or
    None when the evidence says nothing of this metric (a retrieval metric, for one)."""
    text = "; ".join(f.summary for f in findings_of(metric, row.evidence, row.contexts or ()))
    return shorten(text.strip()) if text.strip() else None


def shorten(text: str) -> str:
    """An explanation cut to EXPLANATION_CHARS."""
    text = " ".join(text.split())
    return text if len(text) <= EXPLANATION_CHARS else text[: EXPLANATION_CHARS - 3] + "..."
