"""How judge opens its SQLite files: the cache's mark, WAL with a busy wait, read-only
connections that never write, memory-mapped reads, and SQLite's words for damage.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

APPLICATION_ID = 0x4A444745  # "JDGE": marks a file as a judge cache
_MMAP_BYTES = 256 * 2**20


# SQLite's words for a file whose pages are damaged (the others: locked, I/O, full ...).
_DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


# How long opening waits for another connection's write transaction (the busy timeout).
_BUSY_SECONDS = 60.0


def use_wal(db: sqlite3.Connection) -> None:
    """Switch the file to WAL, waiting while another connection writes it. SQLite refuses
    the switch at once, without its busy wait, while another connection holds a write
    transaction (another process creating the same new file's tables: two pytest-xdist
    workers on one new cache), so the wait is here."""
    deadline = time.monotonic() + _BUSY_SECONDS
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """A connection to a cache file; read-only ones never write (not even a -shm file when
    the folder is read-only: then the file is opened as immutable, as on read-only media)."""
    if read_only:
        wal = path.with_name(path.name + "-wal")
        flag = "mode=ro"
        if not os.access(path.parent, os.W_OK) and not (wal.is_file() and wal.stat().st_size):
            flag = "immutable=1"  # nothing can change it: no -shm file needed
        db = sqlite3.connect(
            f"{path.resolve().as_uri()}?{flag}",
            uri=True,
            timeout=60,
            check_same_thread=False,
            isolation_level=None,
        )
    else:
        db = sqlite3.connect(
            path, timeout=_BUSY_SECONDS, check_same_thread=False, isolation_level=None
        )
    # Lookups read mapped pages instead of copying them in with a system call each:
    # about half the time of a cache hit on a file larger than SQLite's page cache
    # in format 2; with format 3's rowid table the gain is smaller (20-26 -> 17-25 us
    # on a 1.2 GB file), and the mapped pages count in the resident memory.
    db.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
    return db


def writable(path: Path) -> bool:
    """Whether judge may write the cache file: the file, and its folder (SQLite keeps its
    -wal and -shm files beside it), both writable."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def files_of(path: Path) -> list[Path]:
    """A database file and its -wal and -shm files."""
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether SQLite found the file's pages damaged (not locked, full or unreadable)."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(_DAMAGE_CODES) or "malformed" in str(exc)


def is_undecodable(exc: sqlite3.Error) -> bool:
    """A text column holding invalid UTF-8 (raised by Python's sqlite3 when it decodes)."""
    return isinstance(exc, sqlite3.OperationalError) and "decode" in str(exc)


@contextmanager
def immediate_transaction(
    db: sqlite3.Connection, lock: threading.Lock | threading.RLock
) -> Iterator[sqlite3.Connection]:
    """One write transaction taken at once (BEGIN IMMEDIATE), under `lock`: committed when
    the block ends, rolled back when it raises. A second process waits for SQLite's lock
    instead of failing when its read turns into a write; sqlite3 errors reach the caller,
    who says which file could not be written."""
    with lock:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
