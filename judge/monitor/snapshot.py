"""A monitor state read from outside the monitor (`judge view --monitor`): opened read-only,
read in one short read transaction, closed.

A monitor may be writing the state meanwhile. SQLite's WAL lets a reader see the last
committed batch while a writer goes on, and a reader holds no lock a writer waits for (it
only keeps a checkpoint from passing the point it reads, until it ends): so the snapshot
is one transaction of a few indexed queries, and the connection is closed before the
caller does anything with what was read. The file is opened with `mode=ro` (never
`immutable=1`, which would skip the locks and could read a batch half-written), with a busy
timeout for the moments SQLite's own recovery holds the file; nothing is migrated or
created, so a state of an older judge is read as it is.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.monitor.migrations import APPLICATION_ID, SCHEMA_VERSION
from judge.monitor.state import STATE_FILE, MonitorStateError, counts_of

BUSY_SECONDS = 5.0


@dataclass
class StateSnapshot:
    """What a monitor state held at one moment.

    Args:
        path: the state's file (monitor.sqlite).
        settings: what the state was started with (`window`, `baseline`).
        counts: the counters and traces by status (`judge.monitor.state.counts_of`).
        open_traces: traces whose spans are held until they are complete.
        windows: the closed windows' summaries (number, start, end, rows, baseline,
            metrics: {metric: {scored, mean, ci_low, ci_high}}), in window order.
        detectors: each metric's check state as the monitor saved it (a
            `DropDetector.to_json()`, or {"unchecked": why}).
        alerts: each alert's record as the monitor saved it, with its `id` and `at` (Unix
            time), in the order fired.
        traces: the judged rows of the traces the alerts name as worst, by trace id: the
            row as `judge traces extract` made it, its `scores`, and the judge's
            `evidence` and `errors`; a trace the state no longer holds is absent.
    """

    path: Path
    settings: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    open_traces: int = 0
    windows: list[dict[str, Any]] = field(default_factory=list)
    detectors: dict[str, Any] = field(default_factory=dict)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    traces: dict[str, dict[str, Any]] = field(default_factory=dict)


def read_snapshot(folder: str | os.PathLike[str]) -> StateSnapshot:
    """Read a monitor state without writing to it (see the module).

    Args:
        folder: the folder `judge monitor` was given as --state (monitor.sqlite in it).
    """
    path = Path(folder) / STATE_FILE
    if not path.is_file():
        raise MonitorStateError(
            f"no monitor state in {folder} (it has no {STATE_FILE}): give the folder "
            "judge monitor was given as --state"
        )
    try:
        db = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro",
            uri=True,
            timeout=BUSY_SECONDS,
            isolation_level=None,
        )
    except sqlite3.Error as exc:
        raise MonitorStateError(f"the monitor state {path} cannot be opened ({exc})") from exc
    try:
        db.execute("BEGIN")
        try:
            return _read(db, path)
        finally:
            db.execute("COMMIT")
    except sqlite3.Error as exc:
        raise MonitorStateError(
            f"the monitor state {path} cannot be read ({exc}): if it is damaged, the monitor "
            "says so too; give another state folder"
        ) from exc
    except (ValueError, TypeError) as exc:  # a record no monitor writes: edited, or damaged
        raise MonitorStateError(
            f"the monitor state {path} cannot be read (a record of it is not the JSON a "
            f"monitor writes: {exc}): it was edited or damaged; give another state folder"
        ) from exc
    finally:
        db.close()


def _read(db: sqlite3.Connection, path: Path) -> StateSnapshot:
    app_id = db.execute("PRAGMA application_id").fetchone()[0]
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    tables = int(db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    if not tables:  # the file a monitor starting makes, before its first transaction
        raise MonitorStateError(
            f"{path} holds no monitor state yet (an empty file: a monitor starting on it "
            "writes its tables in its first transaction): try again once it has started"
        )
    if app_id != APPLICATION_ID or version < 1:
        raise MonitorStateError(
            f"{path} is an SQLite file but not a judge monitor state: give the folder judge "
            "monitor was given as --state"
        )
    if version > SCHEMA_VERSION:
        raise MonitorStateError(
            f"{path} was written by a newer judge (monitor state format {version}; this "
            f"judge reads formats up to {SCHEMA_VERSION}): upgrade judge"
        )
    snapshot = StateSnapshot(path)
    snapshot.settings = {str(k): str(v) for k, v in db.execute("SELECT key, value FROM settings")}
    snapshot.counts = counts_of(db)
    snapshot.open_traces = int(db.execute("SELECT count(*) FROM open_traces").fetchone()[0])
    snapshot.windows = [
        json.loads(text) for (text,) in db.execute("SELECT summary FROM windows ORDER BY number")
    ]
    snapshot.detectors = {
        str(metric): json.loads(text)
        for metric, text in db.execute("SELECT metric, state FROM detectors ORDER BY metric")
    }
    for number, at, text in db.execute("SELECT id, at, alert FROM alerts ORDER BY id"):
        snapshot.alerts.append({**json.loads(text), "id": int(number), "at": float(at)})
    wanted = {
        str(worst["trace_id"])
        for alert in snapshot.alerts
        for worst in alert.get("worst") or []
        if isinstance(worst, dict) and worst.get("trace_id") is not None
    }
    for trace_id in sorted(wanted):
        found = db.execute(
            "SELECT row, scores, evidence, window FROM traces WHERE trace_id=?", (trace_id,)
        ).fetchone()
        if found is None or found[0] is None:
            continue
        judged = json.loads(found[2]) if found[2] else {}
        snapshot.traces[trace_id] = {
            "row": json.loads(found[0]),
            "scores": json.loads(found[1]) if found[1] else {},
            "evidence": judged.get("evidence"),
            "errors": judged.get("errors"),
            "window": found[3],
        }
    return snapshot
