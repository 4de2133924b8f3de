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

from judge.formatting import counted
from judge.json_values import dumps_nan_as_null, nan_to_null
from judge.metrics.registry import JUDGE_ERROR, metric_range
from judge.stats import bootstrap_cis, cluster_bootstrap_cis, interval_note


def _score_json(value: float | None) -> float | None:
    """A score as results.jsonl holds it: a float, or null when undefined."""
    if value is None:
        return None
    number = float(value)
    return None if number != number else number


# Fields written only for a conversation's turns (`trace_id`: only for a turn that gives one).
_TURN_FIELDS = ("conversation_id", "turn", "trace_id")


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
        trace_id: the trace a turn was read from, as its input gives it (each turn of
            `judge traces extract --sessions` is a trace; its row's id names the session
            and turn, not the trace); None for a row that is no turn, whose id is the
            trace id when it was read from one.
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
    trace_id: str | None = None

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
    """Mean, 95% bootstrap CI (NaN when no row was scored, or when the bootstrap gives none:
    `judge.stats.few_units_interval`), rows scored, NaN by reason, errored."""

    metric: str
    mean: float
    ci_low: float
    ci_high: float
    scored: int
    nan: dict[str, int]  # reason -> rows (undefined cases)
    errored: int  # rows whose judge failed or whose input was bad


@dataclass(frozen=True)
class TurnSummary:
    """The turns at one position of their conversations (1: each conversation's first judged
    assistant turn), with each metric's mean over them (NaN when none was scored)."""

    position: int
    turns: int
    means: dict[str, float]
    scored: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        """The position as summary.json's `by_turn` records it (NaN as null)."""
        return nan_to_null(  # type: ignore[no-any-return]
            {
                "position": self.position,
                "turns": self.turns,
                "metrics": {
                    m: {"mean": self.means[m], "scored": self.scored[m]} for m in self.means
                },
            }
        )


@dataclass
class ConversationSummary:
    """One conversation's turns judged in a run, with each metric's mean over them (NaN when
    none was scored): a conversation-level metric is scored on its final turn alone."""

    conversation_id: str
    turns: int
    means: dict[str, float]
    scored: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        """The conversation as conversations.jsonl records it (NaN as null)."""
        return nan_to_null(  # type: ignore[no-any-return]
            {
                "conversation_id": self.conversation_id,
                "turns": self.turns,
                "scores": self.means,
                "scored": self.scored,
            }
        )


# Rows taken at once by `RowTally.worst`, the histograms and the check for NaN scores:
# bounds their arrays to well under a MiB (at 1 << 16 rows, `worst`'s were 3.6 MiB of the
# peak of a run of 300,000 rows, and none of one of 10,000).
WORST_CHUNK = 1 << 13
# A row's place in the tally's per-row conversation numbers and turns when it is no turn.
NO_TURN = -1


@dataclass(frozen=True)
class Resampling:
    """What the bootstrap resampled: "row", or "conversation" (whole conversations, each
    row that is no conversation's turn counted as one of its own) with their numbers."""

    unit: str
    units: int  # rows, or conversations
    rows: int

    def __str__(self) -> str:
        if self.unit == "row":
            return f"resampled by row ({counted(self.rows, 'row')})"
        return (
            f"resampled by conversation ({counted(self.units, 'conversation')}, "
            f"{counted(self.rows, 'turn')})"
        )

    def to_json(self) -> dict[str, Any]:
        """The resampling as summary.json records it."""
        return {"unit": self.unit, "conversations": self.units, "turns": self.rows}


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
        self._size = size or 0
        # Only when a row is a conversation's turn: per row the conversation's number
        # (NO_TURN for a row that is none; 4 bytes a row, the ids once each) and its turn.
        self._conversation_ids: dict[str, int] = {}
        self._conversation: array[int] | None = None
        self._turn: array[int] | None = None

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
        position = len(self.row_failed) if at is None else at
        if at is None:
            self.row_failed.append(row.failed)
        else:
            self.row_failed[at] = row.failed
        if row.conversation_id is not None or self._conversation is not None:
            self._add_turn(row, position)

    def _add_turn(self, row: ResultRow, position: int) -> None:
        """Record the row's conversation and turn, once any row is a conversation's turn."""
        if self._conversation is None or self._turn is None:
            # The first turn: the rows before it (or all, in a sized tally) are no turns.
            length = self._size if self._sized else position
            self._conversation = array("i", [NO_TURN]) * length
            self._turn = array("i", [NO_TURN]) * length
        number, turn = NO_TURN, NO_TURN
        if row.conversation_id is not None:
            key = str(row.conversation_id)
            number = self._conversation_ids.setdefault(key, len(self._conversation_ids))
            # only orders a conversation's turns: one a 4-byte slot cannot hold orders first
            turn = row.turn if isinstance(row.turn, int) and 0 <= row.turn < 2**31 else NO_TURN
        if self._sized:
            self._conversation[position] = number
            self._turn[position] = turn
        else:
            self._conversation.append(number)
            self._turn.append(turn)

    @property
    def conversations(self) -> int:
        """How many conversations the rows' turns belong to (0: no row is a turn)."""
        return len(self._conversation_ids)

    def clusters(self) -> np.ndarray | None:
        """The resampling unit of each row: a number per conversation, and one of its own
        for each row that is no turn, numbered 0, 1, ... in order of their first row (so the
        numbers do not depend on the order the rows were added, nor on shards); None when
        no row is a conversation's turn (rows are resampled)."""
        if self._conversation is None:
            return None
        conversation = np.frombuffer(self._conversation, dtype=np.int32).astype(np.int64)
        rows = np.arange(conversation.size, dtype=np.int64)
        keys = np.where(conversation >= 0, conversation, self.conversations + rows)
        return _first_seen_order(keys)

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
            # a conversation run's only: the runs before conversations wrote the same bytes
            **(
                {
                    "conversation_ids": list(self._conversation_ids),
                    "conversation": list(self._conversation),
                    "turn": list(self._turn),
                }
                if self._conversation is not None and self._turn is not None
                else {}
            ),
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
        if any("conversation_ids" in part for part in parts):
            merged._interleave_turns(parts)
        merged._sized = False  # complete: add() appends after it, as to an unsized tally
        return merged

    def _interleave_turns(self, parts: Sequence[Mapping[str, Any]]) -> None:
        """The conversations and turns of interleaved parts, their numbers made one (a
        conversation's turns are dealt to several shards)."""
        size = self._size
        self._conversation = array("i", [NO_TURN]) * size
        self._turn = array("i", [NO_TURN]) * size
        for i, part in enumerate(parts):
            rows = int(part["rows"])
            ids = [str(c) for c in part.get("conversation_ids", [])]
            numbers = [int(c) for c in part.get("conversation", [NO_TURN] * rows)]
            turns = [int(t) for t in part.get("turn", [NO_TURN] * rows)]
            if len(numbers) != rows or len(turns) != rows:
                raise ValueError(f"tally {i + 1}: conversations of other rows than its {rows}")
            merged = [
                self._conversation_ids.setdefault(c, len(self._conversation_ids)) for c in ids
            ]
            if any(not NO_TURN <= n < len(ids) for n in numbers):
                raise ValueError(f"tally {i + 1}: a conversation number it names no id for")
            self._conversation[i :: len(parts)] = array(
                "i", [NO_TURN if n == NO_TURN else merged[n] for n in numbers]
            )
            self._turn[i :: len(parts)] = array("i", turns)

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

    def histogram(self, metric: str, bins: int = 10) -> np.ndarray:
        """The metric's defined scores counted in `bins` bins (see `histogram_counts`)."""
        return histogram_counts(np.frombuffer(self._scores[metric], dtype=np.float64), bins)

    def defined(self, metric: str) -> np.ndarray:
        """The metric's defined scores (NaNs left out), in row order."""
        scores = np.frombuffer(self._scores[metric], dtype=np.float64)
        return scores[~np.isnan(scores)]

    def _defined_or_all(self, metric: str) -> np.ndarray:
        """`defined(metric)`, but the tally's own scores (a view, not a copy of every row's)
        when none is NaN; only while no row is added (a view pins the array's size)."""
        scores = np.frombuffer(self._scores[metric], dtype=np.float64)
        # looked for a chunk at a time: np.isnan of every score is a byte a row more
        for start in range(0, scores.size, WORST_CHUNK):
            if np.isnan(scores[start : start + WORST_CHUNK]).any():
                return scores[~np.isnan(scores)]
        return scores

    def _groups(self, metrics: Sequence[str]) -> list[np.ndarray] | None:
        """Each metric's scored rows' conversations, numbered 0..C-1 among them (a row that
        is no turn as a conversation of its own); None unless rows are turns."""
        clusters = self.clusters()
        if clusters is None:
            return None
        groups = []
        for metric in metrics:
            scores = np.frombuffer(self._scores[metric], dtype=np.float64)
            # numbered again among the rows this metric scored, in the same order
            groups.append(_first_seen_order(clusters[~np.isnan(scores)]))
        return groups

    def interval_notes(self, metrics: Sequence[str]) -> dict[str, str]:
        """Why a metric's summary has no bootstrap interval (one row or conversation, or
        scores all the same: `judge.stats.interval_note`), by metric; only those."""
        groups = self._groups(metrics)
        notes = {}
        for k, metric in enumerate(metrics):
            note = interval_note(
                self._defined_or_all(metric),
                clusters=None if groups is None else groups[k],
                bounds=metric_range(metric),
            )
            if note is not None:
                notes[metric] = note
        return notes

    def summary(self, metric: str) -> MetricSummary:
        """Mean, bootstrap interval, counts of one metric."""
        return self.summaries([metric])[metric]

    def resampling(self) -> Resampling:
        """What the bootstrap of the summaries resamples: rows, or conversations."""
        clusters = self.clusters()
        if clusters is None:
            return Resampling("row", self.rows, self.rows)
        return Resampling("conversation", int(clusters.max(initial=-1)) + 1, self.rows)

    def conversation_rows(self, number: int) -> list[int]:
        """The positions of the rows of row `number`'s conversation (its own included), in
        order of `turn`, then of row; [] for a row that is no conversation's turn."""
        if self._conversation is None or self._turn is None:
            return []
        conversation = np.frombuffer(self._conversation, dtype=np.int32)
        if not 0 <= number < conversation.size or conversation[number] == NO_TURN:
            return []
        rows = np.flatnonzero(conversation == conversation[number])
        turns = np.frombuffer(self._turn, dtype=np.int32)[rows]
        return [int(i) for i in rows[np.lexsort((rows, turns))]]

    def turn_positions(self) -> np.ndarray | None:
        """Each row's position among its conversation's turns here, from 1 (the
        conversation's 1st judged turn, 2nd, ...: ranked by `turn`), 0 for a row that is no
        turn; None when no row is a conversation's turn. Rows of one `turn` share its
        position: two conversations given one id (forks of one chat) are not one
        conversation of twice the turns."""
        if self._conversation is None or self._turn is None:
            return None
        conversation = np.frombuffer(self._conversation, dtype=np.int32)
        turn = np.frombuffer(self._turn, dtype=np.int32)
        rows = np.arange(conversation.size)
        order = np.lexsort((rows, turn, conversation))  # by conversation, then turn, then row
        ordered, turns = conversation[order], turn[order]
        starts = np.r_[True, ordered[1:] != ordered[:-1]] if ordered.size else ordered.astype(bool)
        new_turn = starts | (np.r_[True, turns[1:] != turns[:-1]] if turns.size else starts)
        rank = np.cumsum(new_turn)  # counts the distinct turns, across conversations
        first = np.maximum.accumulate(np.where(starts, rank, 0))
        positions = np.zeros(conversation.size, dtype=np.int64)
        positions[order] = rank - first + 1
        positions[conversation == NO_TURN] = 0
        return positions

    def by_turn(self, metrics: Sequence[str]) -> list[TurnSummary]:
        """Each metric's mean by turn position (see `turn_positions`): one entry per
        position that some conversation reaches, in order; [] when no row is a turn."""
        positions = self.turn_positions()
        if positions is None or not positions.size or positions.max() < 1:
            return []
        last = int(positions.max())
        turns = np.bincount(positions, minlength=last + 1)
        out = [TurnSummary(p, int(turns[p]), {}, {}) for p in range(1, last + 1)]
        for metric in metrics:
            scores = np.frombuffer(self._scores[metric], dtype=np.float64)
            defined = ~np.isnan(scores) & (positions > 0)
            counts = np.bincount(positions[defined], minlength=last + 1)
            sums = np.bincount(positions[defined], weights=scores[defined], minlength=last + 1)
            for entry in out:
                scored = int(counts[entry.position])
                entry.scored[metric] = scored
                entry.means[metric] = float(sums[entry.position] / scored) if scored else math.nan
        return out

    def by_conversation(self, metrics: Sequence[str]) -> list[ConversationSummary]:
        """Each conversation's turns and each metric's mean over them, in the order the
        conversations first appear; [] when no row is a turn."""
        if self._conversation is None:
            return []
        conversation = np.frombuffer(self._conversation, dtype=np.int32).astype(np.int64)
        turn_rows = conversation >= 0
        size = len(self._conversation_ids)
        turns = np.bincount(conversation[turn_rows], minlength=size)
        out = [
            ConversationSummary(cid, int(turns[n]), {}, {})
            for cid, n in self._conversation_ids.items()
        ]
        for metric in metrics:
            scores = np.frombuffer(self._scores[metric], dtype=np.float64)
            defined = turn_rows & ~np.isnan(scores)
            counts = np.bincount(conversation[defined], minlength=size)
            sums = np.bincount(conversation[defined], weights=scores[defined], minlength=size)
            for number, entry in enumerate(out):
                scored = int(counts[number])
                entry.scored[metric] = scored
                entry.means[metric] = float(sums[number] / scored) if scored else math.nan
        # in input order (rows may have been added as they finished)
        first = np.full(size, conversation.size, dtype=np.int64)
        np.minimum.at(first, conversation[turn_rows], np.flatnonzero(turn_rows))
        return [out[n] for n in np.argsort(first, kind="stable")]

    def summaries(self, metrics: Sequence[str]) -> dict[str, MetricSummary]:
        """The summaries of several metrics, their bootstraps sharing draws (same numbers).

        When rows are turns of conversations the intervals resample conversations
        (`judge.stats.cluster_bootstrap_cis`), each row that is no turn as a conversation
        of its own; else rows, as they always did."""
        columns = [self._defined_or_all(m) for m in metrics]
        bounds = [metric_range(m) for m in metrics]
        groups = self._groups(metrics)
        if groups is None:
            intervals = bootstrap_cis(columns, bounds=bounds)
        else:
            intervals = cluster_bootstrap_cis(columns, groups, bounds=bounds)
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


def histogram_counts(values: np.ndarray, bins: int = 10) -> np.ndarray:
    """How many of the values fall in each of `bins` equal bins of [0, 1]: bin int(v * bins),
    clipped (the last bin holds 1.0); NaNs left out.

    Counted a chunk of `WORST_CHUNK` values at a time: the scaled copies of every value at
    once were the largest thing the end of a million-row run held (23 MiB)."""
    counts = np.zeros(bins, dtype=np.int64)
    for start in range(0, values.size, WORST_CHUNK):
        chunk = values[start : start + WORST_CHUNK]
        chunk = chunk[~np.isnan(chunk)]
        counts += np.bincount(np.clip(chunk * bins, 0, bins - 1).astype(np.int64), minlength=bins)
    return counts


def _first_seen_order(keys: np.ndarray) -> np.ndarray:
    """Each key's number among the distinct keys, numbered in order of first occurrence."""
    if not keys.size:
        return np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


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
