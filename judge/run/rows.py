"""A run's rows as results.jsonl holds them, and the summaries counted from them in one pass.

Undefined values (a score with a NaN reason, a mean over no rows) are NaN in every Python
object and in pandas, and null in JSON files (results.jsonl, summary.json).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from judge.json_values import dumps_nan_as_null, nan_to_null
from judge.metrics.registry import JUDGE_ERROR
from judge.stats import bootstrap_cis


def _score_json(value: float | None) -> float | None:
    """A score as results.jsonl holds it: a float, or null when undefined."""
    if value is None:
        return None
    number = float(value)
    return None if number != number else number


# Fields written only for a conversation's turns.
_TURN_FIELDS = ("conversation_id", "turn")


@dataclass
class ResultRow:
    """One evaluated input row: its inputs, a score per metric and what lies behind each.

    Args:
        row: the row's number in the input, from 0.
        id: the sample's id (its id column, else the row number).
        question: the question as read (None for a bad row, as for the other inputs).
        answer: the answer as read.
        contexts: the contexts as read, in rank order.
        ground_truth: the expected answer as read.
        error: why the row could not be evaluated at all (bad input), else None.
        scores: metric -> value; NaN when undefined, with the reason in `reasons`.
        reasons: metric -> why its score is NaN (`no_contexts`, `judge_error`, ...).
        errors: metric -> the message of the judge failure behind a `judge_error`.
        evidence: the judgments behind the scores (claims, verdicts, grades, replies).
        usage: requests, cache hits, tokens and cost of this row.
        conversation_id: the conversation an assistant turn belongs to (None for a row that
            is not a turn of one); turns of one conversation are resampled together.
        turn: the turn's 1-based position among the conversation's messages.
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
    conversation_id: str | None = None
    turn: int | None = None

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
        # A row that is no conversation's turn is written as before conversations existed.
        for name in _TURN_FIELDS:
            if data[name] is None:
                del data[name]
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


# Rows taken at once by `RowTally.worst`: bounds its arrays to a few MiB.
WORST_CHUNK = 1 << 16


class RowTally:
    """What the summaries, the error counts and the report need of every row, gathered in one
    pass: per metric the scores in row order (the bootstrap resamples the defined ones), NaNs
    by reason and errors; per row whether it failed (the report's worst samples come from
    these, see `worst`). The rows themselves are not kept.

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
        # per row: 1 when its input was bad or a judge failed (ResultRow.failed), else 0
        self.row_failed = array("b", [0]) * (size or 0)
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
        if at is None:
            self.row_failed.append(row.failed)
        else:
            self.row_failed[at] = row.failed

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
            "row_failed": list(self.row_failed),
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
            flags = [int(bool(f)) for f in part["row_failed"]]
            if len(flags) != rows:
                raise ValueError(f"{len(flags)} row flags where {rows} rows were tallied")
            merged.row_failed[i :: len(parts)] = array("b", flags)
        merged._sized = False  # complete: add() appends after it, as to an unsized tally
        return merged

    def worst(self, limit: int = 10) -> list[int]:
        """The numbers of the worst rows, at most `limit` (see WORST_ORDER): rows that
        failed (bad input, or a judge failed) first, then the rows with the lowest mean of
        their defined scores; ties in row order. A row whose every defined score is 1 or
        more is not among them, nor one with no defined score that did not fail.

        Taken a chunk of rows at a time (`WORST_CHUNK`), each chunk's worst kept: the
        order is total, so the worst of those are the worst of all, and the arrays of a
        chunk, not of every row, are what it holds (a million rows: 51 MiB less)."""
        if not self._scores or not self.rows:
            return [int(i) for i in np.flatnonzero(self.row_failed)[:limit]]
        columns = [np.frombuffer(a, dtype=np.float64) for a in self._scores.values()]
        flags = np.frombuffer(self.row_failed, dtype=np.int8)
        kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for start in range(0, columns[0].size, WORST_CHUNK):
            stop = min(columns[0].size, start + WORST_CHUNK)
            scores = np.vstack([c[start:stop] for c in columns])
            defined = ~np.isnan(scores)
            count = defined.sum(axis=0)
            mean = np.where(defined, scores, 0.0).sum(axis=0) / np.maximum(count, 1)
            failed = flags[start:stop].astype(bool)
            below = (defined & (scores < 1.0)).any(axis=0)
            chosen = failed | below
            rows = np.arange(start, stop)
            key = np.where(failed, 0.0, mean)
            # failures first, then by mean, then by row (np.lexsort sorts by its last key first)
            order = np.lexsort((rows, key, ~failed))
            picked = order[chosen[order]][:limit]
            kept.append((failed[picked], key[picked], rows[picked]))
        failed, key, rows = (np.concatenate(part) for part in zip(*kept, strict=True))
        order = np.lexsort((rows, key, ~failed))
        return [int(i) for i in rows[order][:limit]]

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
