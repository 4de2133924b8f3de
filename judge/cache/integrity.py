"""Checking a cache file: SQLite's integrity check, every entry's checksums, the file's
format, and the rows SQLite can still read of a damaged one.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.cache.entries import damage_of
from judge.cache.migrations import SCHEMA_VERSION
from judge.cache.sqlite import APPLICATION_ID, connect
from judge.errors import CacheError


@dataclass
class Verification:
    """What `Cache.verify` found: the entries, the damaged ones by kind of damage (their
    rowids), SQLite's own integrity check (empty when it says ok), and the file's format
    (before format 4 there are no checksums: only SQLite's check is made)."""

    entries: int = 0
    damaged: dict[str, list[int]] = field(default_factory=dict)
    integrity: list[str] = field(default_factory=list)
    format: int = SCHEMA_VERSION
    counted: bool = True  # False when SQLite could not count an older file's entries

    @property
    def clean(self) -> bool:
        """Whether nothing is damaged."""
        return not self.damaged and not self.integrity

    @property
    def damaged_count(self) -> int:
        """How many entries are damaged."""
        return sum(len(rowids) for rowids in self.damaged.values())


def verify_file(path: str | os.PathLike[str]) -> Verification:
    """Check a cache file without writing to it (an older format is not upgraded): SQLite's
    integrity check, and from format 4 every entry's checksums.

    Args:
        path: the cache file (it must exist; it may be read-only).
    """
    path = Path(path)
    try:
        db = connect(path, read_only=True)
    except sqlite3.Error as exc:
        raise CacheError(f"{path}: cannot be opened to read ({exc})") from exc
    try:
        version = format_of(path, db)
        if version >= SCHEMA_VERSION:
            return verify_db(db)
        found = Verification(format=version)
        found.integrity = _integrity(db)
        try:
            found.entries = int(db.execute("SELECT count(*) FROM judgments").fetchone()[0])
        except sqlite3.Error as exc:
            found.counted = False
            found.integrity.append(f"counting the entries failed: {exc}")
        return found
    finally:
        db.close()


def format_of(path: Path, db: sqlite3.Connection) -> int:
    """The cache format of a file; a CacheError when it is not a judge cache or is newer."""
    try:
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise CacheError(
            f"{path} is damaged or not an SQLite file ({exc}); move it away or give --cache "
            "a new path"
        ) from exc
    if app_id != APPLICATION_ID and tables:
        raise CacheError(f"{path} is an SQLite file but not a judge cache")
    if version > SCHEMA_VERSION:
        raise CacheError(
            f"{path} was written by a newer judge (cache format {version}; this judge reads "
            f"formats up to {SCHEMA_VERSION}); upgrade judge"
        )
    return version


def _integrity(db: sqlite3.Connection) -> list[str]:
    """SQLite's integrity check: empty when it says ok, else its first messages."""
    try:
        messages = [r[0] for r in db.execute("PRAGMA integrity_check(20)")]
    except sqlite3.Error as exc:
        return [str(exc)]
    return [] if messages == ["ok"] else messages


def verify_db(db: sqlite3.Connection) -> Verification:
    """Verify a format-4 file: SQLite's integrity check, and every entry's checksums."""
    found = Verification(integrity=_integrity(db))
    try:
        for rowid, key, *stored in db.execute(
            "SELECT rowid, CAST(key AS BLOB), response_crc, vector_crc, vector,"
            " CAST(response AS BLOB) FROM judgments NOT INDEXED"
        ):
            found.entries += 1
            kind = damage_of(key, *stored)
            if kind is not None:
                found.damaged.setdefault(kind, []).append(rowid)
    except sqlite3.Error as exc:
        found.integrity.append(f"reading the entries stopped: {exc}")
    return found


def readable_rows(db: sqlite3.Connection, columns: str) -> Iterator[tuple[Any, ...]]:
    """Every row SQLite can still read, in rowid order, stepping over damaged pages."""
    try:
        last = int(db.execute("SELECT max(rowid) FROM judgments").fetchone()[0] or 0)
    except sqlite3.Error as exc:
        raise CacheError(f"the cache is too damaged to repair ({exc}); move it away") from exc
    step = 256
    for start in range(1, last + 1, step):
        query = f"SELECT {columns} FROM judgments WHERE rowid BETWEEN ? AND ?"
        try:
            yield from db.execute(query, (start, start + step - 1)).fetchall()
        except sqlite3.Error:  # a damaged page among these: one row at a time
            for rowid in range(start, start + step):
                with contextlib.suppress(sqlite3.Error):
                    yield from db.execute(
                        f"SELECT {columns} FROM judgments WHERE rowid = ?", (rowid,)
                    ).fetchall()
