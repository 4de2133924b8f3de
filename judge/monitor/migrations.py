"""The monitor state's format history: small named migrations, applied in order, as the
run store's are (`judge.runs.migrations`): the format is `PRAGMA user_version`, a file is
never half-migrated, and a released migration is never edited."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from judge.cache.migrations import apply_in_order

APPLICATION_ID = 0x4A4D4F4E  # "JMON": marks a file as a judge monitor state


def m001_create_state(db: sqlite3.Connection) -> None:
    """Format 1: the spans of traces still open, every trace seen once with what became of
    it (skipped, sampled out, over budget, pending, judged), the budget spent per hour, the
    windows, the detectors' states and the alerts, the files followed and the counters."""
    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
    db.execute("CREATE TABLE counts (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    db.execute(
        "CREATE TABLE spans (trace_id TEXT NOT NULL, span_id TEXT NOT NULL, data TEXT NOT NULL,"
        " PRIMARY KEY (trace_id, span_id))"
    )
    db.execute(
        "CREATE TABLE open_traces (trace_id TEXT PRIMARY KEY, first_at REAL NOT NULL,"
        " last_at REAL NOT NULL, root_at REAL)"
    )
    # One row per trace id ever completed: a trace id is judged at most once.
    db.execute(
        "CREATE TABLE traces (seq INTEGER PRIMARY KEY, trace_id TEXT NOT NULL UNIQUE,"
        " seen_at REAL NOT NULL, start_time TEXT, status TEXT NOT NULL, reason TEXT,"
        " message TEXT, row TEXT, requests INTEGER, window INTEGER, scores TEXT,"
        " evidence TEXT, judged_at REAL)"
    )
    db.execute("CREATE INDEX traces_by_status ON traces (status, seq)")
    db.execute("CREATE INDEX traces_by_window ON traces (window)")
    db.execute("CREATE TABLE budget (hour INTEGER PRIMARY KEY, spent INTEGER NOT NULL)")
    db.execute(
        "CREATE TABLE windows (number INTEGER PRIMARY KEY, start TEXT, end TEXT,"
        " closed_at REAL NOT NULL, summary TEXT NOT NULL)"
    )
    db.execute("CREATE TABLE detectors (metric TEXT PRIMARY KEY, state TEXT NOT NULL)")
    db.execute(
        "CREATE TABLE alerts (id INTEGER PRIMARY KEY, window INTEGER NOT NULL,"
        " metric TEXT NOT NULL, at REAL NOT NULL, alert TEXT NOT NULL)"
    )
    db.execute(
        "CREATE TABLE files (identity TEXT PRIMARY KEY, path TEXT NOT NULL,"
        " offset INTEGER NOT NULL, size INTEGER NOT NULL)"
    )
    db.execute("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def m002_spend(db: sqlite3.Connection) -> None:
    """Format 2: the budget spent per hour and per day of the traces' start times (seconds
    3600 or 86400, the period's number since the epoch), in requests and in dollars, for
    `--budget` in either; the hours spent before carried over (in requests, their dollars
    unknown: 0)."""
    db.execute(
        "CREATE TABLE spend (seconds INTEGER NOT NULL, number INTEGER NOT NULL,"
        " requests INTEGER NOT NULL, dollars REAL NOT NULL, PRIMARY KEY (seconds, number))"
    )
    db.execute("INSERT INTO spend SELECT 3600, hour, spent, 0.0 FROM budget")
    db.execute(
        "INSERT INTO spend SELECT 86400, hour / 24, sum(spent), 0.0 FROM budget GROUP BY hour / 24"
    )
    db.execute("DROP TABLE budget")


def m003_encoded_spans(db: sqlite3.Connection) -> None:
    """Format 3: a span received as OTLP protobuf is kept as its protobuf bytes (a BLOB in
    spans.data; the others stay JSON text), decoded once, when its trace is complete. No
    table changes: the new format number keeps an older judge, which reads JSON alone, from
    misreading such a state."""


def m004_late_rows(db: sqlite3.Connection) -> None:
    """Format 4: an open trace's earliest span start time (open_traces.start_ns, Unix
    nanoseconds; NULL for traces opened before: they hold no window), so that a time
    window waits for the traces that started inside it; and why a row came after its time
    window had closed (traces.late: `open_at_close` or `after_close`; NULL for a row in
    time), so that such a row is counted, not lost."""
    db.execute("ALTER TABLE open_traces ADD COLUMN start_ns INTEGER")
    db.execute("CREATE INDEX open_traces_by_start ON open_traces (start_ns)")
    db.execute("ALTER TABLE traces ADD COLUMN late TEXT")


def m005_alert_outbox(db: sqlite3.Connection) -> None:
    """Format 5: the webhook's outbox, one row per alert to post (queued in the transaction
    that records the alert, when a webhook is given): `pending` until the webhook took it
    (`delivered`) or refused it (`refused`, a 4xx), with the tries made and the last
    failure, so that an alert is posted at least once across restarts and kill -9. The
    alerts recorded before are not queued: they were posted at most once, as then."""
    db.execute(
        "CREATE TABLE outbox (alert INTEGER PRIMARY KEY, status TEXT NOT NULL,"
        " queued_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_at REAL,"
        " failure TEXT)"
    )
    db.execute("CREATE INDEX outbox_by_status ON outbox (status, alert)")


def m006_spend_when_judged(db: sqlite3.Connection) -> None:
    """Format 6: the budget spent per hour and per day of the clock when the rows were
    charged (`spend_judged`, as `spend` is per period of the traces' start times), so that
    a backlog of old traces is not judged at once with a fresh budget for each of the
    periods it spans. Nothing spent before is carried over: the current hour and day start
    from nothing once."""
    db.execute(
        "CREATE TABLE spend_judged (seconds INTEGER NOT NULL, number INTEGER NOT NULL,"
        " requests INTEGER NOT NULL, dollars REAL NOT NULL, PRIMARY KEY (seconds, number))"
    )


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    m001_create_state,
    m002_spend,
    m003_encoded_spans,
    m004_late_rows,
    m005_alert_outbox,
    m006_spend_when_judged,
)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply the migrations the file lacks, in one transaction; returns their names.

    The connection must be in autocommit mode (isolation_level=None).
    """
    return apply_in_order(db, MIGRATIONS)
