"""`judge estimate`: a run's judged scores corrected by people's labels on a random few of
its rows (prediction-powered inference, `judge.stats.ppi_mean`), beside the judge-only and
labels-only estimates.

The labels file (JSON lines, as `judge annotate` writes it; .csv, .json and .parquet read
too) holds one record per label given:

- `id`: the row's id as results.jsonl writes it (its input's id column, else the row's
  number from 0); matched as text, so 3 and "3" are one row.
- the label column (named by `label=`, `--label`): 0/1 or a number; null or absent for a
  row skipped.
- `annotator` (optional): who labelled. A later record of the same row and annotator
  replaces an earlier one (the file is appended to); the labels of several annotators of a
  row are averaged, unless `annotator=` picks one.
- `sample` (optional): how the row came to be labelled, `{"method": "random", "seed": 7,
  "of": 400}` for a row of a seeded uniform random sample of the run's 400 rows (in a CSV,
  that object's JSON text). Any other method (`"disagreements"`, `"manual"`), or none, is
  not random: the interval then does not hold, and the estimate says so (or refuses, with
  `require_random=True`).

Every other field (`time`, the row's question and answer, ...) is left alone. In a JSON
lines file, a line that is no JSON object (the last line of `judge annotate` killed
mid-write, which the next session leaves in the middle of the file) is left out and said,
as `judge annotate` does.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from judge.errors import InputFormatError, JudgeError
from judge.formatting import number
from judge.json_values import nan_to_null
from judge.lines import universal_lines
from judge.metrics.registry import higher_is_better
from judge.run.corrected import CorrectedMean
from judge.run.data import checked_path, loads_json, read_records
from judge.run.folder import RunFolder
from judge.run.gates import Gates, users_metrics
from judge.run.result_view import ResultView
from judge.run.rows import ResultRow
from judge.stats import (
    MeanInterval,
    PPIEstimate,
    ks_two_sample,
    ppi_mean,
    ppi_mean_difference,
)

KEY = "id"
SAMPLE = "sample"
RANDOM = "random"
ANNOTATOR = "annotator"
METRIC = "metric"
LOWER = "1 - score (lower is better)"
RUN_CONFIDENCE = 0.95  # the coverage of a run's own intervals (summary.json's ci_low, ci_high)


@dataclass(frozen=True)
class LabelFile:
    """The labels of a labels file, one per row id, and how they were drawn.

    Args:
        labels: row id (as text) -> label (the mean of its annotators' latest labels).
        not_random: ids of rows whose labels record no random sample.
        samples: each distinct `sample` description, as JSON text, and the labels giving it.
        skipped: ids of rows whose latest record (of every annotator) is a skip.
        annotators: annotator -> rows labelled.
        problems: the lines of a JSON-lines file left out, each said in words.
        metrics: each metric the labels' `metric` field names (`judge annotate` records
            the metric the person was asked about) and the labels naming it.
    """

    labels: dict[str, float]
    not_random: set[str]
    samples: dict[str, int]
    skipped: set[str]
    annotators: dict[str, int]
    problems: list[str] = field(default_factory=list)
    metrics: dict[str, int] = field(default_factory=dict)


def blank_value(value: Any) -> bool:
    """Whether a field is empty: None, NaN (a CSV's empty cell) or ""."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


def _sample(value: Any) -> dict[str, Any] | None:
    """A record's `sample` description as a dict (from its JSON text in a CSV); None for none."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"method": value}
    return dict(value) if isinstance(value, dict) else None


def _label(value: Any, where: str, label: str) -> float | None:
    """A label as a number, None for a skip (null, blank); an error for anything else."""
    if blank_value(value):
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        value = {"true": 1, "false": 0}.get(text, text)
    try:
        number_ = float(value)
    except (TypeError, ValueError):
        number_ = math.nan
    if not math.isfinite(number_):
        raise InputFormatError(
            f"{where}: label {label!r} is {value!r}: a label must be a number (0/1, or a "
            "grade), or null for a row skipped"
        )
    return number_


def _read_labels(
    labels: str | os.PathLike[str] | list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], str, list[str]]:
    """The label records, their source, and the lines of a JSON-lines file left out for
    being no JSON object (each said in words); other files as `read_records` reads them."""
    if not isinstance(labels, (str, os.PathLike)) or Path(labels).suffix.lower() != ".jsonl":
        records, source = read_records(labels)
        return records, source, []
    path, _ = checked_path(os.fspath(labels))
    found: list[dict[str, Any]] = []
    problems: list[str] = []
    with path.open("rb") as handle:
        for number, raw in universal_lines(handle, path):
            try:
                text = raw.decode("utf-8")
                if number == 1:
                    text = text.removeprefix("\ufeff")  # a byte order mark, as editors save
                if not text.strip():
                    continue
                record = loads_json(text)
                if not isinstance(record, dict):
                    raise ValueError(f"a {type(record).__name__}, not an object")
            except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
                problems.append(
                    f"{path} line {number} is no JSON object ({exc}) and is left out (a line "
                    "cut off when judge annotate was killed mid-write is one)"
                )
                continue
            found.append(record)
    return found, str(path), problems


def read_label_file(
    labels: str | os.PathLike[str] | list[dict[str, Any]],
    *,
    label: str,
    annotator: str | None = None,
) -> LabelFile:
    """The labels of a labels file (module docstring: its fields), one per row id.

    Args:
        labels: the labels file (or its records).
        label: the label column.
        annotator: use this annotator's labels only (default: every annotator's, averaged).
    """
    records, source, problems = _read_labels(labels)
    if not any(KEY in r for r in records):
        raise InputFormatError(
            f"{source}: no {KEY!r} field in the labels: each label record names its row by "
            "the id results.jsonl gives it"
        )
    if not any(label in r for r in records):
        present = sorted({k for r in records for k in r})
        raise InputFormatError(
            f"{source}: no label column {label!r} (columns: {', '.join(present)}); name the "
            "right one with label="
        )
    latest: dict[tuple[str, str], tuple[float | None, dict[str, Any] | None, str | None]] = {}
    for number_, record in enumerate(records):
        ident = record.get(KEY)
        if blank_value(ident):
            raise InputFormatError(f"{source}: record {number_} (from 0) has no {KEY!r}")
        who = "" if blank_value(record.get(ANNOTATOR)) else str(record[ANNOTATOR])
        if annotator is not None and who != annotator:
            continue
        value = _label(record.get(label), f"{source}: record {number_} (from 0)", label)
        named = record.get(METRIC)
        metric = None if blank_value(named) else str(named)
        latest[(str(ident), who)] = (value, _sample(record.get(SAMPLE)), metric)
    if annotator is not None and not latest:
        raise InputFormatError(f"{source}: no record of annotator={annotator!r}")
    given: dict[str, list[float]] = {}
    randoms: dict[str, bool] = {}
    samples: Counter[str] = Counter()
    annotators: Counter[str] = Counter()
    metrics: Counter[str] = Counter()
    seen: set[str] = set()
    for (ident, who), (value, sample, metric) in latest.items():
        seen.add(ident)
        if value is None:
            continue
        given.setdefault(ident, []).append(value)
        random = sample is not None and sample.get("method") == RANDOM
        randoms[ident] = randoms.get(ident, True) and random
        samples[json.dumps(sample, sort_keys=True) if sample else "none recorded"] += 1
        if who:
            annotators[who] += 1
        if metric is not None:
            metrics[metric] += 1
    return LabelFile(
        labels={ident: float(np.mean(values)) for ident, values in given.items()},
        not_random={ident for ident, random in randoms.items() if not random},
        samples=dict(samples),
        skipped=seen - given.keys(),
        annotators=dict(annotators),
        problems=problems,
        metrics=dict(metrics),
    )


@dataclass
class Estimate:
    """A metric's judged mean over a run, corrected with people's labels: `judge estimate`.

    Args:
        metric: the metric.
        label: the label column.
        orientation: "score", or "1 - score" for a metric where lower is better (the labels
            are read as higher = better, as `judge agreement` reads them).
        rows: rows of the run.
        ppi: the estimates (`PPIEstimate`): PPI, judge-only and labels-only.
        random: whether every labelled row records a random sample.
        samples: each `sample` description of the labels and the labels giving it.
        warnings: what makes the interval doubtful (not a random sample, labels of unknown
            rows, skips).
        config: the inputs: results, labels file, confidence.
        gates: the gates checked on the PPI interval (`METRIC>=VALUE`, `METRIC<=VALUE`).
        missed: the gates missed: a floor by the interval's lower end, a cap by its upper.
        difference: whether this is the paired difference B - A of two runs
            (`estimate_difference`), not one run's mean.
    """

    metric: str
    label: str
    orientation: str
    rows: int
    ppi: PPIEstimate
    random: bool
    samples: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    gates: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    difference: bool = False

    @property
    def up(self) -> bool:
        """Whether the scores are read as they are (higher is better)."""
        return self.orientation != LOWER

    def on_metric_scale(self, mean: float, low: float, high: float) -> tuple[float, ...]:
        """(mean, low, high) on the metric's own scale: turned back (1 - x, and for a
        difference -x) for a metric where lower is better."""
        if self.up:
            return mean, low, high
        if self.difference:
            return -mean, -high, -low
        return 1 - mean, 1 - high, 1 - low

    def judge_alone(self, mean: float, low: float, high: float, n: int) -> None:
        """Take the judge-only estimate (on the metric's scale) from where the reader sees
        it beside this one: the run's table, the comparison's delta. The rows are the
        same, but their bootstrap resampled them in another order, so its interval differs
        from `ppi_mean`'s in the last digits; a count that differs changes nothing."""
        if n != self.ppi.judge_only.n:
            return
        if not self.up:  # back to the labels' scale: 1 - x, or -x for a difference
            mean, low, high = (
                (-mean, -high, -low) if self.difference else (1 - mean, 1 - high, 1 - low)
            )
        self.ppi = dataclasses.replace(self.ppi, judge_only=MeanInterval(mean, low, high, n))

    @property
    def interval(self) -> tuple[float, float]:
        """The PPI interval on the metric's scale, the one its gates are checked on."""
        _, low, high = self.on_metric_scale(self.ppi.mean, self.ppi.low, self.ppi.high)
        return low, high

    def line(self) -> str:
        """One line for a report: the corrected mean and the judge's, on the metric's
        scale ("faithfulness corrected by 40 labels: 0.483 [0.396, 0.571] (judge alone:
        0.686 [0.644, 0.728])")."""
        p, j = self.ppi, self.ppi.judge_only
        mean, low, high = self.on_metric_scale(p.mean, p.low, p.high)
        alone = self.on_metric_scale(j.mean, j.low, j.high)
        what = f"{self.metric}, B - A," if self.difference else self.metric
        return (
            f"{what} corrected by {p.n_labelled} labels: {number(mean)} "
            f"[{number(low)}, {number(high)}] (judge alone: {number(alone[0])} "
            f"[{number(alone[1])}, {number(alone[2])}]; {p.confidence:.0%} intervals)"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the `--format json` output), NaN as null."""
        ppi = self.ppi.to_dict()
        data = {
            "metric": self.metric,
            **({"of": "B - A"} if self.difference else {}),
            "label": self.label,
            "orientation": self.orientation,
            "rows": self.rows,
            "confidence": ppi.pop("confidence"),
            "ppi": {k: ppi.pop(k) for k in ("mean", "low", "high", "lambda")},
            **ppi,
            "random_sample": self.random,
            "samples": self.samples,
            "warnings": self.warnings,
            "gates": {"gates": self.gates, "missed": self.missed},
            "config": self.config,
        }
        return nan_to_null(data)  # type: ignore[no-any-return]

    def table(self, *, warnings: bool = True) -> str:
        """The three estimates as a terminal table, with the notes and (unless the caller
        says them itself) the warnings."""
        p = self.ppi
        level = f"{p.confidence:.0%}".rjust(4)
        head = f"{'estimate':<12} {'mean':>7} {level + ' interval':>20} {'n':>7}"
        of = ", B - A," if self.difference else ""
        lines = [
            f"{self.metric} ({self.orientation}){of} against labels {self.label!r}",
            "",
            head,
            "=" * len(head),
        ]
        rows = (
            ("judge only", p.judge_only.mean, p.judge_only.low, p.judge_only.high, p.judge_only.n),
            (
                "labels only",
                p.labels_only.mean,
                p.labels_only.low,
                p.labels_only.high,
                p.n_labelled,
            ),
            ("PPI", p.mean, p.low, p.high, p.n_labelled + p.n_unlabelled),
        )
        for name, mean, low, high, n in rows:
            interval = f"[{number(low)}, {number(high)}]"
            lines.append(f"{name:<12} {number(mean):>7} {interval:>20} {n:>7}")
        lines += [
            "",
            f"PPI: {p.n_labelled} labelled rows and {p.n_unlabelled} judged without a label; "
            f"lambda {p.lam:.3f} (0: the labels alone, 1: plain PPI).",
            "The judge-only interval is of the judge's own mean: blind to the judge's bias.",
        ]
        lines += [f"note: {note}" for note in p.notes]
        if self.gates:
            lines.append(
                f"gates on the PPI interval ({', '.join(self.gates)}): "
                f"{len(self.gates) - len(self.missed)} of {len(self.gates)} met"
            )
            lines += [f"missed: {line}" for line in self.missed]
        lines += [f"WARNING: {warning}" for warning in self.warnings if warnings]
        return "\n".join(lines)


def _lower_is_better(metric: str, own_lower: Iterable[str]) -> bool:
    """Whether lower is better for a metric: the registry's word for built-ins, the run's
    recorded `lower_is_better` for its own."""
    return metric in users_metrics(own_lower) or not higher_is_better(metric)


def _source_text(labels: str | os.PathLike[str] | list[dict[str, Any]]) -> str:
    """The labels as the outputs name them: the file, or how many records were given."""
    return f"{len(labels)} records" if isinstance(labels, list) else str(labels)


def _row_positions(rows: Sequence[ResultRow]) -> dict[str, list[int]]:
    """Row id (as text) -> the positions of the rows it names, in order."""
    positions: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        positions.setdefault(str(row.id), []).append(i)
    return positions


def _unique_positions(rows: Sequence[ResultRow], where: str, ids: Iterable[str]) -> dict[str, int]:
    """Row id (as text) -> its position; ids among `ids` that name several rows are refused."""
    positions = _row_positions(rows)
    doubled = [ident for ident in ids if len(positions.get(ident, ())) > 1]
    if doubled:
        raise _doubled(where, doubled)
    return {ident: found[0] for ident, found in positions.items()}


_ROWS_SHOWN = 5  # the rows of a repeated id an error quotes


def _paired_positions(rows: Sequence[ResultRow], where: str) -> dict[str, int]:
    """Row id (as text) -> its position, for a difference that pairs two runs' rows by id:
    an id that names several rows, labelled or not, is refused, as pairing by it would
    pair one row of each run and leave the others out."""
    positions = _row_positions(rows)
    doubled = [(ident, found) for ident, found in positions.items() if len(found) > 1]
    if doubled:
        ident, found = doubled[0]
        numbers = [str(rows[i].row) for i in found[:_ROWS_SHOWN]]
        shown = f"{', '.join(numbers[:-1])} and {numbers[-1]}"
        if len(found) > _ROWS_SHOWN:
            shown = f"{', '.join(numbers)} and {len(found) - _ROWS_SHOWN} more"
        others = f" (and {len(doubled) - 1} other ids)" if len(doubled) > 1 else ""
        raise InputFormatError(
            f"{where}: id {ident!r} names rows {shown}{others}: the label-corrected "
            "difference pairs A's and B's rows by id, so an id must name one row of each "
            "run; give each sample its own id (an id column) and evaluate again"
        )
    return {ident: found[0] for ident, found in positions.items()}


def _doubled(where: str, doubled: Sequence[str]) -> InputFormatError:
    """The error of labelled ids that name several rows."""
    return InputFormatError(
        f"{where}: ids {', '.join(map(repr, doubled[:5]))} name several rows: "
        "a label cannot be joined to one; give the run unique ids (an id column)"
    )


def _none_labelled(found: LabelFile, label: str) -> InputFormatError:
    """The error of labels that are all skips."""
    return InputFormatError(
        f"no row is labelled: the {len(found.skipped)} rows of the labels were all "
        f"skipped (label {label!r} null or blank); label some rows first"
    )


_ROW_IDS_SHOWN = 3  # row ids an error of labels of no row quotes


def _no_row(where: str, unknown: Sequence[str], row_ids: Sequence[str]) -> InputFormatError:
    """The error of labels none of whose ids is a row of the run, with the first few rows'
    ids (`row_ids`): a conversation's turns are CONV#TURN, and 3.0 is not the row 3."""
    like = ", ".join(map(repr, row_ids[:_ROW_IDS_SHOWN]))
    return InputFormatError(
        f"no labelled id is a row of {where} (labels for ids "
        f"{', '.join(map(repr, unknown[:5]))}; the rows' ids are like {like}): are the "
        "labels of another run? A label's id is its row's id in results.jsonl, as text"
    )


def _check_graded(metric: str, label: str, values: np.ndarray) -> None:
    """Refuse labels off [0, 1] for a metric where lower is better (read as 1 - score)."""
    if values.size and not ((values >= 0) & (values <= 1)).all():
        # 1 - score is compared with labels on [0, 1]: graded labels (1-5) would give a
        # 'rate' of -1.4, under every cap its gates set
        raise InputFormatError(
            f"{metric} is a metric where lower is better, read as 1 - score against labels on "
            f"[0, 1] (1 = good); the labels in {label!r} run from {number(float(values.min()))} "
            f"to {number(float(values.max()))}: give 0/1 labels (1 = good), or labels rescaled "
            "to [0, 1]"
        )


def _check_random(found: LabelFile, not_random: int, matched: int) -> None:
    """Refuse labels whose rows do not all record a random sample (require_random=)."""
    if not_random:
        raise JudgeError(
            f"{not_random} of {matched} labelled rows record no random sample "
            f"(samples: {_samples_text(found.samples)}): the interval holds only for labels "
            "of a random sample; label a seeded random sample of the rows (judge annotate "
            "draws one), or leave out require_random= to estimate anyway, with a warning"
        )


@dataclass(frozen=True)
class Joined:
    """Labels joined by id to a run's rows.

    Args:
        labelled: the positions of the labelled rows, ascending.
        unlabelled: the positions of the other rows.
        values: the label of each labelled row, in the order of `labelled`.
        unknown: labelled ids that are no row of the run (left out).
        not_random: labelled rows of the run that record no random sample.
    """

    labelled: np.ndarray
    unlabelled: np.ndarray
    values: np.ndarray
    unknown: list[str]
    not_random: int


def join_labels(rows: Sequence[ResultRow], found: LabelFile, *, where: str, label: str) -> Joined:
    """The labels joined to the rows by id (module docstring: the file); an error when no
    row is labelled, when no label names a row, or when a labelled id names several.

    Args:
        rows: the run's rows.
        found: the labels.
        where: the run, as messages name it.
        label: the label column, as messages name it.
    """
    if not found.labels:
        raise _none_labelled(found, label)
    positions = _unique_positions(rows, where, found.labels)
    unknown = sorted(ident for ident in found.labels if ident not in positions)
    matched = {positions[i]: v for i, v in found.labels.items() if i in positions}
    if not matched:
        raise _no_row(where, unknown, [str(row.id) for row in rows[:_ROW_IDS_SHOWN]])
    labelled = np.array(sorted(matched), dtype=np.int64)
    return Joined(
        labelled=labelled,
        unlabelled=np.setdiff1d(np.arange(len(rows)), labelled),
        values=np.array([matched[i] for i in labelled.tolist()], dtype=np.float64),
        unknown=unknown,
        not_random=len([i for i in found.not_random if i in positions]),
    )


@dataclass(frozen=True)
class RunScores:
    """A run's scores of one metric, read as the labels read: higher is better.

    Args:
        folder: the run's folder.
        rows: its rows, in order.
        scores: the metric's score per row (NaN where undefined), 1 - score for a metric
            where lower is better.
        up: whether the metric is read as is (False: as 1 - score).
    """

    folder: RunFolder
    rows: list[ResultRow]
    scores: np.ndarray
    up: bool


def run_scores(results: str | os.PathLike[str], metric: str) -> RunScores:
    """A run's scores of `metric`, oriented as labels are (higher is better).

    Args:
        results: the run: its output folder or results.jsonl.
        metric: the metric.
    """
    folder = RunFolder.of(results)
    rows = _run_rows(folder)
    _has_metric(rows, metric, str(folder.results), "metric")
    up = not _lower_is_better(metric, folder.lower_is_better())
    scores = np.array([r.scores.get(metric, math.nan) for r in rows], dtype=np.float64)
    return RunScores(folder, rows, scores if up else 1.0 - scores, up)


@dataclass(frozen=True)
class LabelledRun(RunScores):
    """A run's oriented scores (`RunScores`) joined by id to the labels of a labels file.

    Args:
        found: the labels file as read.
        labelled: the positions of the labelled rows, ascending.
        unlabelled: the positions of the other rows.
        values: the label of each labelled row, in the order of `labelled`.
        unknown: labelled ids that are no row of the run (left out).
        not_random: labelled rows of the run that record no random sample.
    """

    found: LabelFile
    labelled: np.ndarray
    unlabelled: np.ndarray
    values: np.ndarray
    unknown: list[str]
    not_random: int


def labelled_run(
    results: str | os.PathLike[str],
    *,
    labels: str | os.PathLike[str] | list[dict[str, Any]],
    label: str,
    metric: str,
    annotator: str | None = None,
) -> LabelledRun:
    """A run's scores of `metric` joined to the labels of a labels file by id (module
    docstring: the file), as `estimate` joins them.

    Args:
        results: the run: its output folder or results.jsonl.
        labels: the labels file (or its records).
        label: the label column.
        metric: the metric.
        annotator: use this annotator's labels only (default: every annotator's, averaged).
    """
    run = run_scores(results, metric)
    folder, rows = run.folder, run.rows
    found = read_label_file(labels, label=label, annotator=annotator)
    joined = join_labels(rows, found, where=str(folder.results), label=label)
    return LabelledRun(
        folder=folder,
        rows=rows,
        scores=run.scores,
        up=run.up,
        found=found,
        labelled=joined.labelled,
        unlabelled=joined.unlabelled,
        values=joined.values,
        unknown=joined.unknown,
        not_random=joined.not_random,
    )


def estimate_rows(
    rows: Sequence[ResultRow],
    found: LabelFile,
    *,
    where: str,
    label: str,
    metric: str,
    lower_is_better: Iterable[str] = (),
    confidence: float = 0.95,
    require_random: bool = False,
    config: dict[str, Any] | None = None,
) -> Estimate:
    """The PPI estimate of one metric over a run's rows (`estimate`, from rows already
    read): labels joined to rows by id, NaN scores left out, a lower-is-better metric read
    as 1 - score.

    Args:
        rows: the run's rows.
        found: the labels (`read_label_file`).
        where: the run, as messages name it.
        label: the label column.
        metric: the metric (the run must have it).
        lower_is_better: the run's own metrics where lower is better.
        confidence: the intervals' coverage.
        require_random: refuse labels whose rows do not all record a random sample.
        config: the inputs, as `Estimate.config` records them.
    """
    joined = join_labels(rows, found, where=where, label=label)
    not_random, matched = joined.not_random, joined.labelled.size
    if require_random:
        _check_random(found, not_random, matched)
    up = not _lower_is_better(metric, lower_is_better)
    if not up:
        _check_graded(metric, label, joined.values)
    scores = np.array([r.scores.get(metric, math.nan) for r in rows], dtype=np.float64)
    oriented = scores if up else 1.0 - scores
    labelled, unlabelled = oriented[joined.labelled], oriented[joined.unlabelled]
    result = ppi_mean(unlabelled, labelled, joined.values, confidence)
    warnings = _warnings(found, not_random, matched, joined.unknown, len(rows))
    warnings += _falling(labelled, joined.values, metric, up)
    if not not_random:
        warnings += _not_spread_as_drawn(labelled, unlabelled)
    if any(r.conversation_id is not None for r in rows):
        warnings.append(_TURNS)
    return Estimate(
        metric=metric,
        label=label,
        orientation="score" if up else LOWER,
        rows=len(rows),
        ppi=result,
        random=not not_random,
        samples=found.samples,
        warnings=warnings,
        config=config or {},
    )


_TURNS = (
    "the rows are turns of conversations: PPI treats them as independent rows, so the "
    "interval may be too narrow when a conversation's turns move together"
)


def estimate(
    results: str | os.PathLike[str],
    *,
    labels: str | os.PathLike[str] | list[dict[str, Any]],
    label: str,
    metric: str,
    confidence: float = 0.95,
    annotator: str | None = None,
    require_random: bool = False,
    gates: Gates | Iterable[str] = (),
) -> Estimate:
    """A run's judged mean of one metric corrected by people's labels on some of its rows
    (`judge.ppi_mean`), beside the judge-only and labels-only estimates.

    Rows are joined to labels by `id` (module docstring: the labels file). The labelled
    rows are left out of the unlabelled ones; rows the judge left NaN are left out of both
    (the estimate is of the rows the judge scored). A metric where lower is better is read
    as 1 - score, so the labels read higher = better as in `judge agreement`.

    Args:
        results: the run: its output folder or results.jsonl.
        labels: the labels file (or its records).
        label: the label column.
        metric: the metric whose mean is corrected.
        confidence: the intervals' coverage, strictly between 0 and 1.
        annotator: use this annotator's labels only (default: every annotator's, averaged).
        require_random: refuse labels whose rows do not all record a random sample.
        gates: bounds on the corrected mean, `METRIC>=VALUE` or `METRIC<=VALUE` (as
            `judge eval --gate` takes them), met only by the whole PPI interval: a floor
            by its lower end, a cap by its upper end (`Estimate.missed`). VALUE is on the
            labels' scale; for a metric where lower is better, on 1 - that (the share of
            rows labelled bad, for 0/1 labels).

    Returns:
        An `Estimate`: `table()` for the terminal, `to_dict()` for JSON.
    """
    checked = gates if isinstance(gates, Gates) else Gates.of(gates)
    for bound in checked.bounds:
        if bound.metric != metric:
            raise JudgeError(
                f"{checked.words.gate_example(str(bound))} names {bound.metric}: the "
                f"estimate corrects metric={metric!r} alone"
            )
    folder = RunFolder.of(results)
    rows = _run_rows(folder)
    _has_metric(rows, metric, str(folder.results), "metric")
    found = read_label_file(labels, label=label, annotator=annotator)
    result = estimate_rows(
        rows,
        found,
        where=str(folder.results),
        label=label,
        metric=metric,
        lower_is_better=folder.lower_is_better(),
        confidence=confidence,
        require_random=require_random,
        config={
            "results": str(folder.results),
            "labels": _source_text(labels),
            "annotator": annotator,
            "annotators": found.annotators,
        },
    )
    result.gates = [str(b) for b in checked.bounds]
    result.missed = checked.missed_by_intervals({metric: result.interval}, "PPI interval")
    return result


def _run_rows(folder: RunFolder) -> list[ResultRow]:
    """A run's rows; an error when it has no results file."""
    if not folder.results.is_file():
        raise InputFormatError(f"{folder.results}: no such results file (judge eval writes one)")
    return [row for _, _, row in folder.rows()]


def _metrics_of(rows: Iterable[ResultRow]) -> list[str]:
    """The metrics the rows have scores of, sorted."""
    return sorted({m for r in rows for m in r.scores})


def _has_metric(rows: Sequence[ResultRow], metric: str, where: str, keyword: str) -> None:
    """Refuse a metric the run does not have, naming the ones it has."""
    _is_known(_metrics_of(rows), metric, where, keyword)


def _is_known(known: Sequence[str], metric: str, where: str, keyword: str) -> None:
    """Refuse a metric that is not among the run's metrics `known`, naming them."""
    if metric not in known:
        raise InputFormatError(
            f"{where}: no metric {metric!r} in the run (metrics: "
            f"{', '.join(known) or 'none'}); name one of them with {keyword}="
        )


def labelled_metric(
    found: LabelFile,
    given: str | None,
    *,
    candidates: Sequence[str],
    known: Sequence[str],
    keyword: str,
) -> str:
    """The metric the labels are of: `given` (metric=), else the one the labels' `metric`
    field names, else the only one of `candidates` (the gated metrics, or those asked
    for), else the run's only metric. Labels that name another metric than `given` are
    refused: a person asked whether an answer is faithful did not grade its relevance.

    Args:
        found: the labels.
        given: the metric the caller named, or None.
        candidates: the metrics the call singles out (the gated ones), in order.
        known: the run's metrics.
        keyword: how the caller names the metric, for messages (metric, label_metric).
    """
    named = sorted(found.metrics)
    if given is not None:
        if named and named != [given]:
            raise InputFormatError(
                f"{keyword}={given!r}, but the labels are of {', '.join(map(repr, named))} "
                f"(their {METRIC!r} field, as judge annotate records it): correct that "
                f"metric, or leave out {keyword}="
            )
        return given
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        raise InputFormatError(
            f"the labels are of several metrics ({', '.join(map(repr, named))}, their "
            f"{METRIC!r} field): name the one to correct with {keyword}="
        )
    single = list(dict.fromkeys(m for m in candidates if m in known))
    if len(single) == 1:
        return single[0]
    if len(known) == 1:
        return known[0]
    raise InputFormatError(
        f"which metric are the labels of? They record none (no {METRIC!r} field) and the "
        f"run has {', '.join(known) or 'none'}: name it with {keyword}="
    )


@dataclass(frozen=True)
class Labels:
    """People's labels of some of a run's rows, to correct one metric's judged mean where
    the run is written: `EvaluationResult.write(out, labels=Labels(...))`, `judge eval
    --labels FILE --label COLUMN`. The corrected mean (PPI, as `estimate`) goes into
    summary.json (`label_corrected`) and the report, and the metric's gates are held to
    the corrected interval.

    Args:
        labels: the labels file (module docstring: its fields), or its records.
        label: the label column.
        metric: the metric the labels are of; default the one their `metric` field names
            (judge annotate records it), else the only gated metric, else the run's only
            metric.
        annotator: use this annotator's labels only (default: every annotator's, averaged).
        require_random: refuse labels whose rows do not all record a random sample
            (default: a warning).
        confidence: the interval's coverage, strictly between 0 and 1.
        keyword: how the caller names `metric` in messages (the CLI: label_metric).
    """

    labels: str | os.PathLike[str] | list[dict[str, Any]]
    label: str
    metric: str | None = None
    annotator: str | None = None
    require_random: bool = False
    confidence: float = 0.95
    keyword: str = field(default="metric", compare=False, repr=False)
    snapshot: LabelFile | None = field(default=None, compare=False, repr=False)

    def read(self) -> LabelFile:
        """The labels, read and checked (a bad file, or labels of another metric than
        `metric`, fail here: `judge eval` reads them before any request); the snapshot
        when there is one. require_random is checked on the labels of the run's rows
        (`check_rows`, `correct`): a label of no row is left out, random or not."""
        if self.snapshot is not None:
            return self.snapshot
        found = read_label_file(self.labels, label=self.label, annotator=self.annotator)
        if self.metric is not None:  # labels of another metric than the one named
            labelled_metric(found, self.metric, candidates=(), known=(), keyword=self.keyword)
        return found

    def read_now(self) -> Labels:
        """These labels with the file read and checked now, and kept (`snapshot`): a run
        is then corrected with the labels checked before it, whatever is written to the
        file while its rows are judged (an edit that would fail the run at its end)."""
        return dataclasses.replace(self, snapshot=self.read())

    def check_rows(
        self,
        ids: Iterable[Any],
        *,
        metrics: Sequence[str],
        gates: Gates,
        where: str,
        lower_is_better: Iterable[str] = (),
    ) -> None:
        """Refuse, before any row is judged, what `correct` would refuse once the run is
        judged (`judge eval --labels` calls it on its input): labels of no metric the run
        computes, all skipped, of no row of the input or of one row only, or of an id that
        names several rows, or (require_random) of rows that record no random sample (or,
        for a metric where lower is better, labels off [0, 1]).

        Args:
            ids: each row's id as results.jsonl will write it, in order
                (`judge.run.inputs.InputRows.ids`); read once, only the labelled ids seen
                are kept.
            metrics: the metrics the run will compute.
            gates: the run's gates (their metric may say which one the labels are of).
            where: the input, as messages name it.
            lower_is_better: the run's own metrics where lower is better.
        """
        found = self.read()
        known = sorted(metrics)
        metric = labelled_metric(
            found, self.metric, candidates=gates.metrics, known=known, keyword=self.keyword
        )
        _is_known(known, metric, where, self.keyword)
        if not found.labels:
            raise _none_labelled(found, self.label)
        seen: set[str] = set()
        doubled: list[str] = []
        first: list[str] = []  # the first rows' ids, for an error of labels of no row
        for ident in ids:
            text = str(ident)
            if len(first) < _ROW_IDS_SHOWN:
                first.append(text)
            if text not in found.labels:
                continue
            if text in seen and text not in doubled:
                doubled.append(text)
            seen.add(text)
        if doubled:
            raise _doubled(where, doubled)
        if not seen:
            raise _no_row(where, sorted(found.labels), first)
        if self.require_random:  # as `correct` checks it: on the labels of the run's rows
            _check_random(found, len(found.not_random & seen), len(seen))
        if len(seen) < 2:  # the interval needs two labelled rows: refused now, not at the end
            raise InputFormatError(
                f"only 1 labelled row is a row of {where} ({next(iter(seen))!r}): the "
                "corrected interval needs at least 2 labelled rows (30 or more to be "
                "trusted); label more rows of a random sample"
            )
        if _lower_is_better(metric, lower_is_better):
            values = np.array([found.labels[i] for i in sorted(seen)], dtype=np.float64)
            _check_graded(metric, self.label, values)

    def correct(self, result: ResultView, gates: Gates) -> CorrectedMean:
        """The labelled metric's corrected mean over a finished run (`Corrector`)."""
        rows = list(result.rows)
        found = self.read()
        where = f"the run of {result.config.source}"
        metric = labelled_metric(
            found,
            self.metric,
            candidates=gates.metrics,
            known=_metrics_of(rows),
            keyword=self.keyword,
        )
        _has_metric(rows, metric, where, self.keyword)
        got = estimate_rows(
            rows,
            found,
            where=where,
            label=self.label,
            metric=metric,
            lower_is_better=result.config.lower_is_better,
            confidence=self.confidence,
            require_random=self.require_random,
        )
        ran = result.summary.get(metric)
        if ran is not None and self.confidence == RUN_CONFIDENCE:
            got.judge_alone(ran.mean, ran.ci_low, ran.ci_high, ran.scored)
        got.warnings += _gated_off_scale(rows, found, metric, gates)
        record = got.to_dict()
        del record["gates"], record["config"]  # the run's gates are summary.json's own
        record["labels"] = _source_text(self.labels)
        record["annotator"] = self.annotator
        return CorrectedMean(
            metric=metric,
            interval=got.interval,
            line=got.line(),
            record=record,
            warnings=tuple(got.warnings),
        )


def estimate_difference(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    *,
    labels_a: str | os.PathLike[str] | list[dict[str, Any]],
    labels_b: str | os.PathLike[str] | list[dict[str, Any]],
    label: str,
    metric: str | None = None,
    candidates: Sequence[str] = (),
    confidence: float = 0.95,
    annotator: str | None = None,
    require_random: bool = False,
    keyword: str = "metric",
) -> Estimate:
    """The paired difference B - A of two runs' label means (`judge.ppi_mean_difference`):
    the rows of both runs joined by id, people's labels of A's outputs in `labels_a` and
    of B's in `labels_b`; the rows labelled in both files are the labelled rows, every
    other row both runs scored the unlabelled ones (`judge compare --labels-a/--labels-b`).

    Args:
        a: the baseline run (output folder or results.jsonl).
        b: the other run, of the same rows (ids).
        labels_a: the labels of A's outputs (a labels file, or its records).
        labels_b: the labels of B's outputs.
        label: the label column of both files.
        metric: the metric (default as `labelled_metric` chooses, over both files).
        candidates: metrics the call singles out (`judge compare --metric`).
        confidence: the interval's coverage.
        annotator: use this annotator's labels only.
        require_random: refuse labels whose rows do not all record a random sample.
        keyword: how the caller names `metric` in messages.

    Raises:
        InputFormatError: among others, when an id names several rows of either run
            (labelled or not): the rows are paired by id.
    """
    folders = RunFolder.of(a), RunFolder.of(b)
    rows_a, rows_b = (_run_rows(f) for f in folders)
    found_a = read_label_file(labels_a, label=label, annotator=annotator)
    found_b = read_label_file(labels_b, label=label, annotator=annotator)
    both = LabelFile(
        labels={},
        not_random=set(),
        samples={},
        skipped=set(),
        annotators={},
        metrics={
            m: found_a.metrics.get(m, 0) + found_b.metrics.get(m, 0)
            for m in {*found_a.metrics, *found_b.metrics}
        },
    )
    known = sorted(set(_metrics_of(rows_a)) & set(_metrics_of(rows_b)))
    chosen = labelled_metric(both, metric, candidates=candidates, known=known, keyword=keyword)
    for rows, folder in ((rows_a, folders[0]), (rows_b, folders[1])):
        _has_metric(rows, chosen, str(folder.results), keyword)
    where_a, where_b = str(folders[0].results), str(folders[1].results)
    at_a = _paired_positions(rows_a, f"A ({where_a})")
    at_b = _paired_positions(rows_b, f"B ({where_b})")
    paired = [ident for ident in at_a if ident in at_b]
    if not paired:
        raise InputFormatError(
            f"no row id of {where_a} is a row of {where_b}: the labels' difference pairs the "
            "two runs' rows by id, so compare runs of the same rows"
        )
    labelled = [i for i in paired if i in found_a.labels and i in found_b.labels]
    if not labelled:
        raise InputFormatError(
            "no row is labelled in both labels_a= and labels_b=: a paired difference needs "
            "people's labels of A's and of B's output on the same rows (label a seeded "
            "random sample of each run with the same seed: judge annotate draws one)"
        )
    up = not _lower_is_better(
        chosen, [*folders[0].lower_is_better(), *folders[1].lower_is_better()]
    )

    def scores(rows: list[ResultRow], at: dict[str, int], ids: list[str]) -> np.ndarray:
        values = np.array([rows[at[i]].scores.get(chosen, math.nan) for i in ids], dtype=float)
        return values if up else 1.0 - values

    rest = [i for i in paired if i not in set(labelled)]
    result = ppi_mean_difference(
        judged_a=scores(rows_a, at_a, rest),
        judged_b=scores(rows_b, at_b, rest),
        judged_labelled_a=scores(rows_a, at_a, labelled),
        judged_labelled_b=scores(rows_b, at_b, labelled),
        labels_a=[found_a.labels[i] for i in labelled],
        labels_b=[found_b.labels[i] for i in labelled],
        confidence=confidence,
    )
    warnings = []
    for side, found, at, rows in (("A", found_a, at_a, rows_a), ("B", found_b, at_b, rows_b)):
        not_random = len([i for i in found.not_random if i in at])
        matched = len([i for i in found.labels if i in at])
        if require_random:
            _check_random(found, not_random, matched)
        unknown = sorted(i for i in found.labels if i not in at)
        warnings += [
            f"{side}'s labels: {w}"
            for w in _warnings(found, not_random, matched, unknown, len(rows))
        ]
    warnings += _falling(
        scores(rows_b, at_b, labelled) - scores(rows_a, at_a, labelled),
        np.array([found_b.labels[i] - found_a.labels[i] for i in labelled], dtype=float),
        chosen,
        up,
    )
    one_side = sorted(i for i in paired if (i in found_a.labels) != (i in found_b.labels))
    if one_side:
        warnings.append(
            f"{len(one_side)} rows are labelled for one run only, counted as unlabelled: "
            f"{', '.join(map(repr, one_side[:5]))}{' ...' if len(one_side) > 5 else ''}"
        )
    if any(r.conversation_id is not None for r in rows_b):
        warnings.append(_TURNS)
    samples = {
        f"{side}: {text}": n
        for side, found in (("A", found_a), ("B", found_b))
        for text, n in found.samples.items()
    }
    return Estimate(
        metric=chosen,
        label=label,
        orientation="score" if up else LOWER,
        rows=len(paired),
        ppi=result,
        random=not (found_a.not_random & set(at_a)) and not (found_b.not_random & set(at_b)),
        samples=samples,
        warnings=warnings,
        config={
            "a": where_a,
            "b": where_b,
            "labels_a": _source_text(labels_a),
            "labels_b": _source_text(labels_b),
            "annotator": annotator,
        },
        difference=True,
    )


# How unlikely the labelled rows' judged scores must be under a random draw to be said: a
# random sample is warned about once in a thousand estimates.
SPREAD_P = 0.001


def _not_spread_as_drawn(labelled: np.ndarray, unlabelled: np.ndarray) -> list[str]:
    """A warning when the labelled rows' judged scores are not spread as the other rows'
    (two-sample Kolmogorov-Smirnov): labels said to be a random sample that are the
    judge's disagreements, or its high scores, are no random sample."""
    labelled, unlabelled = labelled[~np.isnan(labelled)], unlabelled[~np.isnan(unlabelled)]
    d, p = ks_two_sample(labelled, unlabelled)
    if not p < SPREAD_P:  # also NaN: no rows on one side
        return []
    return [
        f"the labelled rows' judged scores are not spread as the other rows' (Kolmogorov-"
        f"Smirnov D = {d:.3f}, p = {p:.1e}): whatever their sample says, they look picked "
        "by their score (the judge's disagreements, its low scores), and then the PPI "
        "interval does not hold; label a seeded random sample (judge annotate draws one)"
    ]


def _falling(scores: np.ndarray, labels: np.ndarray, metric: str, up: bool) -> list[str]:
    """A warning when the labels fall as the judge's (oriented) scores rise, beyond chance
    (Pearson's r, one-sided by Fisher's z, p below SPREAD_P): labels written 1 = bad (1 =
    'it hallucinated') where they are read 1 = good make the corrected mean the opposite
    of theirs, and lambda 0 hides it."""
    kept = ~np.isnan(scores)
    scores, labels = scores[kept], labels[kept]
    n = scores.size
    if n < 4 or np.ptp(scores) == 0 or np.ptp(labels) == 0:
        return []
    r = float(np.corrcoef(scores, labels)[0, 1])
    if not r < 0:
        return []
    z = math.atanh(max(r, -1 + 1e-15)) * math.sqrt(n - 3)
    p = NormalDist().cdf(z)
    if not p < SPREAD_P:
        return []
    good = "1 = good (faithful, relevant)"
    if not up:
        good = f"1 = good: for {metric}, 1 = no {metric.removesuffix('_rate')}"
    return [
        f"the labels fall as the judge's scores rise (Pearson r = {r:.2f} over {n} labelled "
        f"rows, p = {p:.1e}): labels are read higher = better, {good}; labels written 1 = "
        "bad make the corrected mean the opposite of theirs. Write them 1 = good (or 1 - "
        "label), or check the judge"
    ]


def _gated_off_scale(
    rows: Sequence[ResultRow], found: LabelFile, metric: str, gates: Gates
) -> list[str]:
    """A warning when the run's gates on the labelled metric, whose scores lie on [0, 1],
    are held to a mean of labels off [0, 1] (1-5 grades): the gate was written for the
    metric's scale and is met or missed on the labels' (faithfulness>=0.8 by grades
    averaging 2.8)."""
    gated = [str(bound) for bound in gates.bounds if bound.metric == metric]
    if not gated:
        return []
    at = {str(row.id) for row in rows}
    values = [value for ident, value in found.labels.items() if ident in at]
    scores = [row.scores.get(metric, math.nan) for row in rows]
    on_unit = all(0 <= s <= 1 for s in scores if not math.isnan(s))
    if not values or not on_unit or (min(values) >= 0 and max(values) <= 1):
        return []
    low, high = min(values), max(values)
    return [
        f"the labels run from {low:g} to {high:g}, so the corrected mean is on their scale, "
        f"and the gates {', '.join(gated)} are held to it where {metric}'s scores lie on "
        "[0, 1]: give labels on [0, 1] (1-5 grades as (grade - 1) / 4), or gates on the "
        "labels' scale"
    ]


def _samples_text(samples: dict[str, int]) -> str:
    return "; ".join(f"{text} ({n} labels)" for text, n in samples.items())


def _warnings(
    found: LabelFile, not_random: int, matched: int, unknown: list[str], rows: int
) -> list[str]:
    """What makes the interval doubtful, in words."""
    out = list(found.problems)
    if not_random:
        out.append(
            f"{not_random} of {matched} labelled rows record no random sample (samples: "
            f"{_samples_text(found.samples)}): the PPI interval holds only when the labelled "
            "rows are a uniform random sample of the run's rows; rows picked for being hard "
            "or disagreed on bias the estimate. Label a seeded random sample (judge annotate "
            "draws one); require_random= refuses such labels"
        )
    drawn_from = {
        int(s["of"])
        for text in found.samples
        if text != "none recorded"
        and isinstance(s := json.loads(text), dict)
        and isinstance(s.get("of"), int)
    }
    if drawn_from and drawn_from != {rows}:
        out.append(
            f"the labels' sample was drawn from {', '.join(map(str, sorted(drawn_from)))} "
            f"rows, the run has {rows}: are the labels of another run?"
        )
    if unknown:
        out.append(
            f"{len(unknown)} labelled ids are no row of the run, left out: "
            f"{', '.join(map(repr, unknown[:5]))}{' ...' if len(unknown) > 5 else ''}"
        )
    if found.skipped:
        out.append(
            f"{len(found.skipped)} rows were skipped, not labelled: the labelled rows stay a "
            "random sample only if skipping had nothing to do with the row (a hard row "
            "skipped biases the estimate)"
        )
    return out
