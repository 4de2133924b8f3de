"""`judge.load_run`: a written run read back, its rows checked against the sha256 its
summary.json (and the run store) recorded, then read from disk one at a time."""

from __future__ import annotations

import os
from array import array
from pathlib import Path

from judge.errors import JudgeError
from judge.run.checkpoint import RowFile
from judge.run.folder import REWRITE, RunChangedError, RunFolder
from judge.run.results import EvaluationResult
from judge.run.rows import RowTally
from judge.runs.store import default_runs_path, open_existing


def load_run(
    path_or_run_id: str | os.PathLike[str],
    *,
    runs: str | os.PathLike[str] | None = None,
) -> EvaluationResult:
    """A run written by `judge eval`, `judge experiment`, `judge merge` or
    `EvaluationResult.write`, read back from its output folder.

    The whole results.jsonl is read once to check it and count its scores; the rows are
    then read from disk when asked for (`result.rows` keeps only where each row starts).

    Args:
        path_or_run_id: the run's output folder (or its results.jsonl), or a run of the
            run store: its id, the start of its id, its name, or "baseline".
        runs: the run store's file, for a run id (default: $JUDGE_RUNS, else
            .judge/runs.sqlite).

    Returns:
        The `EvaluationResult`, as it was when the run was written.

    Raises:
        judge.run.folder.RunChangedError: (a `judge.JudgeError`) results.jsonl or
            summary.json is not what the run wrote: a byte changed, a row added or
            removed, a summary edited, or a later run wrote into the recorded folder.
        judge.JudgeError: no such folder or run, or no summary.json in it.
    """
    source = Path(path_or_run_id)
    recorded = None  # the run store's hash of the results.jsonl the run wrote
    if source.exists():
        if not source.is_dir() and not RunFolder.is_results_file(source):
            raise JudgeError(
                f"load_run: {source} is not a run's results.jsonl: no summary.json vouches "
                "for its rows; give the run's output folder (or its results.jsonl), or read "
                "another results file with judge compare"
            )
        folder = RunFolder.of(source)
        where = str(folder.path)
    else:
        store_path = Path(runs) if runs is not None else default_runs_path()
        context = f"load_run: {str(path_or_run_id)!r} is no file or folder, and "
        with open_existing(store_path, context) as store:
            record = store.get(str(path_or_run_id))
        folder = RunFolder(record.out_dir)
        recorded = record.results_sha256
        where = f"run {record.id} ({folder.path})"
    summary = folder.read_summary()
    written = summary.get("results_sha256")
    if recorded is not None and written is not None and written != recorded:
        raise RunChangedError(
            f"summary.json of {where} does not record the sha256 the run store recorded: "
            f"a later run was written into the folder, or the file was edited; {REWRITE}"
        )
    config = summary["config"]
    metrics = [str(m) for m in config.get("metrics") or summary.get("metrics") or []]
    tally = RowTally(metrics)
    offsets = array("q")  # 8 bytes a row; a list of ints held 36
    for _, offset, row in folder.rows(recorded):  # checked against summary.json
        offsets.append(offset)
        tally.add(row)
    rows = RowFile(folder.results, offsets, metrics=metrics, verbatim=True)
    return EvaluationResult(rows, metrics, config, dict(summary.get("usage") or {}), tally=tally)
