"""A finished run's output folder and what the run means: results.jsonl, report.html,
shard.json (a shard's) and summary.json, published whole (`judge.run.output_folder`); the
gates (thresholds, the error rate, unreadable rows, a strict replay's misses); the outcome.

`judge eval` is this call and a print: `EvaluationResult.write(out)` gives a Python user
the same files, byte for byte, and the same verdict.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.errors import JudgeError
from judge.run.checkpoint import RowFile
from judge.run.diagnose import diagnose
from judge.run.gates import (
    DEFAULT_MAX_ERROR_RATE,
    INCOMPLETE,
    PASSED,
    THRESHOLD_MISSED,
    error_rate_failure,
    no_scores_failure,
    replay_failure,
    unreadable_failure,
)
from judge.run.output_folder import OutputFolder, file_sha256
from judge.run.report_html import write_report
from judge.run.shard import SHARD_FILE, write_shard_record

if TYPE_CHECKING:
    from judge.run.results import EvaluationResult


@dataclass(frozen=True)
class RunOutcome:
    """What a written run means.

    Attributes:
        code: 0 passed, 1 a threshold was missed, 3 scores are missing (3 wins over 1):
            `judge eval`'s exit code.
        folder: where the outputs are.
        summary: summary.json as written.
        missed: the thresholds missed, as "metric = mean < floor".
        failures: (what, why) of each reason the run is incomplete: "unreadable rows",
            "replay", "error rate", "no scores" (a metric that scored no row).
        notes: what is worth saying although the run passed (unreadable rows within the
            limit).
    """

    code: int
    folder: Path
    summary: dict[str, Any]
    missed: tuple[str, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        """Whether every gate held."""
        return self.code == PASSED


def write_outputs(
    result: EvaluationResult,
    out: OutputFolder | str | os.PathLike[str],
    *,
    fail_under: Mapping[str, float] | None = None,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    results_written: bool = False,
) -> RunOutcome:
    """Write the run's outputs into a folder and apply its gates (see
    `EvaluationResult.write`); with results_written, the rows are already in
    `out.temporary("results.jsonl")` (judge merge joins them there)."""
    if not 0 <= max_error_rate <= 1:  # also rejects nan
        raise JudgeError(f"max_error_rate {max_error_rate}: give a share from 0 to 1")
    thresholds = dict(fail_under or {})
    unknown = [metric for metric in thresholds if metric not in result.summary]
    if unknown:
        raise JudgeError(
            f"fail_under: {', '.join(unknown)} not among the metrics computed "
            f"({', '.join(result.metrics)})"
        )
    if not isinstance(out, OutputFolder):
        source = result.config.source  # a file it names may not be replaced
        with OutputFolder(out, inputs=[source] if os.path.isfile(source) else []) as folder:
            return write_outputs(
                result,
                folder,
                fail_under=thresholds,
                max_error_rate=max_error_rate,
                results_written=results_written,
            )
    folder = out
    with folder.writing("results.jsonl") as results_path:
        # judge merge joined the rows into this very file already
        written = results_written
        digest = file_sha256(results_path) if written else result.write_jsonl(results_path)
    summary = result.summary_dict()
    summary["results_sha256"] = digest  # readers refuse a results.jsonl that differs
    missed = []
    for metric, floor in thresholds.items():
        mean = result.summary[metric].mean
        if not mean >= floor:  # a NaN mean (nothing scored) misses every threshold
            missed.append(f"{metric} = {'n/a' if math.isnan(mean) else f'{mean:.4f}'} < {floor}")
    summary["thresholds"] = {"required": thresholds, "missed": missed}
    too_many = error_rate_failure(result, max_error_rate)
    summary["judge_errors"].update(max_rate=max_error_rate, failed=too_many is not None)
    unreadable_note, unreadable = unreadable_failure(result, max_error_rate)
    summary["unreadable_rows"] = {
        "rows": len(result.rows) - result.judged_rows,
        "failed": unreadable is not None,
    }
    unscored = [m for m, s in result.summary.items() if not s.scored] if result.rows else []
    replay_missed = replay_failure(result)
    summary["replay_missed"] = replay_missed is not None
    summary["no_scores"] = {"metrics": unscored, "failed": bool(unscored)}
    summary["diagnosis"] = diagnose({m: s.mean for m, s in result.summary.items()})
    outputs = ["results.jsonl", "report.html"]
    with folder.writing("report.html") as report_path:
        write_report(result, report_path)
    if result.config.shard is not None:
        outputs.append(SHARD_FILE)
        with folder.writing(SHARD_FILE) as record_path:
            write_shard_record(result, record_path, digest)  # what `judge merge` reads
    with folder.writing("summary.json") as summary_path:
        summary_path.write_text(
            json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    outputs.append("summary.json")  # last: its hash vouches for the files before it
    folder.publish(outputs)
    if isinstance(result.rows, RowFile) and result.rows.path == results_path:
        result.rows.renamed(folder.path / "results.jsonl")
    failures = tuple(
        (what, why)
        for what, why in (
            ("unreadable rows", unreadable),
            ("replay", replay_missed),
            ("error rate", too_many),
            ("no scores", no_scores_failure(result, unscored)),
        )
        if why
    )
    code = INCOMPLETE if failures else THRESHOLD_MISSED if missed else PASSED
    notes = (unreadable_note,) if unreadable_note else ()
    return RunOutcome(code, folder.path, summary, tuple(missed), failures, notes)
