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
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.errors import JudgeError, is_replay_miss
from judge.run.checkpoint import RowFile
from judge.run.data import APP_FAILED
from judge.run.diagnose import diagnose
from judge.run.folder import REPORT, RESULTS, SUMMARY, RunFolder
from judge.run.output_folder import OutputFolder, file_sha256
from judge.run.report_html import write_report
from judge.run.result_view import ResultView
from judge.run.rows import ResultRow
from judge.run.shard import SHARD_FILE, write_shard_record

PASSED = 0
THRESHOLD_MISSED = 1  # a fail_under threshold was missed (`judge eval`'s exit 1)
INCOMPLETE = 3  # scores are missing: judge errors, unreadable rows, a replay's misses (exit 3)
# Above 5% of rows without scores, a mean can move by more than a typical 95% CI is wide:
# the missing rows shift a [0, 1] metric's mean by up to their share (see judge_error_rate).
DEFAULT_MAX_ERROR_RATE = 0.05
SHOWN_ROWS = 3  # rows named for a failure that concerns many


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
    result: ResultView,
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
    with folder.writing(RESULTS) as results_path:
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
    outputs = [RESULTS, REPORT]
    with folder.writing(REPORT) as report_path:
        write_report(result, report_path)
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


def no_scores_failure(result: ResultView, unscored: Sequence[str]) -> str | None:
    """Why the run fails for metrics that scored no row, whatever the cause: a metric
    without a single score is no result, whatever max_error_rate allows."""
    if not unscored:
        return None
    why = "; ".join(
        f"{metric} ("
        + ", ".join(
            [f"{n} {r}" for r, n in sorted(result.summary[metric].nan.items())]
            + (
                [f"{result.summary[metric].errored} errors"]
                if result.summary[metric].errored
                else []
            )
        )
        + ")"
        for metric in unscored
    )
    return f"no row was scored for {why}: see 'error', 'errors' and 'reasons' in results.jsonl"


def error_rate_failure(result: ResultView, max_rate: float) -> str | None:
    """Why the run fails for its judge errors, or None."""
    rate = result.judge_error_rate
    if not rate > max_rate:
        return None
    kinds = Counter(
        row.errors[metric].partition(":")[0]
        for row in result.rows
        for metric, reason in row.reasons.items()
        if reason == "judge_error" and metric in row.errors
    )
    most = f"; most often {kinds.most_common(1)[0][0]}" if kinds else ""
    return (
        f"judges failed in {result.rows_with_judge_errors} of {result.judged_rows} judged "
        f"rows ({rate:.1%}), over max_error_rate {max_rate:g}{most}: their scores are "
        "missing from the means; see 'errors' in results.jsonl"
    )


def _first(
    rows: Iterable[ResultRow], test: Callable[[ResultRow], str | None], limit: int = SHOWN_ROWS
) -> list[str]:
    """'row N: reason' of the first rows for which test gives a reason."""
    found = []
    for row in rows:
        reason = test(row)
        if reason:
            found.append(f"row {row.row}: {reason}")
            if len(found) == limit:
                break
    return found


def unreadable_failure(result: ResultView, max_rate: float) -> tuple[str | None, str | None]:
    """(a note on the rows that could not be read, why the run fails for them) or Nones.

    Unreadable rows (bad input: no question, contexts not a list...; in an experiment's
    app_outputs.jsonl, a question the app failed on) have no scores at all, so they count
    against max_error_rate as failed judges do."""
    total = len(result.rows)
    unreadable = total - result.judged_rows
    if not unreadable:
        return None, None
    shown: list[str] = []
    app_failed = 0
    for row in result.rows:  # read once: the first errors shown, the app's failures counted
        if row.error:
            if len(shown) < SHOWN_ROWS:
                shown.append(f"row {row.row}: {row.error}")
            app_failed += row.error.startswith(APP_FAILED)
    what = f"{unreadable} of {total} rows"
    if app_failed:  # an experiment's: the app's failures are not the input's
        what += f" ({app_failed} of them questions the app failed on)"
    note = (
        f"{what} could not be read and have no scores: "
        + "; ".join(shown)
        + ("; ..." if unreadable > len(shown) else "")
    )
    rate = unreadable / total
    if not rate > max_rate:
        return note, None
    fix = (
        "fix the input (see 'error' in results.jsonl) or map its columns with "
        "column_map={'field': ...}"
    )
    if app_failed == unreadable:
        fix = "see app_error in app_outputs.jsonl for why the app failed"
    elif app_failed:
        fix = "see app_error in app_outputs.jsonl and 'error' in results.jsonl"
    return note, (f"{what} ({rate:.1%}) could not be read, over max_error_rate {max_rate:g}: {fix}")


def replay_failure(result: ResultView) -> str | None:
    """Why a strict replay fails: a judgment was not in the cache (or damaged there). A
    replay that misses is not a replay, whatever max_error_rate allows."""
    if result.config.cache_mode != "replay" or not result.rows_with_judge_errors:
        return None

    def missed(row: ResultRow) -> str | None:
        for metric, error in row.errors.items():
            if is_replay_miss(error):  # its text is in results.jsonl ('errors')
                return str(metric)
        return None

    shown = _first(result.rows, missed, limit=1)
    if not shown:
        return None
    return (
        "the replay found no recorded judgment for some rows, so their scores are missing "
        f"(first: {shown[0]}); record them first with a cache that stores (not a replay), "
        "or check cache= and cache_as="
    )
