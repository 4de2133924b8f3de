"""A run's record made from its output folder (summary.json) and the user's git state."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from judge.errors import JudgeError
from judge.run.output_folder import file_sha256
from judge.runs.store import RunRecord, RunStore, new_run_id, utc_now

GIT_TIMEOUT = 10.0  # seconds: a hung git (a network file system) must not hold a run up
SUMMARY_KEYS = ("mean", "ci_low", "ci_high", "scored")


def _git(cwd: Path, *args: str) -> str | None:
    """git's output, or None when git is missing, fails or hangs."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            # Reading the status must not take the index's lock from the user's own git.
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(cwd: Path) -> dict[str, Any] | None:
    """{"commit", "dirty", "root"} of the git repository holding cwd, or None outside one,
    without git, or before the first commit.

    dirty is whether tracked files differ from the commit: untracked files are left out,
    since a run's own outputs (judge-results/, .judge/) are untracked files of the
    repository it runs in, and would mark every run after the first dirty.
    """
    commit = _git(cwd, "rev-parse", "--verify", "--quiet", "HEAD")
    root = _git(cwd, "rev-parse", "--show-toplevel")
    status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    if commit is None or root is None or status is None:
        return None
    return {
        "commit": commit.strip(),
        "dirty": bool(status.strip()),
        "root": str(Path(root.strip()).resolve()),
    }


def read_summary(out_dir: Path) -> dict[str, Any]:
    """The summary.json of a run's output folder."""
    path = out_dir / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise JudgeError(
            f"{out_dir} has no summary.json: record the output folder of a finished run "
            "(judge eval, judge merge or judge experiment write one)"
        ) from None
    except ValueError as exc:
        raise JudgeError(f"{path} is not JSON ({exc}): is it a judge run's summary?") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("config"), dict):
        raise JudgeError(f"{path} has no config: is it a judge run's summary?")
    return summary


def results_changed(record: RunRecord) -> bool | None:
    """Whether the run's folder holds a results.jsonl other than the one the run wrote (a
    later run was given the same output folder); None when that cannot be told: the record
    has no hash (an older judge's) or the file cannot be read."""
    if record.results_sha256 is None:
        return None
    try:
        return file_sha256(Path(record.out_dir) / "results.jsonl") != record.results_sha256
    except OSError:
        return None


def _results_sha256(summary: dict[str, Any]) -> str | None:
    """The hash of results.jsonl that summary.json vouches for, or None (an older judge's)."""
    value = summary.get("results_sha256")
    return value if isinstance(value, str) else None


def record_folder(
    store: RunStore,
    out_dir: str | os.PathLike[str],
    *,
    command: str,
    name: str | None = None,
    cwd: Path | None = None,
) -> RunRecord:
    """Record a finished run from its output folder; returns the record stored.

    Only summary.json is read (results.jsonl may be hundreds of megabytes).

    Args:
        store: the run store to add the record to.
        out_dir: the run's output folder.
        command: the command that made it: "eval", "experiment" or "merge".
        name: a name for the run, or None.
        cwd: where the run was made, for its git state (default: the working directory).
    """
    folder = Path(out_dir).resolve()
    summary = read_summary(folder)
    config = summary["config"]
    metrics = summary.get("metrics") or {}
    app = config.get("app")
    record = RunRecord(
        id=new_run_id(),
        name=name,
        created=utc_now(),
        command=command,
        out_dir=str(folder),
        data=str(config.get("source", "")),
        data_sha256=str((config.get("data") or {}).get("sha256", "")),
        model=config.get("model"),
        embeddings=config.get("embeddings"),
        prompts=dict(config.get("prompts") or {}),
        metrics=list(config.get("metrics") or metrics),
        summary={m: {k: s.get(k) for k in SUMMARY_KEYS} for m, s in metrics.items()},
        rows=int(summary.get("rows", 0)),
        git=git_state(cwd if cwd is not None else Path.cwd()),
        app=dict(app) if isinstance(app, dict) else None,
        results_sha256=_results_sha256(summary),
    )
    return store.add(record)
