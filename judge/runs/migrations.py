"""The run store's format history: small named migrations, applied in order.

A store's format is the number of migrations applied to it, kept in SQLite's
`PRAGMA user_version`, as the judgment cache's is (`judge.cache.migrations`). Opening a
file applies the missing ones in one transaction, so a file is never half-migrated and two
processes opening an old file migrate it once. A migration is frozen once released: to
change the format, append a function; never edit or reorder one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from judge.cache.migrations import apply_in_order

APPLICATION_ID = 0x4A52554E  # "JRUN": marks a file as a judge run store


def m001_create_runs(db: sqlite3.Connection) -> None:
    """Format 1: one row per run; lists and mappings as readable JSON text. The file is
    marked as a run store in the same transaction: another process never sees its tables
    without the mark."""
    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
    db.execute(
        "CREATE TABLE IF NOT EXISTS runs (id TEXT NOT NULL UNIQUE, name TEXT,"
        " created TEXT NOT NULL, command TEXT NOT NULL, out_dir TEXT NOT NULL,"
        " data TEXT NOT NULL, data_sha256 TEXT NOT NULL, model TEXT, embeddings TEXT,"
        " prompts TEXT NOT NULL, metrics TEXT NOT NULL, summary TEXT NOT NULL,"
        " rows INTEGER NOT NULL, git TEXT, app TEXT)"
    )
    db.execute("CREATE INDEX IF NOT EXISTS runs_by_name ON runs (name)")


def m002_tags_and_baseline(db: sqlite3.Connection) -> None:
    """Format 2: a run's tags (a table of their own, one row per tag) and the baseline flag,
    at most one run flagged (a partial unique index holds it). Format-1 runs have no tags
    and none is the baseline."""
    db.execute(
        "CREATE TABLE tags (run_id TEXT NOT NULL, tag TEXT NOT NULL, PRIMARY KEY (run_id, tag))"
    )
    db.execute("ALTER TABLE runs ADD COLUMN baseline INTEGER NOT NULL DEFAULT 0")
    db.execute("CREATE UNIQUE INDEX one_baseline ON runs (baseline) WHERE baseline = 1")


def m003_results_sha256(db: sqlite3.Connection) -> None:
    """Format 3: the sha256 of the results.jsonl a run wrote (its summary.json's
    results_sha256), so that a folder another run wrote into since is told apart. Runs
    recorded before have none (NULL): their folder cannot be checked."""
    db.execute("ALTER TABLE runs ADD COLUMN results_sha256 TEXT")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    m001_create_runs,
    m002_tags_and_baseline,
    m003_results_sha256,
)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply the migrations the file lacks, in one transaction; returns their names.

    The connection must be in autocommit mode (isolation_level=None).
    """
    return apply_in_order(db, MIGRATIONS)
