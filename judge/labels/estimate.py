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

import json
import math
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judge.errors import InputFormatError, JudgeError
from judge.formatting import number
from judge.json_values import nan_to_null
from judge.lines import universal_lines
from judge.metrics.registry import higher_is_better
from judge.run.data import checked_path, loads_json, read_records
from judge.run.folder import RunFolder
from judge.run.gates import Gates, users_metrics
from judge.run.rows import ResultRow
from judge.stats import PPIEstimate, ks_two_sample, ppi_mean

KEY = "id"
SAMPLE = "sample"
RANDOM = "random"
ANNOTATOR = "annotator"


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
    """

    labels: dict[str, float]
    not_random: set[str]
    samples: dict[str, int]
    skipped: set[str]
    annotators: dict[str, int]
    problems: list[str] = field(default_factory=list)


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
    latest: dict[tuple[str, str], tuple[float | None, dict[str, Any] | None]] = {}
    for number_, record in enumerate(records):
        ident = record.get(KEY)
        if blank_value(ident):
            raise InputFormatError(f"{source}: record {number_} (from 0) has no {KEY!r}")
        who = "" if blank_value(record.get(ANNOTATOR)) else str(record[ANNOTATOR])
        if annotator is not None and who != annotator:
            continue
        value = _label(record.get(label), f"{source}: record {number_} (from 0)", label)
        latest[(str(ident), who)] = (value, _sample(record.get(SAMPLE)))
    if annotator is not None and not latest:
        raise InputFormatError(f"{source}: no record of annotator={annotator!r}")
    given: dict[str, list[float]] = {}
    randoms: dict[str, bool] = {}
    samples: Counter[str] = Counter()
    annotators: Counter[str] = Counter()
    seen: set[str] = set()
    for (ident, who), (value, sample) in latest.items():
        seen.add(ident)
        if value is None:
            continue
        given.setdefault(ident, []).append(value)
        random = sample is not None and sample.get("method") == RANDOM
        randoms[ident] = randoms.get(ident, True) and random
        samples[json.dumps(sample, sort_keys=True) if sample else "none recorded"] += 1
        if who:
            annotators[who] += 1
    return LabelFile(
        labels={ident: float(np.mean(values)) for ident, values in given.items()},
        not_random={ident for ident, random in randoms.items() if not random},
        samples=dict(samples),
        skipped=seen - given.keys(),
        annotators=dict(annotators),
        problems=problems,
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

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the `--format json` output), NaN as null."""
        ppi = self.ppi.to_dict()
        data = {
            "metric": self.metric,
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
        lines = [
            f"{self.metric} ({self.orientation}) against labels {self.label!r}",
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


def _lower_is_better(metric: str, folder: RunFolder) -> bool:
    """Whether lower is better for a metric: the registry's word for built-ins, the run's
    recorded `lower_is_better` for its own."""
    return metric in users_metrics(folder.lower_is_better()) or not higher_is_better(metric)


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
    if not folder.results.is_file():
        raise InputFormatError(f"{folder.results}: no such results file (judge eval writes one)")
    rows = [row for _, _, row in folder.rows()]
    known = sorted({m for r in rows for m in r.scores})
    if metric not in known:
        raise InputFormatError(
            f"{folder.results}: no metric {metric!r} in the run (metrics: "
            f"{', '.join(known) or 'none'}); name one of them with metric="
        )
    up = not _lower_is_better(metric, folder)
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
    if not found.labels:
        raise InputFormatError(
            f"no row is labelled: the {len(found.skipped)} rows of the labels were all "
            f"skipped (label {label!r} null or blank); label some rows first"
        )
    positions: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        positions.setdefault(str(row.id), []).append(i)
    doubled = [ident for ident in found.labels if len(positions.get(ident, ())) > 1]
    if doubled:
        raise InputFormatError(
            f"{folder.results}: ids {', '.join(map(repr, doubled[:5]))} name several rows: "
            "a label cannot be joined to one; give the run unique ids (an id column)"
        )
    unknown = sorted(ident for ident in found.labels if ident not in positions)
    matched = {positions[i][0]: v for i, v in found.labels.items() if i in positions}
    if not matched:
        raise InputFormatError(
            f"no labelled id is a row of {folder.results} (labels for ids "
            f"{', '.join(map(repr, unknown[:5]))}): are the labels of another run?"
        )
    labelled = np.array(sorted(matched), dtype=np.int64)
    return LabelledRun(
        folder=folder,
        rows=rows,
        scores=run.scores,
        up=run.up,
        found=found,
        labelled=labelled,
        unlabelled=np.setdiff1d(np.arange(len(rows)), labelled),
        values=np.array([matched[i] for i in labelled.tolist()], dtype=np.float64),
        unknown=unknown,
        not_random=len([i for i in found.not_random if i in positions]),
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
    run = labelled_run(results, labels=labels, label=label, metric=metric, annotator=annotator)
    folder, rows, found, matched = run.folder, run.rows, run.found, run.labelled.size
    not_random = run.not_random
    if require_random and not_random:
        raise JudgeError(
            f"{not_random} of {matched} labelled rows record no random sample "
            f"(samples: {_samples_text(found.samples)}): the interval holds only for labels "
            "of a random sample; label a seeded random sample of the rows (judge annotate "
            "draws one), or leave out require_random= to estimate anyway, with a warning"
        )
    up = run.up
    result = ppi_mean(run.scores[run.unlabelled], run.scores[run.labelled], run.values, confidence)
    warnings = _warnings(found, not_random, matched, run.unknown, len(rows))
    if not not_random:
        warnings += _not_spread_as_drawn(run.scores[run.labelled], run.scores[run.unlabelled])
    if any(r.conversation_id is not None for r in rows):
        warnings.append(
            "the rows are turns of conversations: PPI treats them as independent rows, so "
            "the interval may be too narrow when a conversation's turns move together"
        )
    # the gates' scale is the metric's: a lower-is-better metric's interval turned back
    interval = (result.low, result.high) if up else (1 - result.high, 1 - result.low)
    return Estimate(
        metric=metric,
        label=label,
        orientation="score" if up else "1 - score (lower is better)",
        rows=len(rows),
        ppi=result,
        random=not not_random,
        samples=found.samples,
        warnings=warnings,
        config={
            "results": str(folder.results),
            "labels": f"{len(labels)} records" if isinstance(labels, list) else str(labels),
            "annotator": annotator,
            "annotators": found.annotators,
        },
        gates=[str(b) for b in checked.bounds],
        missed=checked.missed_by_intervals({metric: interval}, "PPI interval"),
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
