"""Mending a cache file of any format: an older one rebuilt in the current format from
every row SQLite can read, then every damaged entry dropped (`judge cache repair`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judge.cache.integrity import format_of, readable_rows
from judge.cache.migrations import MIGRATIONS, SCHEMA_VERSION, migrate
from judge.cache.sqlite import APPLICATION_ID, connect, files_of, writable
from judge.cache.store import Cache


def repair_file(path: str | os.PathLike[str]) -> tuple[int | None, int]:
    """Drop every damaged entry of a cache file (see `Cache.repair`); returns (dropped,
    kept), dropped None when SQLite could not count an older file's damaged table. A file
    in an older format is first rebuilt in the current one from every row SQLite can still
    read (the upgrade itself gives them their checksums), since its damaged pages would stop
    the upgrade made on opening it.

    Args:
        path: the cache file (it must exist and be writable).
    """
    path = Path(path)
    lost: int | None = 0
    if path.is_file() and writable(path):
        db = connect(path, read_only=False)
        try:
            version = format_of(path, db)
        except BaseException:
            db.close()
            raise
        if version < SCHEMA_VERSION:
            lost = _rebuild_old(path, db, version)  # closes db
        else:
            db.close()
    with Cache(path) as cache:
        dropped, kept = cache.repair()
    return None if lost is None else dropped + lost, kept


def _rebuild_old(path: Path, db: sqlite3.Connection, version: int) -> int | None:
    """Put in place of an older-format file a new one holding every row SQLite can read of
    it, upgraded to the current format; returns how many rows could not be read (None when
    SQLite could not count them). Closes db."""
    fresh = path.with_name(f".{path.name}.repairing")
    for leftover in files_of(fresh):
        leftover.unlink(missing_ok=True)
    out = sqlite3.connect(fresh, isolation_level=None)
    try:
        try:  # through the (smaller) index of keys, which may be intact
            before = int(db.execute("SELECT count(*) FROM judgments").fetchone()[0])
        except sqlite3.Error:
            before = None
        out.execute(f"PRAGMA application_id={APPLICATION_ID}")
        for migration in MIGRATIONS[:version]:  # the same table, empty
            migration(out)
        out.execute(f"PRAGMA user_version={version}")
        names = ", ".join(r[1] for r in out.execute("PRAGMA table_info(judgments)"))
        marks = ", ".join("?" * len(names.split(", ")))
        # Format 3 has rowids to step by; formats 1 and 2 are keyed by their keys only.
        rows = readable_rows(db, names) if version >= 3 else _readable_rows_by_key(db, names)
        copied = 0
        out.execute("BEGIN")
        for row in rows:
            copied += out.execute(
                f"INSERT OR IGNORE INTO judgments ({names}) VALUES ({marks})", row
            ).rowcount
        out.execute("COMMIT")
        migrate(out)  # the release's own upgrade: checksums as m004 computes them
        out.execute("PRAGMA journal_mode=WAL")
    except BaseException:
        out.close()
        db.close()
        for leftover in files_of(fresh):
            leftover.unlink(missing_ok=True)
        raise
    out.close()
    db.close()
    for leftover in files_of(path)[1:]:
        leftover.unlink(missing_ok=True)
    os.replace(fresh, path)
    return None if before is None else max(before - copied, 0)


def _readable_rows_by_key(
    db: sqlite3.Connection, columns: str, prefix: str = ""
) -> Iterator[tuple[Any, ...]]:
    """Every row of a table keyed by hex keys (formats 1 and 2) that SQLite can still read:
    a range of keys that meets a damaged page is read again in 16 narrower ones, down to
    keys sharing 4 hex digits (what is left is unreadable)."""
    if prefix:
        query = f"SELECT {columns} FROM judgments WHERE key >= ? AND key < ?"
        params: tuple[str, ...] = (prefix, prefix + "\x7f")  # above every hex digit
    else:
        query, params = f"SELECT {columns} FROM judgments", ()
    try:
        yield from db.execute(query, params).fetchall()
    except sqlite3.Error:
        if len(prefix) < 4:
            for digit in "0123456789abcdef":
                yield from _readable_rows_by_key(db, columns, prefix + digit)
