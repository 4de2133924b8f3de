"""The result of a batch evaluation: one row per input row, and a summary per metric.

Undefined values (a score with a NaN reason, a mean over no rows) are NaN in every Python
object and in pandas, and null in JSON files (results.jsonl, summary.json).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import os
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from judge.formatting import MISSING, number
from judge.json_values import dumps_nan_as_null, nan_to_null
from judge.metrics.registry import JUDGE_ERROR
from judge.stats import bootstrap_cis

if TYPE_CHECKING:
    from judge.run.outputs import RunOutcome


def _score_json(value: float | None) -> float | None:
    """A score as results.jsonl holds it: a float, or null when undefined."""
    if value is None:
        return None
    number = float(value)
    return None if number != number else number


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
        """The row as JSON-able data, NaN scores as null; scores as floats, so a row read
        back with `from_json` gives the same data."""
        return nan_to_null(self.json_fields())  # type: ignore[no-any-return]

    def json_line(self) -> str:
        """The row's results.jsonl line (without its newline): `to_json()` encoded with
        sorted keys, without copying the row unless a NaN besides the scores' is in it."""
        return dumps_nan_as_null(self.json_fields())

    def json_fields(self) -> dict[str, Any]:
        """The fields as `to_json()` gives them, but for a NaN outside the scores, which
        stays NaN: the containers are the row's own, not copies."""
        # Not dataclasses.asdict: it deep-copies every leaf of the evidence, which cost
        # more than judging a cached row.
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["scores"] = {m: _score_json(v) for m, v in self.scores.items()}
        return data

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


class RowTally:
    """What the summaries, the error counts and the report need of every row, gathered in one
    pass: per metric the scores in row order (the bootstrap resamples the defined ones), NaNs
    by reason and errors; per row its lowest score. The rows themselves are not kept.

    Args:
        metrics: the metrics to tally.
        size: the number of rows, when they are added out of order (`add(row, at=i)`, as
            a run's rows finish); None to add them in order.
    """

    def __init__(self, metrics: Sequence[str], size: int | None = None):
        blank = array("d", [math.nan]) * (size or 0)
        self._scores = {m: array("d", blank) for m in metrics}
        self.nan: dict[str, Counter[str]] = {m: Counter() for m in metrics}
        self.errored = dict.fromkeys(metrics, 0)
        self.rows = self.failed = self.judged = self.judge_errored = 0
        # per row: its lowest score, -1 when it has none
        self.lowest = array("d", [-1.0]) * (size or 0)
        self._sized = size is not None

    def add(self, row: ResultRow, at: int | None = None) -> None:
        """Count one row: the next one, or the one at position `at` of a sized tally."""
        if self._sized != (at is not None):
            raise ValueError("give `at` exactly when the tally was made with a size")
        self.rows += 1
        self.failed += row.failed
        if row.error is None:
            self.judged += 1
            self.judge_errored += JUDGE_ERROR in row.reasons.values()
        for metric, scores in self._scores.items():
            value = float(row.scores.get(metric, math.nan))
            if at is None:
                scores.append(value)
            else:
                scores[at] = value
            if not math.isnan(value):
                continue
            reason = row.reasons.get(metric, "row_error" if row.error else "missing")
            if reason in (JUDGE_ERROR, "row_error"):
                self.errored[metric] += 1
            else:
                self.nan[metric][reason] += 1
        defined = [v for v in row.scores.values() if not math.isnan(v)]
        lowest = min(defined) if defined else -1.0  # errored rows sort first
        if at is None:
            self.lowest.append(lowest)
        else:
            self.lowest[at] = lowest

    def to_json(self) -> dict[str, Any]:
        """The tally as JSON data (NaN scores as null), for `interleave`."""
        return {
            "metrics": list(self._scores),
            "rows": self.rows,
            "failed": self.failed,
            "judged": self.judged,
            "judge_errored": self.judge_errored,
            "errored": dict(self.errored),
            "nan": {m: dict(counts) for m, counts in self.nan.items()},
            "scores": {m: [None if v != v else v for v in a] for m, a in self._scores.items()},
            "lowest": list(self.lowest),
        }

    @classmethod
    def interleave(cls, parts: Sequence[Mapping[str, Any]]) -> RowTally:
        """The tally of rows dealt round-robin to `parts` (`to_json` data of each part, in
        order): row r is row r // N of part r % N, as `judge eval --shard I/N` deals them.

        Raises:
            ValueError: the parts do not fit together (other metrics, or row counts that
                round-robin dealing cannot give).
        """
        if not parts:
            raise ValueError("no tallies to interleave")
        metrics = list(parts[0]["metrics"])
        total = sum(int(p["rows"]) for p in parts)
        merged = cls(metrics, size=total)
        merged.rows = total
        for i, part in enumerate(parts):
            rows = int(part["rows"])
            if part["metrics"] != metrics or rows != len(range(i, total, len(parts))):
                raise ValueError(f"tally {i + 1} holds other metrics or {rows} rows")
            merged.failed += int(part["failed"])
            merged.judged += int(part["judged"])
            merged.judge_errored += int(part["judge_errored"])
            for m in metrics:
                merged.errored[m] += int(part["errored"][m])
                merged.nan[m].update({str(k): int(v) for k, v in part["nan"][m].items()})
                merged._scores[m][i :: len(parts)] = _floats(part["scores"][m], rows)
            merged.lowest[i :: len(parts)] = _floats(part["lowest"], rows)
        merged._sized = False  # complete: add() appends after it, as to an unsized tally
        return merged

    def defined(self, metric: str) -> np.ndarray:
        """The metric's defined scores (NaNs left out), in row order."""
        scores = np.frombuffer(self._scores[metric], dtype=np.float64)
        return scores[~np.isnan(scores)]

    def summary(self, metric: str) -> MetricSummary:
        """Mean, bootstrap interval, counts of one metric."""
        return self.summaries([metric])[metric]

    def summaries(self, metrics: Sequence[str]) -> dict[str, MetricSummary]:
        """The summaries of several metrics, their bootstraps sharing draws (same numbers)."""
        columns = [self.defined(m) for m in metrics]
        intervals = bootstrap_cis(columns)
        return {
            metric: MetricSummary(
                metric=metric,
                mean=float(values.mean()) if values.size else math.nan,
                ci_low=low,
                ci_high=high,
                scored=int(values.size),
                nan=dict(sorted(self.nan[metric].items())),
                errored=self.errored[metric],
            )
            for metric, values, (low, high) in zip(metrics, columns, intervals, strict=True)
        }


def _floats(values: Sequence[Any], size: int) -> array[float]:
    """JSON numbers (null as NaN) as an array of `size` doubles."""
    if len(values) != size:
        raise ValueError(f"{len(values)} values where {size} rows were tallied")
    return array("d", [math.nan if v is None else float(v) for v in values])


def summarize(metric: str, rows: Iterable[ResultRow]) -> MetricSummary:
    """Summary of one metric over the rows; NaNs are counted by reason, never dropped silently."""
    tally = RowTally([metric])
    for row in rows:
        tally.add(row)
    return tally.summary(metric)


class EvaluationResult:
    """Rows in input order, each with its row number, inputs, scores, reasons and evidence.

    `rows` is any sequence: `judge.evaluate` gives one that reads each row back from disk
    when asked (see `judge.run.checkpoint.RowFile`), so a run of 100,000 rows keeps only
    offsets and score vectors in memory. Summaries and counts are computed once, in one
    pass, when the result is made (or taken from `tally`, gathered as the rows were
    written); `list(result.rows)` holds every row at once.
    """

    def __init__(
        self,
        rows: Sequence[ResultRow],
        metrics: list[str],
        config: dict[str, Any],
        usage: dict[str, Any],
        *,
        tally: RowTally | None = None,
    ):
        self.rows = rows
        self.metrics = metrics
        self.config = config
        self.usage = usage
        if tally is None:
            tally = RowTally(metrics)
            for row in rows:
                tally.add(row)
        self._tally = tally
        self.summary = tally.summaries(metrics)

    @property
    def tally(self) -> RowTally:
        """What the summaries and counts were computed from, gathered in one pass."""
        return self._tally

    @property
    def rows_with_errors(self) -> int:
        """Rows that could not be evaluated (bad input) or had a judge fail."""
        return self._tally.failed

    @property
    def judged_rows(self) -> int:
        """Rows whose input was good, so their judges ran (or came from the cache)."""
        return self._tally.judged

    @property
    def rows_with_judge_errors(self) -> int:
        """Judged rows in which at least one judge failed (a `judge_error` NaN)."""
        return self._tally.judge_errored

    @property
    def judge_error_rate(self) -> float:
        """Share of the judged rows in which a judge failed; 0.0 when no row was judged.

        Their scores are missing from the means, which can move by up to this share:
        `judge eval` fails a run above `--max-error-rate`; the library never raises for it.
        """
        judged = self.judged_rows
        return self.rows_with_judge_errors / judged if judged else 0.0

    def scores(self, metric: str) -> list[float]:
        """The metric's defined scores (NaNs left out), in row order."""
        return list(self._tally.defined(metric).tolist())

    def worst(self, limit: int = 10) -> list[ResultRow]:
        """The rows with the lowest score (over any metric), errored rows first; ties in
        row order."""
        lowest = self._tally.lowest
        chosen = heapq.nsmallest(limit, range(len(lowest)), key=lowest.__getitem__)
        return [self.rows[i] for i in chosen]

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

    def write_jsonl(self, path: str | os.PathLike[str]) -> str:
        """Every row with its evidence and usage as JSON lines, in input order (NaN as
        null); returns the sha256 of the file written (summary.json records it)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        lines = getattr(self.rows, "json_lines", None)  # rows on disk give their text
        texts = lines() if lines is not None else (row.json_line() + "\n" for row in self.rows)
        digest = hashlib.sha256()
        with open(path, "wb") as out:
            for text in texts:
                data = text.encode("utf-8")
                digest.update(data)
                out.write(data)
        return digest.hexdigest()

    def write(
        self,
        out: str | os.PathLike[str],
        *,
        fail_under: Mapping[str, float] | None = None,
        max_error_rate: float = 0.05,
    ) -> RunOutcome:
        """Write the folder `judge eval` writes (results.jsonl, report.html, summary.json,
        and a shard's shard.json), byte for byte, and apply its gates.

        The files are published whole: written under temporary names, then renamed into
        place, summary.json last with the sha256 of results.jsonl; the folder is locked
        while it is written.

        Args:
            out: the folder; created if absent.
            fail_under: metric -> the lowest mean that passes (`--fail-under`).
            max_error_rate: the largest share of judged rows with a failed judge, and of
                all rows that could not be read, that passes (`--max-error-rate`).

        Returns:
            A `judge.run.outputs.RunOutcome`: `code` is `judge eval`'s exit code (0
            passed, 1 a threshold missed, 3 scores missing), with the reasons.
        """
        from judge.run.outputs import write_outputs  # report renders results: above run

        return write_outputs(self, out, fail_under=fail_under, max_error_rate=max_error_rate)

    def write_csv(self, path: str | os.PathLike[str]) -> None:
        """The flat rows as CSV (contexts as a JSON list); a text cell a spreadsheet would
        take for a formula (`=`, `+`, `-`, `@` ... first) gets a quote in front, numbers
        stay numbers (`judge.spreadsheet`)."""
        from pandas.api.types import is_numeric_dtype

        from judge.spreadsheet import safe_cell

        frame = self.to_pandas()
        frame["contexts"] = [json.dumps(c, ensure_ascii=False) for c in frame["contexts"]]
        for column in frame.columns:
            if not is_numeric_dtype(frame[column]):  # text, None, ids of text and numbers
                frame[column] = frame[column].map(safe_cell)
        frame.columns = [safe_cell(str(c)) for c in frame.columns]
        # CRLF, as RFC 4180 writes it: the csv module quotes a cell holding a character of
        # the line terminator, so a text with a lone "\r" cannot end a row ("\n" would not).
        frame.to_csv(path, index=False, lineterminator="\r\n")

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
