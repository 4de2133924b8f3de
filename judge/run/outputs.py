"""A finished run's output folder and what the run means: results.jsonl, report.html,
shard.json (a shard's) and summary.json, published whole (`judge.run.output_folder`); the
gates (thresholds, the error rate, unreadable rows, a strict replay's misses); the outcome.

`judge eval` is this call and a print: `EvaluationResult.write(out)` gives a Python user
the same files, byte for byte, and the same verdict.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.run.checkpoint import RowFile
from judge.run.corrected import CORRECTED_INTERVAL, CorrectedMean, Corrector
from judge.run.diagnose import diagnose
from judge.run.folder import CONVERSATIONS, REPORT, RESULTS, SUMMARY, RunFolder
from judge.run.gates import (
    DEFAULT_MAX_ERROR_RATE,
    PASSED,
    Bound,
    Gates,
    as_gates,
)
from judge.run.output_folder import OutputFolder, file_sha256
from judge.run.report_html import write_report
from judge.run.result_view import ResultView
from judge.run.rows import ConversationSummary
from judge.run.shard import SHARD_FILE, write_shard_record


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
        corrected: the metric's mean corrected by labels (`labels=`), or None.
        warnings: what makes the corrected interval doubtful (labels not a random sample).
    """

    code: int
    folder: Path
    summary: dict[str, Any]
    missed: tuple[str, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())
    corrected: CorrectedMean | None = None
    warnings: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """Whether every gate held."""
        return self.code == PASSED


def write_conversations(conversations: Iterable[ConversationSummary], path: Path) -> None:
    """conversations.jsonl: each conversation's turns and its metrics' means over them."""
    with path.open("w", encoding="utf-8") as handle:
        for entry in conversations:
            handle.write(json.dumps(entry.to_json(), ensure_ascii=False, sort_keys=True) + "\n")


def write_outputs(
    result: ResultView,
    out: OutputFolder | str | os.PathLike[str],
    *,
    gates: Gates | Iterable[str | Bound] | None = None,
    fail_under: Mapping[str, float] | None = None,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    results_written: bool = False,
    labels: Corrector | None = None,
) -> RunOutcome:
    """Write the run's outputs into a folder and apply its gates (see
    `EvaluationResult.write`); with results_written, the rows are already in
    `out.temporary("results.jsonl")` (judge merge joins them there). With `labels`, the
    labelled metric's corrected mean goes into summary.json and the report, and its
    gates are held to its corrected interval."""
    checked = as_gates(gates, fail_under, max_error_rate)
    checked.check_metrics(result.summary, result.config.lower_is_better)
    if not isinstance(out, OutputFolder):
        source = result.config.source  # a file it names may not be replaced
        with OutputFolder(out, inputs=[source] if os.path.isfile(source) else []) as folder:
            return write_outputs(
                result, folder, gates=checked, results_written=results_written, labels=labels
            )
    # before anything is written: labels that cannot be used leave the folder as it was
    corrected = labels.correct(result, checked) if labels is not None else None
    folder = out
    with folder.writing(RESULTS) as results_path:
        # judge merge joined the rows into this very file already
        written = results_written
        digest = file_sha256(results_path) if written else result.write_jsonl(results_path)
    summary = result.summary_dict()
    summary["results_sha256"] = digest  # readers refuse a results.jsonl that differs
    intervals = {corrected.metric: corrected.interval} if corrected else None
    verdict = checked.verdict(result, intervals, CORRECTED_INTERVAL)
    summary["thresholds"] = checked.summary(verdict.missed)
    if corrected is not None:  # keys of their own: a run without labels keeps its bytes
        gated = corrected.metric in checked.metrics
        summary["thresholds"]["on_corrected_interval"] = [corrected.metric] if gated else []
        summary["label_corrected"] = corrected.record
    summary["judge_errors"].update(
        max_rate=checked.max_error_rate, failed=verdict.error_rate_failed
    )
    summary["unreadable_rows"] = {
        "rows": len(result.rows) - result.judged_rows,
        "failed": verdict.unreadable_failed,
    }
    summary["replay_missed"] = verdict.replay_missed
    summary["no_scores"] = {"metrics": list(verdict.unscored), "failed": bool(verdict.unscored)}
    summary["diagnosis"] = diagnose({m: s.mean for m, s in result.summary.items()})
    outputs = [RESULTS, REPORT]
    with folder.writing(REPORT) as report_path:
        write_report(result, report_path, lines=[corrected.line] if corrected else [])
    conversations = result.tally.by_conversation(result.metrics)
    if conversations:
        outputs.append(CONVERSATIONS)
        with folder.writing(CONVERSATIONS) as conversations_path:
            write_conversations(conversations, conversations_path)
    else:  # an earlier run of conversations in this folder: its file is not this run's
        (folder.path / CONVERSATIONS).unlink(missing_ok=True)
    if result.config.shard is not None:
        outputs.append(SHARD_FILE)
        with folder.writing(SHARD_FILE) as record_path:
            write_shard_record(  # what `judge merge` reads
                result.config.shard, result.config.run, result.tally, record_path, digest
            )
    with folder.writing(SUMMARY) as summary_path:
        summary_path.write_text(
            json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    outputs.append(SUMMARY)  # last: its hash vouches for the files before it
    folder.publish(outputs)
    if isinstance(result.rows, RowFile) and result.rows.path == results_path:
        result.rows.renamed(RunFolder(folder.path).results)
    return RunOutcome(
        verdict.code,
        folder.path,
        summary,
        verdict.missed,
        verdict.failures,
        verdict.notes,
        corrected,
        corrected.warnings if corrected else (),
    )
