"""The drop test's baseline: one metric's per-row scores and where they came from, a
pinned run of the run store (`judge runs baseline`) or the monitor's first K windows.

Both sources give the same value, a `Baseline`, to the same test (`DropDetector`): the
detector has one code path, and its messages and alerts say where the scores came from.
A run is taken as a baseline only when it was judged as the monitor judges: the same
judge and embedding models, the same versions of the built-in prompts, every monitored
metric among its scores. A baseline judged by another judge is another scale.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np

from judge.errors import JudgeError
from judge.metrics.prompts import load_prompts
from judge.metrics.resolve import split_metrics
from judge.run.folder import RunFolder
from judge.run.plan import prompt_versions
from judge.runs.store import RunRecord, RunStore, default_runs_path, open_existing

PINNED = "pinned"  # the run reference that names the run pinned by `judge runs baseline`


@dataclass(frozen=True, eq=False)  # scores may be an array: compared by identity
class Baseline(Sequence[float]):
    """A metric's baseline scores in [0, 1] (NaN or None ones are skipped by the test),
    with their source; a sequence of its scores, so a `WindowCheck` that wants only the
    numbers reads it as one.

    Args:
        scores: the per-row scores.
        run: the id of the pinned run they are the scores of, or None.
        windows: the numbers of the monitor windows they are the scores of (empty: not
            windows).
        remedy: what to do when they are too few, in the caller's words.
    """

    scores: Sequence[float | None] | np.ndarray
    run: str | None = None
    windows: tuple[int, ...] = ()
    remedy: str = "give more baseline_scores"

    @property
    def given(self) -> bool:
        """Whether the scores were given as they are (no run, no windows)."""
        return self.run is None and not self.windows

    @property
    def source(self) -> str:
        """Where the scores came from, in words: "run 3f2a9c1b7d0e", "the first 3 windows", or
        "the scores given"."""
        if self.run is not None:
            return f"run {self.run}"
        if self.windows:  # numbered from the epoch when they are of time: not shown
            n = len(self.windows)
            return "the first window" if n == 1 else f"the first {n} windows"
        return "the scores given"

    def to_json(self) -> dict[str, Any]:
        """The source as a JSON object: {"source", "run", "windows"}."""
        return {"source": self.source, "run": self.run, "windows": list(self.windows) or None}

    def __len__(self) -> int:
        return len(self.scores)

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...

    def __getitem__(self, index: int | slice) -> Any:
        return self.scores[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.scores)


def window_baseline(
    metric: str, scores: Sequence[float | None], windows: Sequence[int]
) -> Baseline:
    """The baseline of a metric from the scores of the monitor's first windows."""
    return Baseline(
        tuple(scores),
        windows=tuple(windows),
        remedy=f"take more windows as the baseline: raise baseline_windows= (now "
        f"{len(windows)}), or make the windows longer, or pin a run with at least that many "
        f"scored rows of {metric} (baseline_run=)",
    )


def _names(metrics: Sequence[Any]) -> list[str]:
    return [m if isinstance(m, str) else str(getattr(m, "name", m)) for m in metrics]


def _judge_differences(
    record: RunRecord,
    model: str | None,
    embeddings: str | None,
    prompts: Mapping[str, str],
    metrics: Sequence[str],
) -> list[str]:
    """What differs between the run's judge and the monitor's, in words; nothing when no
    monitored metric is judged (retrieval and tool-call metrics are computed from the row
    alone, the same by any judge)."""
    judged, _ = split_metrics(list(metrics), has_retrieval=True)
    if not judged:
        return []
    out = []
    if record.model != model:
        out.append(f"judge model {record.model or 'none'} (the monitor's: {model or 'none'})")
    # The embedding model scores answer_relevancy alone: another one matters only there.
    if record.embeddings != embeddings and any(m == "answer_relevancy" for m in metrics):
        out.append(
            f"embedding model {record.embeddings or 'none'} (the monitor's: {embeddings or 'none'})"
        )
    # Prompts both know: a prompt added to judge since the run was made judges no metric
    # the run computed.
    changed = sorted(
        n for n in record.prompts.keys() & prompts.keys() if record.prompts[n] != prompts[n]
    )
    if changed:
        out.append(
            "prompt versions "
            + ", ".join(f"{n} {record.prompts[n]} (the monitor's: {prompts[n]})" for n in changed)
        )
    return out


def run_baseline(
    ref: str,
    metrics: Sequence[Any],
    *,
    model: str | None,
    embeddings: str | None = None,
    runs: str | os.PathLike[str] | None = None,
    other_judge: bool = False,
) -> tuple[RunRecord, dict[str, Baseline]]:
    """The baseline of each monitored metric from a run of the run store: its record, and
    metric -> the run's per-row scores (read from its results.jsonl, checked against the
    hash the store recorded).

    Args:
        ref: the run: "pinned" (the run pinned with judge runs baseline), or a run's id, id
            prefix or name.
        metrics: the monitored metrics' names (or Metric objects); each must be among the
            run's.
        model: the monitor's judge model (None: retrieval metrics alone).
        embeddings: the monitor's embedding model, or None.
        runs: the run store's path (default: $JUDGE_RUNS, else .judge/runs.sqlite).
        other_judge: take the run even when it was judged by another model or with other
            prompt versions.

    Raises:
        judge.errors.JudgeError: nothing pinned, no such run, the run lacks a monitored
            metric, was judged by another judge, or its outputs are gone or changed.
    """
    path = Path(runs) if runs is not None else default_runs_path()
    with open_existing(path, f"baseline_run={ref!r}: ") as store:
        record = _find(store, ref, path)
    where = f"baseline_run={ref!r} (run {record.id})"
    names = _names(metrics)
    missing = [m for m in names if m not in record.metrics]
    if missing:
        raise JudgeError(
            f"{where} has no scores of {', '.join(missing)} (its metrics: "
            f"{', '.join(record.metrics) or 'none'}): pin a run that computed every monitored "
            "metric, or monitor only the run's metrics (metrics=)"
        )
    now = prompt_versions(load_prompts())
    differences = _judge_differences(record, model, embeddings, now, names)
    if differences and not other_judge:
        raise JudgeError(
            f"{where} was judged by another judge, so its scores are not comparable with the "
            f"monitor's: {'; '.join(differences)}. Pin a run judged as the monitor judges "
            "(judge eval with the same model, on this judge version), or take the first "
            "windows as the baseline; baseline_other_judge=True takes it all the same"
        )
    folder = RunFolder(record.out_dir)
    if not folder.results.is_file():
        raise JudgeError(
            f"{where}: its results {folder.results} are gone (moved or deleted); the "
            "baseline is its per-row scores: pin another run, or restore its output folder"
        )
    by_metric: dict[str, list[float | None]] = {m: [] for m in names}
    for _, _, row in folder.rows(record.results_sha256):
        if row.error is not None:
            continue  # a bad input row has no scores: not a row of the baseline
        for metric in names:
            value = row.scores.get(metric)
            by_metric[metric].append(None if value is None or math.isnan(value) else value)
    unscored = [m for m, scores in by_metric.items() if all(s is None for s in scores)]
    if unscored:
        rows = len(next(iter(by_metric.values()), []))
        raise JudgeError(
            f"{where} has no scores of {', '.join(unscored)} ({rows} rows, every score NaN): "
            "pin a run that scored every monitored metric, or monitor only the metrics the "
            "run scored (metrics=)"
        )
    remedy = "pin a run with more rows (judge runs baseline REF)"
    return record, {
        m: Baseline(tuple(scores), run=record.id, remedy=remedy) for m, scores in by_metric.items()
    }


def _find(store: RunStore, ref: str, path: Path) -> RunRecord:
    """The run `ref` names; "pinned" the pinned one, refused when none is."""
    if ref != PINNED:
        return store.get(ref)
    found = store.baseline()
    if found is None:
        raise JudgeError(
            f"baseline_run='pinned': no run is pinned as the baseline in the run store {path}: "
            "pin one with judge runs baseline REF (judge runs list shows the runs), or give "
            "a run's id"
        )
    return store.check(found)
