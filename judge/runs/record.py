"""A run's record made from its summary (`judge.run.folder.RunFolder.record` reads it) and
the user's git state."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from judge.runs.store import RunRecord, new_run_id, utc_now

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


def _results_sha256(summary: dict[str, Any]) -> str | None:
    """The hash of results.jsonl that summary.json vouches for, or None (an older judge's)."""
    value = summary.get("results_sha256")
    return value if isinstance(value, str) else None


def record_of(
    summary: dict[str, Any],
    out_dir: Path,
    command: str,
    name: str | None = None,
    cwd: Path | None = None,
) -> RunRecord:
    """A new record of the run whose folder `out_dir` holds `summary` (its summary.json,
    read by `judge.run.folder.RunFolder.record`).

    Args:
        summary: the run's summary.json.
        out_dir: the run's output folder, resolved.
        command: what made the run: "eval", "experiment", "merge" or "python".
        name: a name for the run, or None.
        cwd: where the run was made, for its git state (default: the working directory).
    """
    config = summary["config"]
    metrics = summary.get("metrics") or {}
    app = config.get("app")
    return RunRecord(
        id=new_run_id(),
        name=name,
        created=utc_now(),
        command=command,
        out_dir=str(out_dir),
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
