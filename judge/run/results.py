"""The result of a batch evaluation: one row per input row, and a summary per metric."""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from judge.stats import bootstrap_ci


@dataclass(frozen=True)
class MetricSummary:
    """Mean, 95% bootstrap CI, how many rows were scored, NaN (by reason), errored."""

    metric: str
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    scored: int
    nan: dict[str, int]  # reason -> rows (undefined cases)
    errored: int  # rows whose judge failed or whose input was bad


def _clean(value: float) -> float | None:
    return None if math.isnan(value) else value


def summarize(metric: str, rows: list[dict[str, Any]]) -> MetricSummary:
    """Summary of one metric over the rows; NaNs are counted by reason, never dropped silently."""
    values: list[float] = []
    reasons: Counter[str] = Counter()
    errored = 0
    for row in rows:
        value = row["scores"].get(metric)
        if value is not None:
            values.append(value)
            continue
        reason = row["reasons"].get(metric, "row_error" if row.get("error") else "missing")
        if reason in ("judge_error", "row_error"):
            errored += 1
        else:
            reasons[reason] += 1
    array = np.asarray(values, dtype=np.float64)
    low, high = bootstrap_ci(array)
    return MetricSummary(
        metric=metric,
        mean=float(array.mean()) if array.size else None,
        ci_low=_clean(low),
        ci_high=_clean(high),
        scored=int(array.size),
        nan=dict(sorted(reasons.items())),
        errored=errored,
    )


class EvaluationResult:
    """Rows in input order, each with its row number, inputs, scores, reasons and evidence."""

    def __init__(
        self,
        rows: list[dict[str, Any]],
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
    def errors(self) -> int:
        """Rows that could not be evaluated (bad input) or had a judge fail."""
        return sum(1 for r in self.rows if r.get("error") or r["errors"])

    def summary_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-able data."""
        return {
            "metrics": {m: asdict(s) for m, s in self.summary.items()},
            "rows": len(self.rows),
            "rows_with_errors": self.errors,
            "usage": self.usage,
            "config": self.config,
        }

    def flat_rows(self) -> list[dict[str, Any]]:
        """One flat record per row: inputs, a column per metric (NaN when undefined), reasons."""
        out = []
        for row in self.rows:
            flat = {
                k: row.get(k)
                for k in ("row", "id", "question", "answer", "contexts", "ground_truth", "error")
            }
            for m in self.metrics:
                value = row["scores"].get(m)
                flat[m] = math.nan if value is None else value
                flat[f"{m}_reason"] = row["reasons"].get(m)
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
                out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")

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
            mean = "-" if s.mean is None else f"{s.mean:.3f}"
            ci = "-" if s.ci_low is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            nan = ", ".join(f"{k} {v}" for k, v in s.nan.items()) or "-"
            lines.append(f"{s.metric:<22} {mean:>7} {ci:>17} {s.scored:>7} {s.errored:>7}  {nan}")
        return "\n".join(lines)
