"""A run's folder: the one owner of the names of the files in it.

judge eval, judge merge, judge experiment and `EvaluationResult.write` write the same
folder; every reader (compare, merge, view, runs, the trace commands, the pytest report)
finds the files through this module, and reads results.jsonl back checked against the
sha256 its summary.json records.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judge.errors import InputFormatError, JudgeError
from judge.lines import bounded_lines
from judge.run.rows import ResultRow, RowTally
from judge.runs.record import record_of
from judge.runs.store import RunRecord, RunStore, default_runs_path

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
REPORT = "report.html"
CONVERSATIONS = "conversations.jsonl"  # a run of conversations' turns: one line each
SHARD = "shard.json"
CHECKPOINT = ".checkpoint.jsonl"
APP_OUTPUTS = "app_outputs.jsonl"  # judge experiment's: what the app answered
APP_PROGRESS = ".app_outputs.jsonl"  # judge experiment's: the app calls finished so far
RUN_TREC = "run.trec"  # judge experiment's rankings, for trec_eval
QRELS = "qrels.txt"  # judge experiment's judgments beside them
SKIPPED = "skipped.jsonl"  # judge traces extract's: the traces it could not read

# Every file a judge run writes into its output folder (`judge eval`, `judge experiment`,
# `judge merge`, a shard's): a file the run reads may not be one of them.
OUTPUT_NAMES = (
    RESULTS,
    SUMMARY,
    REPORT,
    CONVERSATIONS,
    SHARD,
    CHECKPOINT,
    APP_OUTPUTS,
    APP_PROGRESS,
    RUN_TREC,
    QRELS,
    SKIPPED,
)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_results_hash(summary: Any, results_sha256: str, where: Path) -> None:
    """Refuse a results.jsonl that is not the one its summary.json was written with (a
    run stopped between publishing the two, or a file edited or cut short since). A
    summary of an older judge records no hash and is taken as it is."""
    recorded = summary.get("results_sha256") if isinstance(summary, dict) else None
    if recorded is not None and recorded != results_sha256:
        raise RunChangedError(
            f"{where}: results.jsonl is not the file its summary.json was written with "
            "(a run was stopped while writing its outputs, or the file was changed since); "
            "rerun the evaluation into this folder (it resumes from its checkpoint)"
        )


class RunChangedError(InputFormatError):
    """A run folder whose results.jsonl is not the file its summary.json (or the run
    store's record) vouches for: changed after the run was written."""


# A mean summary.json states and the mean of its rows differ in the last digits at most.
MEAN_TOLERANCE = 1e-9
REWRITE = (
    "rerun the evaluation into this folder (it resumes from its checkpoint), or restore "
    "the files the run wrote"
)


class RunFolder:
    """The output folder of one run: where each of its files is, its summary, its rows
    read back with their sha256 checked, and its record in the run store.

    Args:
        path: the folder (`RunFolder.of` also takes a results file).
        results_file: the rows of a results file given by itself (not a run's folder: no
            summary.json vouches for it); default: the folder's results.jsonl.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, results_file: str | os.PathLike[str] | None = None
    ):
        self.path = Path(path)
        self._results_file = None if results_file is None else Path(results_file)

    @classmethod
    def of(cls, source: str | os.PathLike[str]) -> RunFolder:
        """The run of a source given as its folder, its results.jsonl, or another results
        file (JSON lines of result rows, read unchecked)."""
        path = Path(source)
        if path.is_dir():
            return cls(path)
        if path.name == RESULTS:
            return cls(path.parent)
        return cls(path.parent, results_file=path)

    @staticmethod
    def is_results_file(path: Path) -> bool:
        """Whether a path names a run's results.jsonl."""
        return path.name == RESULTS

    def __str__(self) -> str:
        return str(self.path)

    @property
    def results(self) -> Path:
        """results.jsonl: one JSON line per row."""
        return self.path / RESULTS if self._results_file is None else self._results_file

    @property
    def checked(self) -> bool:
        """Whether a summary.json vouches for the rows (not a results file by itself)."""
        return self._results_file is None and self.summary_file.is_file()

    @property
    def summary_file(self) -> Path:
        """summary.json: the means, the gates, the config, results.jsonl's sha256."""
        return self.path / SUMMARY

    @property
    def report(self) -> Path:
        """report.html."""
        return self.path / REPORT

    @property
    def shard_record(self) -> Path:
        """shard.json: a shard's tally, read by judge merge."""
        return self.path / SHARD

    @property
    def checkpoint(self) -> Path:
        """.checkpoint.jsonl: the finished rows of a run not finished yet."""
        return self.path / CHECKPOINT

    @property
    def app_outputs(self) -> Path:
        """app_outputs.jsonl: what an experiment's app answered."""
        return self.path / APP_OUTPUTS

    @property
    def run_trec(self) -> Path:
        """run.trec: an experiment's rankings."""
        return self.path / RUN_TREC

    @property
    def qrels(self) -> Path:
        """qrels.txt: an experiment's judgments beside its rankings."""
        return self.path / QRELS

    @property
    def skipped(self) -> Path:
        """skipped.jsonl: the traces judge traces extract could not read."""
        return self.path / SKIPPED

    def read_summary(self) -> dict[str, Any]:
        """summary.json as written, refused when absent or not a run's summary."""
        path = self.summary_file
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise JudgeError(
                f"{self.path} has no {SUMMARY}: give the output folder of a finished run "
                "(judge eval, judge merge or judge experiment write one)"
            ) from None
        except (OSError, ValueError) as exc:
            raise JudgeError(f"{path} is not JSON ({exc}): is it a judge run's summary?") from None
        if not isinstance(summary, dict) or not isinstance(summary.get("config"), dict):
            raise JudgeError(f"{path} has no config: is it a judge run's summary?")
        return summary

    def lower_is_better(self) -> list[str]:
        """The metrics of the run's own where lower is better, as its summary.json's
        config records them; [] when no summary.json vouches for the rows."""
        config = self.read_summary()["config"] if self.checked else {}
        return [str(m) for m in config.get("lower_is_better") or []]

    def results_sha256(self) -> str:
        """The sha256 of results.jsonl as it is now."""
        return file_sha256(self.results)

    def results_changed(self, recorded: str | None) -> bool | None:
        """Whether results.jsonl is other than the file whose sha256 was recorded (a later
        run was given the same folder); None when that cannot be told: no hash recorded
        (an older judge's) or the file cannot be read."""
        if recorded is None:
            return None
        try:
            return self.results_sha256() != recorded
        except OSError:
            return None

    def lines(self, recorded: str | None = None) -> Iterator[tuple[int, bytes]]:
        """(offset, line) of every line of results.jsonl, read once; when the last line
        is read, the file's sha256 is checked against `recorded` (default: the one
        summary.json records, when the folder has one) and a `RunChangedError` says what
        changed. A caller that stops early has read lines not yet checked."""
        summary = self.read_summary() if self.checked else None
        by = "the run store" if recorded is not None else SUMMARY
        if recorded is None and summary is not None:
            value = summary.get("results_sha256")
            recorded = value if isinstance(value, str) else None
        digest = hashlib.sha256()
        offset = count = 0
        with open(self.results, "rb") as f:
            for _, line in bounded_lines(f, self.results):
                digest.update(line)
                yield offset, line
                offset += len(line)
                count += bool(line.strip())
        if recorded is not None and digest.hexdigest() != recorded:
            raise RunChangedError(self._changed(summary, count, by))

    def rows(self, recorded: str | None = None) -> Iterator[tuple[int, int, ResultRow]]:
        """(line number, offset, row) of every row of results.jsonl, read one at a time and
        checked as `lines` checks them; then summary.json's row count and means are
        checked against the rows (a `RunChangedError` for an edited summary). A line that
        is not a results row is an `InputFormatError`, unless the file is not the one the
        run wrote: then it is the `RunChangedError`, which says so."""
        error: InputFormatError | None = None
        summary = self.read_summary() if self.checked else None
        metrics = (summary or {}).get("config", {}).get("metrics")
        tally = RowTally([str(m) for m in metrics]) if isinstance(metrics, list) else None
        for number, (offset, line) in enumerate(self.lines(recorded), 1):
            if error is not None or not line.strip():
                continue  # the rest is read all the same: its sha256 tells what happened
            try:
                data = json.loads(line, strict=False)
                if not isinstance(data, dict) or not isinstance(data.get("scores"), dict):
                    raise ValueError("no scores")
                row = ResultRow.from_json({"row": number - 1, **data})
            except (ValueError, KeyError, TypeError) as exc:
                error = InputFormatError(
                    f"not a judge results row ({exc})", path=str(self.results), line=number
                )
                continue
            if tally is not None:
                tally.add(row)
            yield number, offset, row
        if error is not None:
            raise error
        if summary is not None:
            self.check_summary(summary, tally)

    def check_summary(self, summary: dict[str, Any], tally: RowTally | None) -> None:
        """Refuse a summary.json whose row count or means are not those of the rows
        (`tally`; None when the summary names no metrics: nothing to check)."""
        if tally is None:
            return
        changed = ""
        rows = summary.get("rows")
        if isinstance(rows, int) and rows != tally.rows:
            changed = f"says {rows} rows, its {RESULTS} holds {tally.rows}"
        stated = summary.get("metrics")
        for metric, entry in stated.items() if isinstance(stated, dict) else ():
            if changed or not isinstance(entry, dict) or metric not in tally.nan:
                continue
            value = entry.get("mean")
            scores = tally.defined(metric)
            computed = float(scores.mean()) if scores.size else math.nan
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):  # not a number, not null: no judge wrote it
                changed = f"says the mean of {metric} is {value!r}, not a number"
                continue
            mean = math.nan if value is None else float(value)
            same = (math.isnan(mean) and math.isnan(computed)) or (
                abs(mean - computed) <= MEAN_TOLERANCE
            )
            if not same:
                changed = f"says the mean of {metric} is {mean:g}, its {RESULTS} gives {computed:g}"
        if changed:
            raise RunChangedError(
                f"{SUMMARY} of {self.path} {changed}: it was changed after the run; {REWRITE}"
            )

    def _changed(self, summary: dict[str, Any] | None, count: int, by: str) -> str:
        """What changed, in words, for a results.jsonl whose sha256 is not the recorded one."""
        rows = summary.get("rows") if summary is not None else None
        if isinstance(rows, int) and rows != count:
            what = f"it holds {count} rows, the run wrote {rows}"
        else:
            what = "its bytes differ from those the run wrote"
        whose = f"its {SUMMARY} was written with" if by == SUMMARY else "the run wrote"
        return (
            f"{RESULTS} of {self.path} does not match the sha256 recorded in {by} "
            f"({what}): it is not the file {whose} (it was changed after the run, or a run "
            f"was stopped while writing its outputs); {REWRITE}"
        )

    def record(
        self,
        store: RunStore,
        *,
        command: str,
        name: str | None = None,
        cwd: Path | None = None,
    ) -> RunRecord:
        """Record the finished run in the run store; returns the record stored. Only
        summary.json is read (results.jsonl may be hundreds of megabytes).

        Args:
            store: the run store to add the record to.
            command: what made the run: "eval", "experiment", "merge" or "python".
            name: a name for the run, or None.
            cwd: where the run was made, for its git state (default: the working directory).
        """
        folder = self.path.resolve()
        record = record_of(RunFolder(folder).read_summary(), folder, command, name, cwd)
        return store.add(record)


def record_folder(
    store: RunStore,
    out_dir: str | os.PathLike[str],
    *,
    command: str,
    name: str | None = None,
    cwd: Path | None = None,
) -> RunRecord:
    """Record a finished run from its output folder (`RunFolder.record`).

    Args:
        store: the run store to add the record to.
        out_dir: the run's output folder.
        command: what made the run: "eval", "experiment", "merge" or "python".
        name: a name for the run, or None.
        cwd: where the run was made, for its git state (default: the working directory).
    """
    return RunFolder(out_dir).record(store, command=command, name=name, cwd=cwd)


def record_written(
    out: str | os.PathLike[str],
    *,
    command: str,
    runs: str | os.PathLike[str] | None = None,
) -> RunRecord | None:
    """Record a run written from Python in the run store, as the CLI records its runs;
    returns the record, or None (with a warning) when the store cannot take it: the
    run's files are written all the same.

    Args:
        out: the run's output folder.
        command: what wrote it ("python", "experiment").
        runs: the run store's file (default: $JUDGE_RUNS, else .judge/runs.sqlite).
    """
    path = Path(runs) if runs is not None else default_runs_path()
    try:
        with RunStore(path) as store:
            return RunFolder(out).record(store, command=command)
    except (JudgeError, OSError, sqlite3.Error) as exc:
        warnings.warn(
            f"the run's outputs are written in {out}, but the run was not recorded in the "
            f"run store {path}: {exc} (record=False skips recording)",
            stacklevel=3,
        )
        return None
