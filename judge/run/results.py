"""The result of a batch evaluation: one row per input row, and a summary per metric.

Undefined values (a score with a NaN reason, a mean over no rows) are NaN in every Python
object and in pandas, and null in JSON files (results.jsonl, summary.json).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judge.json_values import nan_to_null
from judge.metrics.registry import JUDGE_ERROR
from judge.report.format import MISSING, number
from judge.stats import bootstrap_ci


@dataclass
class ResultRow:
    """One evaluated input row: its inputs, a score per metric and what lies behind each.

    Args:
        row: the row's number in the input, from 0.
        id: the sample's id (its id column, else the row number).
        question, answer, contexts, ground_truth: the inputs as read (None for a bad row).
        error: why the row could not be evaluated at all (bad input), else None.
        scores: metric -> value; NaN when undefined, with the reason in `reasons`.
        reasons: metric -> why its score is NaN (`no_contexts`, `judge_error`, ...).
        errors: metric -> the message of the judge failure behind a `judge_error`.
        evidence: the judgments behind the scores (claims, verdicts, grades, replies).
        usage: requests, cache hits, tokens and cost of this row.
    """

    row: int
    id: str | int | None = None
    question: str | None = None
    answer: str | None = None
    contexts: list[str] | None = None
    ground_truth: str | None = None
    error: str | None = None
    scores: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """Whether the row's input was bad or any of its judges failed."""
        return bool(self.error or self.errors)

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-able data, NaN scores as null."""
        return nan_to_null(asdict(self))  # type: ignore[no-any-return]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ResultRow:
        """A row from `to_json()` data (a results.jsonl line); null scores become NaN."""
        known = {f for f in cls.__dataclass_fields__ if f in data}
        row = cls(**{f: data[f] for f in known})
        row.scores = {m: math.nan if v is None else float(v) for m, v in row.scores.items()}
        return row


@dataclass(frozen=True)
class MetricSummary:
    """Mean, 95% bootstrap CI (NaN when no row was scored), rows scored, NaN by reason, errored."""

    metric: str
    mean: float
    ci_low: float
    ci_high: float
    scored: int
    nan: dict[str, int]  # reason -> rows (undefined cases)
    errored: int  # rows whose judge failed or whose input was bad


def summarize(metric: str, rows: list[ResultRow]) -> MetricSummary:
    """Summary of one metric over the rows; NaNs are counted by reason, never dropped silently."""
    values: list[float] = []
    reasons: Counter[str] = Counter()
    errored = 0
    for row in rows:
        value = row.scores.get(metric, math.nan)
        if not math.isnan(value):
            values.append(value)
            continue
        reason = row.reasons.get(metric, "row_error" if row.error else "missing")
        if reason in (JUDGE_ERROR, "row_error"):
            errored += 1
        else:
            reasons[reason] += 1
    array = np.asarray(values, dtype=np.float64)
    low, high = bootstrap_ci(array)
    return MetricSummary(
        metric=metric,
        mean=float(array.mean()) if array.size else math.nan,
        ci_low=low,
        ci_high=high,
        scored=int(array.size),
        nan=dict(sorted(reasons.items())),
        errored=errored,
    )


class EvaluationResult:
    """Rows in input order, each with its row number, inputs, scores, reasons and evidence."""

    def __init__(
        self,
        rows: list[ResultRow],
        metrics: list[str],
        config: dict[str, Any],
        usage: dict[str, Any],
    ):
        self.rows = rows
        self.metrics = metrics
        self.config = config
        self.usage = usage
        self.summary = {m: summarize(m, rows) for m in metrics}

    @property
    def rows_with_errors(self) -> int:
        """Rows that could not be evaluated (bad input) or had a judge fail."""
        return sum(1 for r in self.rows if r.failed)

    @property
    def judged_rows(self) -> int:
        """Rows whose input was good, so their judges ran (or came from the cache)."""
        return sum(1 for r in self.rows if r.error is None)

    @property
    def rows_with_judge_errors(self) -> int:
        """Judged rows in which at least one judge failed (a `judge_error` NaN)."""
        return sum(1 for r in self.rows if r.error is None and JUDGE_ERROR in r.reasons.values())

    @property
    def judge_error_rate(self) -> float:
        """Share of the judged rows in which a judge failed; 0.0 when no row was judged.

        Their scores are missing from the means, which can move by up to this share:
        `judge eval` fails a run above `--max-error-rate`; the library never raises for it.
        """
        judged = self.judged_rows
        return self.rows_with_judge_errors / judged if judged else 0.0

    def summary_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-able data (NaN as null)."""
        return nan_to_null(  # type: ignore[no-any-return]
            {
                "metrics": {m: asdict(s) for m, s in self.summary.items()},
                "rows": len(self.rows),
                "rows_with_errors": self.rows_with_errors,
                "judge_errors": {
                    "rows": self.rows_with_judge_errors,
                    "judged_rows": self.judged_rows,
                    "rate": self.judge_error_rate,
                },
                "usage": self.usage,
                "config": self.config,
            }
        )

    def flat_rows(self) -> list[dict[str, Any]]:
        """One flat record per row: inputs, a column per metric (NaN when undefined), reasons."""
        out = []
        for row in self.rows:
            flat: dict[str, Any] = {
                k: getattr(row, k)
                for k in ("row", "id", "question", "answer", "contexts", "ground_truth", "error")
            }
            for m in self.metrics:
                flat[m] = row.scores.get(m, math.nan)
                flat[f"{m}_reason"] = row.reasons.get(m)
            out.append(flat)
        return out

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per input row, a column per metric."""
        import pandas

        return pandas.DataFrame(self.flat_rows())

    def to_dataset(self) -> Any:
        """A datasets.Dataset with the same columns as `to_pandas()`."""
        import datasets

        return datasets.Dataset.from_pandas(self.to_pandas(), preserve_index=False)

    def write_jsonl(self, path: str | os.PathLike[str]) -> None:
        """Every row with its evidence and usage as JSON lines, in input order (NaN as null)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as out:
            for row in self.rows:
                out.write(json.dumps(row.to_json(), ensure_ascii=False, sort_keys=True) + "\n")

    def write_csv(self, path: str | os.PathLike[str]) -> None:
        """The flat rows as CSV (contexts as a JSON list)."""
        frame = self.to_pandas()
        frame["contexts"] = [json.dumps(c, ensure_ascii=False) for c in frame["contexts"]]
        frame.to_csv(path, index=False)

    def write_parquet(self, path: str | os.PathLike[str]) -> None:
        """The flat rows as Parquet."""
        self.to_pandas().to_parquet(path, index=False)

    def table(self) -> str:
        """The summary as a text table for the terminal."""
        lines = [f"{'metric':<22} {'mean':>7} {'95% CI':>17} {'scored':>7} {'errors':>7}  NaN"]
        for s in self.summary.values():
            mean = number(s.mean)
            ci = MISSING if math.isnan(s.ci_low) else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            nan = ", ".join(f"{k} {v}" for k, v in s.nan.items()) or MISSING
            lines.append(f"{s.metric:<22} {mean:>7} {ci:>17} {s.scored:>7} {s.errored:>7}  {nan}")
        return "\n".join(lines)
