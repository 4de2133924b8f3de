"""The cache file's format history: small named migrations, applied in order.

A cache file's format is the number of migrations applied to it, kept in SQLite's
`PRAGMA user_version`. Opening a file applies the missing ones in one transaction, so a
file is never half-migrated and two processes opening an old file migrate it once. A
migration is frozen once released: it computes keys as its format defined them, not with
whatever `cache_key` later becomes. To change the format, append a function; never edit
or reorder one.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from judge.cache.identity import UNKNOWN
from judge.json_values import canonical_json, sha256_hex


def m001_create_judgments(db: sqlite3.Connection) -> None:
    """Format 1: one table of judgments and embeddings, keyed by the sha256 of the request."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS judgments (key TEXT PRIMARY KEY, kind TEXT NOT NULL,"
        " request TEXT NOT NULL, response TEXT NOT NULL, model TEXT NOT NULL,"
        " resolved_model TEXT, prompt TEXT, prompt_version TEXT, mode TEXT, usage TEXT,"
        " created REAL NOT NULL) WITHOUT ROWID"
    )


def m002_server_in_keys(db: sqlite3.Connection) -> None:
    """Format 2: the server identity is part of the key material (`request["server"]`).

    Format-1 entries did not record their server, so they get the identity "unknown" and
    their keys are recomputed from the stored request; nothing is dropped.
    """
    rows = db.execute("SELECT key, request FROM judgments").fetchall()
    updates = []
    for key, text in rows:
        request = with_server(json.loads(text))
        updates.append((sha256_hex(canonical_json(request)), canonical_json(request), key))
    db.executemany("UPDATE judgments SET key = ?, request = ? WHERE key = ?", updates)


def with_server(request: dict[str, Any]) -> dict[str, Any]:
    """Format-1 key material upgraded to format 2 (unchanged if it names a server)."""
    return request if "server" in request else {**request, "server": UNKNOWN}


def m003_rowid_table_with_vectors(db: sqlite3.Connection) -> None:
    """Format 3: judgments in an ordinary (rowid) table with an index of their keys, and an
    embedding's floats kept also as their float64 bytes (`vector`), which lookups read.

    A WITHOUT ROWID table keeps whole rows in its key's tree; a judgment's row (its request
    holds the prompt and the schema) is a few kilobytes, more than SQLite advises for one,
    so the tree is deep and every lookup walks it. Through the small index of keys a lookup
    took about half the time (70,000 judgments in random order: 38 -> 16-18 us).

    The response stays JSON, readable and exported as it is. Parsing a dense vector's
    decimals was a third of a replayed row's time (1,536 numbers, about 0.5 ms); the bytes
    are read in microseconds and give the same floats, bit for bit. They come before the
    JSON in the row, so a lookup of a vector stops reading there.
    """
    columns = (
        "key, kind, request, response, model, resolved_model, prompt, prompt_version, mode,"
        " usage, created"
    )
    db.create_function("m003_vector", 1, _m003_vector, deterministic=True)
    db.execute(
        "CREATE TABLE judgments_v3 (key TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL,"
        " vector BLOB, response TEXT NOT NULL, request TEXT NOT NULL, model TEXT NOT NULL,"
        " resolved_model TEXT, prompt TEXT, prompt_version TEXT, mode TEXT, usage TEXT,"
        " created REAL NOT NULL)"
    )
    db.execute(
        f"INSERT INTO judgments_v3 ({columns}, vector) SELECT {columns},"
        " CASE WHEN kind = 'embedding' THEN m003_vector(response) END FROM judgments"
    )
    db.execute("DROP TABLE judgments")
    db.execute("ALTER TABLE judgments_v3 RENAME TO judgments")


def _m003_vector(response: str) -> bytes | None:
    """Format 3's bytes of an embedding's JSON response: its floats as little-endian
    float64, or None when it is not a list of floats only (then its JSON is read). Frozen
    with the migration; `judge.cache.entries.vector_blob` writes the same for new entries."""
    try:
        vector = json.loads(response)
    except ValueError:  # a damaged entry does not stop the upgrade; its lookups say so
        return None
    if not isinstance(vector, list) or not all(type(x) is float for x in vector):
        return None
    return struct.pack(f"<{len(vector)}d", *vector)


def m004_checksums(db: sqlite3.Connection) -> None:
    """Format 4: each entry carries the crc32 of its response's JSON text (`response_crc`)
    and of its vector's bytes (`vector_crc`), both seeded with the crc32 of its key, so a
    damaged response, vector or index entry (one key's lookup landing on another's row) is
    found on read instead of served (`judge.cache.store`).

    The checksums come before the vector and the JSON in the row, so a lookup reads no
    further than before. An entry already damaged when upgraded (a response that is not
    JSON, bytes that are not its JSON's floats) gets no checksum: its reads say damaged.
    """
    columns = (
        "key, kind, vector, response, request, model, resolved_model, prompt, prompt_version,"
        " mode, usage, created"
    )
    checksums = _M004Checksums()
    db.create_function("m004_response_crc", 2, checksums.response_crc, deterministic=True)
    db.create_function("m004_vector_crc", 3, checksums.vector_crc, deterministic=True)
    db.execute(
        "CREATE TABLE judgments_v4 (key TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL,"
        " response_crc INTEGER, vector_crc INTEGER, vector BLOB, response TEXT NOT NULL,"
        " request TEXT NOT NULL, model TEXT NOT NULL, resolved_model TEXT, prompt TEXT,"
        " prompt_version TEXT, mode TEXT, usage TEXT, created REAL NOT NULL)"
    )
    # As blobs: a text damaged into invalid UTF-8 reaches the functions instead of failing
    # the whole upgrade.
    db.execute(
        f"INSERT INTO judgments_v4 ({columns}, response_crc, vector_crc) SELECT {columns},"
        " m004_response_crc(CAST(key AS BLOB), CAST(response AS BLOB)),"
        " m004_vector_crc(CAST(key AS BLOB), vector, CAST(response AS BLOB)) FROM judgments"
    )
    db.execute("DROP TABLE judgments")
    db.execute("ALTER TABLE judgments_v4 RENAME TO judgments")


class _M004Checksums:
    """Format 4's two checksums of a row, from one parse of its response's JSON: SQLite
    calls the response's function and then the vector's for each row it copies, and a
    1,536-dimension embedding's JSON took about 0.7 ms to parse (twice, before)."""

    _DAMAGED = object()

    def __init__(self) -> None:
        self._text: bytes | None = None
        self._value: object = self._DAMAGED

    def _parsed(self, response: bytes) -> object:
        """The response's JSON value (the last row's, when it is the same text)."""
        if response != self._text:
            self._text = response
            try:
                self._value = json.loads(response)
            except ValueError:  # not JSON, or not UTF-8: damaged before the upgrade
                self._value = self._DAMAGED
        return self._value

    def response_crc(self, key: bytes, response: bytes) -> int | None:
        """The checksum of a response, or None when it is not JSON (damaged already)."""
        if self._parsed(response) is self._DAMAGED:
            return None
        return zlib.crc32(response, zlib.crc32(key))

    def vector_crc(self, key: bytes, vector: object, response: bytes) -> int | None:
        """The checksum of a vector's bytes, or None when there are none, or when they are
        not the floats of its JSON (either was damaged before the upgrade)."""
        if vector is None:
            return None
        value = self._parsed(response)
        if not isinstance(value, list) or not all(type(x) is float for x in value):
            return None
        if not isinstance(vector, bytes) or vector != struct.pack(f"<{len(value)}d", *value):
            return None
        return zlib.crc32(vector, zlib.crc32(key))


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    m001_create_judgments,
    m002_server_in_keys,
    m003_rowid_table_with_vectors,
    m004_checksums,
)
SCHEMA_VERSION = len(MIGRATIONS)
# Migrations that copy the table into a new one: the old one's pages are left free, and the
# file would keep twice its size until vacuumed.
REBUILDS = frozenset({m003_rowid_table_with_vectors.__name__, m004_checksums.__name__})


def apply_in_order(
    db: sqlite3.Connection, migrations: Sequence[Callable[[sqlite3.Connection], None]]
) -> list[str]:
    """Apply the migrations past the file's `PRAGMA user_version`, in one transaction,
    each raising the version by one; returns their names. A format history of another
    SQLite file of judge's (the run store's) is applied the same way.

    The connection must be in autocommit mode (isolation_level=None).
    """
    db.execute("BEGIN IMMEDIATE")  # the version is read again under the write lock
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        applied = []
        for number, migration in enumerate(migrations[version:], start=version + 1):
            migration(db)
            db.execute(f"PRAGMA user_version={number}")
            applied.append(migration.__name__)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return applied


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply the migrations the file lacks, in one transaction; returns their names.

    The connection must be in autocommit mode (isolation_level=None).
    """
    applied = apply_in_order(db, MIGRATIONS)
    if REBUILDS.intersection(applied):
        compact(db)
    return applied


def compact(db: sqlite3.Connection) -> None:
    """Vacuum the file after a rebuild, and empty its write-ahead log, if nothing else is
    writing to it now; otherwise leave it larger (the free pages are used again by new
    entries). The migration is committed already: nothing here can lose an entry."""
    # No waiting: while it runs the vacuum holds the write lock, and a writer of another
    # process would wait for all of it; and a failure here must not read as a failed upgrade.
    timeout = int(db.execute("PRAGMA busy_timeout").fetchone()[0])
    db.execute("PRAGMA busy_timeout=0")
    try:
        with contextlib.suppress(sqlite3.Error):
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.execute(f"PRAGMA busy_timeout={timeout}")
