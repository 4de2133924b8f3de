"""Which rows of a run to label, in which order, and what the page shows of each.

The rows are a seeded shuffle of the run's rows, the first `sample` of them: any first k
of the order are a simple random sample of the run's rows, so labels stopped at any point
still serve a prediction-powered estimate (`judge estimate` leaves out the rows the judge
could not score, labelled or not, and a uniform sample stays uniform on the rest). With
`order` "disagreements" the rows the judge was least sure of come first (the score
nearest 0.5: for faithfulness, the answers whose claims the judge split between supported
and not; rows it did not score last); labels drawn so are no random sample, and the labels
file says so.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Literal

from judge.errors import InputFormatError
from judge.labels.disagreements import row_view
from judge.metrics.evidence import ANSWER, Evidence
from judge.run.rows import ResultRow

Order = Literal["random", "disagreements"]
ORDERS: tuple[Order, ...] = ("random", "disagreements")

# What `y` answers, per metric; another metric asks the generic question.
QUESTIONS = {
    "faithfulness": "Is every claim of the answer supported by the contexts?",
    "hallucination_rate": "Is every claim of the answer supported by the contexts?",
    "answer_relevancy": "Does the answer address the question?",
    "answer_correctness": "Is the answer correct (as the ground truth says)?",
    "context_precision": "Are the contexts that matter ranked first?",
    "context_recall": "Do the contexts hold everything the ground truth says?",
    "context_relevance": "Are the contexts relevant to the question?",
}


def question_for(metric: str) -> str:
    """What the person is asked of each row, in words."""
    return QUESTIONS.get(metric, f"Is this row good on {metric}?")


@dataclass(frozen=True)
class Draw:
    """The rows to label: positions in the run's rows, in the order they are shown."""

    order: Order
    seed: int
    sample: int  # rows drawn
    of: int  # the run's rows, the population
    rows: list[int]

    def record(self) -> dict[str, Any]:
        """How the rows were drawn, as each label record's `sample` says it."""
        return {"method": self.order, "seed": self.seed, "n": self.sample, "of": self.of}

    @property
    def random(self) -> bool:
        """Whether any first k of the rows are a simple random sample of the scored rows."""
        return self.order == "random"

    def sampled(self) -> str:
        """How the rows were drawn, in words (the labels file's `sampled`)."""
        if self.random:
            return f"random seed={self.seed} n={self.sample} of {self.of}"
        return (
            f"disagreements first (not random): the {self.sample} of {self.of} rows whose "
            f"score is nearest 0.5, seed={self.seed} for ties"
        )


def draw(
    rows: list[ResultRow], metric: str, *, order: Order, seed: int, sample: int | None
) -> Draw:
    """The rows to label.

    Args:
        rows: the run's rows, in results.jsonl order.
        metric: the metric labelled.
        order: "random" (a seeded shuffle) or "disagreements" (least sure first).
        seed: the shuffle's seed (also the tie-break of "disagreements").
        sample: how many rows to draw; None for all of them.
    """
    if order not in ORDERS:
        raise InputFormatError(f"order {order!r} is not one of {', '.join(ORDERS)}")
    if not any(metric in row.scores for row in rows):
        present = sorted({m for row in rows for m in row.scores})
        raise InputFormatError(
            f"the run has no metric {metric!r} (its metrics: {', '.join(present) or 'none'}); "
            "name one with --metric"
        )
    if sample is not None and sample < 1:
        raise InputFormatError(f"--sample {sample}: give a number of rows, 1 or more")
    shuffled = list(range(len(rows)))
    # random.Random's shuffle of an int seed draws the same order on every Python 3.
    random.Random(seed).shuffle(shuffled)
    if order == "disagreements":
        # sorted() is stable: rows equally sure keep the shuffle's order.
        shuffled.sort(key=lambda i: _uncertainty(rows[i], metric))
    size = len(rows) if sample is None else min(sample, len(rows))
    return Draw(order, seed, size, len(rows), shuffled[:size])


def _uncertainty(row: ResultRow, metric: str) -> float:
    """How far the judge was from undecided: |score - 0.5|, 1 for a row it did not score."""
    score = _score(row, metric)
    return 1.0 if score is None else abs(score - 0.5)


def _score(row: ResultRow, metric: str) -> float | None:
    value = row.scores.get(metric)
    if row.error or value is None or math.isnan(value):
        return None
    return float(value)


def row_payload(row: ResultRow, metric: str) -> dict[str, Any]:
    """What the page shows of a row: its inputs and score as `judge agreement` shows a
    disagreement, each context with the judge's grade, each answer claim with its verdict."""
    shown = row_view(row, metric, math.nan, None)
    del shown["label"], shown["group"], shown["evidence"]
    evidence = Evidence(row.evidence)
    grades = {g.context: g for g in evidence.context_grades() if g.context is not None}
    shown["contexts"] = [
        {
            "number": i + 1,
            "text": str(text),
            "grade": grades[i].grade if i in grades else None,
            "reason": grades[i].reason if i in grades else None,
        }
        for i, text in enumerate(row.contexts or [])
    ]
    claims = evidence.claims(ANSWER)
    verdicts = (
        {v.claim: v for v in (claims.verdicts or ()) if v.claim is not None} if claims else {}
    )
    shown["claims"] = [
        {
            "number": k + 1,
            "text": text,
            "verdict": verdicts[k].verdict if k in verdicts else None,
            "supported": verdicts[k].ok if k in verdicts else None,
            "reason": verdicts[k].reason if k in verdicts else None,
            "context": _context_number(verdicts[k].context) if k in verdicts else None,
        }
        for k, text in enumerate(claims.claims if claims else ())
    ]
    score = shown["score"]
    shown["score"] = None if score is None or math.isnan(score) else score
    shown["id"] = None if row.id is None else str(row.id)
    shown["why_no_score"] = row.reasons.get(metric) or (row.error and f"error: {row.error}")
    return shown


def _context_number(value: Any) -> int | None:
    """The context a verdict names, counted from 1 as the page shows them."""
    return value + 1 if isinstance(value, int) and not isinstance(value, bool) else None
