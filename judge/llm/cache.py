"""A SQLite cache of judgments and embeddings: readable JSON, safe across processes.

The key of an entry is the sha256 of the canonical JSON of everything that decides the
model's output (the server's identity, model, messages, output schema, n, temperature,
seed, max_tokens, prompt name and version) and nothing else: keys, timeouts, retry
settings and the structured-output mode are not in it. The server identity (see
`judge.llm.identity`) is the normalised `api_base`, or a name given on purpose with
`cache_as`, which is how recorded judgments replay against a server at another address.
Entries can be exported to and imported from sorted JSONL, so recorded judgments can live
in git. The file's format is versioned and migrated in place (`judge.llm.migrations`).
Every response is stored as JSON; an embedding's floats are also stored as their float64
bytes, which lookups read (the same numbers, without parsing thousands of decimals).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import struct
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from judge.errors import CacheError
from judge.json_values import canonical_json, sha256_hex
from judge.llm.migrations import SCHEMA_VERSION, migrate, with_server

CacheMode = Literal["read-write", "replay", "record", "off"]
MODES: tuple[CacheMode, ...] = ("read-write", "replay", "record", "off")

_APPLICATION_ID = 0x4A444745  # "JDGE": marks a file as a judge cache
_MMAP_BYTES = 256 * 2**20
_COLUMNS = (
    "key, kind, request, response, model, resolved_model, prompt, prompt_version, mode, "
    "usage, created"
)


@dataclass(frozen=True)
class CacheEntry:
    """One stored judgment (kind "chat") or embedding (kind "embedding")."""

    key: str
    kind: str
    request: dict[str, Any]
    response: Any
    model: str
    resolved_model: str | None = None
    prompt: str | None = None
    prompt_version: str | None = None
    mode: str | None = None
    usage: dict[str, Any] | None = None
    created: float = 0.0


def vector_blob(response: Any) -> bytes | None:
    """An embedding response's floats as little-endian float64 bytes (stored beside its
    JSON and read instead), or None when it is not a list of floats only."""
    if not isinstance(response, list) or not all(type(x) is float for x in response):
        return None
    return struct.pack(f"<{len(response)}d", *response)


def cache_key(request: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the request's key material."""
    return sha256_hex(canonical_json(request))


class Cache:
    """Judgments and embeddings in one SQLite file (WAL; several processes may share it).

    A file written by an older judge is migrated when opened (entries of format 1, which
    did not record their server, get the server identity "unknown"); a file written by a
    newer judge is refused.

    Args:
        path: the SQLite file; created if absent.
        mode: "read-write" (hit, or call and store), "replay" (never call: a miss is an
            error), "record" (always call and overwrite), "off" (neither read nor write).
            It may be changed later (`cache.mode = "replay"`); every value is checked.
        fallbacks: other cache files, looked up in order when this one has no entry
            (e.g. the files of other workers): opened read-only, never written, and not
            counted by `len()`, `entries()` or exports. Each must exist.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: CacheMode = "read-write",
        *,
        fallbacks: Sequence[str | os.PathLike[str]] = (),
    ):
        self.mode = mode
        self.path = Path(path)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._db = self._open()
        self.fallbacks = tuple(Path(p) for p in fallbacks)
        # Lookups try these in order: the own file first.
        self._readers = [(self.path, self._db), *((p, _open_read_only(p)) for p in self.fallbacks)]

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(
                self.path, timeout=60, check_same_thread=False, isolation_level=None
            )
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if app_id != _APPLICATION_ID and tables:
                raise CacheError(
                    f"{self.path} is an SQLite file but not a judge cache; give --cache a new path"
                )
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise CacheError(
                    f"{self.path} was written by a newer judge (cache format {version}; "
                    f"this judge reads formats up to {SCHEMA_VERSION}); upgrade judge or "
                    "use another cache file"
                )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # Lookups read mapped pages instead of copying them in with a system call each:
            # about half the time of a cache hit on a file larger than SQLite's page cache
            # in format 2; with format 3's rowid table the gain is smaller (20-26 -> 17-25 us
            # on a 1.2 GB file), and the mapped pages count in the resident memory.
            db.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
            if not tables:
                db.execute(f"PRAGMA application_id={_APPLICATION_ID}")
            if version < SCHEMA_VERSION:
                self._migrate(db, version)
        except sqlite3.DatabaseError as exc:
            raise CacheError(
                f"{self.path} is damaged or not an SQLite file ({exc}); move it "
                "away or give --cache a new path"
            ) from exc
        return db

    def _migrate(self, db: sqlite3.Connection, version: int) -> None:
        """Bring the file up to the current format; a failure leaves it as it was."""
        try:
            migrate(db)
        except sqlite3.Error as exc:
            if "locked" in str(exc):
                # Another process held the write lock past the busy timeout: most likely it
                # is upgrading the same file (a large cache takes minutes).
                advice = (
                    "Another judge process is probably upgrading it now; rerun when it has finished"
                )
            else:
                advice = "Check that it is writable, or give --cache a new path"
            raise CacheError(
                f"{self.path}: upgrading the cache from format {version} to {SCHEMA_VERSION} "
                f"failed ({exc}); this process left the file unchanged. {advice}"
            ) from exc

    @property
    def mode(self) -> CacheMode:
        """The cache mode (see the class docstring); checked on every assignment."""
        return self._mode

    @mode.setter
    def mode(self, value: CacheMode) -> None:
        if value not in MODES:
            raise CacheError(
                f"cache mode {value!r} is not one of {', '.join(MODES)}; "
                "to stop using the cache, set mode 'off'"
            )
        self._mode = value

    @property
    def reads(self) -> bool:
        """Whether lookups may be answered from the cache in this mode."""
        return self._mode in ("read-write", "replay")

    @property
    def stores(self) -> bool:
        """Whether new results are written in this mode."""
        return self._mode in ("read-write", "record")

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under key, or None (always None unless the mode reads)."""
        if not self.reads:
            return None
        row = self._lookup(f"SELECT {_COLUMNS} FROM judgments WHERE key = ?", key)
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return _entry(row)

    def get_response(self, key: str) -> Any | None:
        """Only the stored response under key (the fast path of a cache hit), or None; an
        embedding stored as floats comes back as a read-only float64 numpy array."""
        if not self.reads:
            return None
        # An embedding's float64 bytes when stored (see migrations.m003_rowid_table_with_vectors):
        # the same floats as its JSON, without parsing the decimals; the JSON is read only
        # when there are no bytes, or bytes cut short (a damaged file).
        row = self._lookup(
            "SELECT vector, CASE WHEN vector IS NULL OR length(vector) % 8 != 0 THEN response"
            " END FROM judgments WHERE key = ?",
            key,
        )
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        vector, response = row
        if response is None:
            return np.frombuffer(vector, dtype="<f8")  # no copy, no list of float objects
        return json.loads(response)

    def _lookup(self, query: str, key: str) -> tuple[Any, ...] | None:
        """The row of key in the own file, else in the first fallback holding it."""
        for path, db in self._readers:
            with self._lock, self._failing_as_cache_error("reading", path):
                row: tuple[Any, ...] | None = db.execute(query, (key,)).fetchone()
            if row is not None:
                return row
        return None

    @contextlib.contextmanager
    def _failing_as_cache_error(self, doing: str, path: Path | None = None) -> Iterator[None]:
        """An SQLite failure (disk full, I/O error, a closed or locked file) as a CacheError,
        so the judge call it happened in fails alone, not the whole run."""
        try:
            yield
        except sqlite3.Error as exc:
            raise CacheError(
                f"{path or self.path}: {doing} the cache failed ({type(exc).__name__}: "
                f"{exc}); free disk space or give --cache a new path, then rerun to fill the gaps"
            ) from exc

    def put(self, entry: CacheEntry) -> None:
        """Store an entry (a no-op unless the mode stores); the last write of a key wins."""
        if not self.stores:
            return
        self._write([entry])

    def put_many(self, entries: list[CacheEntry]) -> None:
        """Store entries in one transaction (a no-op unless the mode stores)."""
        if self.stores and entries:
            self._write(entries)

    def _write(self, entries: list[CacheEntry]) -> None:
        rows = [
            (
                e.key,
                e.kind,
                canonical_json(e.request),
                canonical_json(e.response),
                e.model,
                e.resolved_model,
                e.prompt,
                e.prompt_version,
                e.mode,
                None if e.usage is None else canonical_json(e.usage),
                e.created,  # 0 means unknown; kept, so export -> import -> export is stable
                vector_blob(e.response) if e.kind == "embedding" else None,
            )
            for e in entries
        ]
        with self._lock, self._failing_as_cache_error("writing"):
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    f"INSERT OR REPLACE INTO judgments ({_COLUMNS}, vector) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM judgments").fetchone()[0])

    def entries(self) -> Iterator[CacheEntry]:
        """Every entry, sorted by key."""
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM judgments ORDER BY key").fetchall()
        return (_entry(row) for row in rows)

    def export_jsonl(self, path: str | os.PathLike[str], *, reproducible: bool = False) -> int:
        """Write every entry as one JSON line, sorted by key; returns the count.

        Args:
            path: the JSONL file to write.
            reproducible: write `created` as 0, so re-recording the same judgments gives
                the same bytes (for fixtures kept in git).
        """
        count = 0
        with open(path, "w", encoding="utf-8") as out:
            for entry in self.entries():
                data = asdict(entry)
                if reproducible:
                    data["created"] = 0.0  # a float, as the database gives it back
                out.write(canonical_json(data) + "\n")
                count += 1
        return count

    def import_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Add the entries of a JSONL export (checking each key); returns the count.

        Lines exported by an older judge (cache format 1, no server in the request) are
        upgraded as the file migration does: server identity "unknown", key recomputed.
        """
        entries = []
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    entry = CacheEntry(**json.loads(line))
                except (json.JSONDecodeError, TypeError) as exc:
                    raise CacheError(f"{path}:{number}: not a cache entry ({exc})") from exc
                if cache_key(entry.request) != entry.key:
                    raise CacheError(
                        f"{path}:{number}: the key does not match the request; "
                        "the line was edited by hand or is damaged"
                    )
                request = with_server(entry.request)
                if request is not entry.request:
                    entry = replace(entry, key=cache_key(request), request=request)
                entries.append(entry)
        if entries:
            self._write(entries)
        return len(entries)

    def close(self) -> None:
        """Close the database file and the fallbacks."""
        with self._lock:
            for _, db in self._readers:
                db.close()

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A fallback cache file, checked (and migrated if old) as any cache, then opened
    read-only so that nothing can write to it through this connection."""
    if not path.is_file():
        raise CacheError(f"fallback cache {path}: no such file; give an existing cache file")
    Cache(path, mode="off").close()  # refuses a file that is not a judge cache, migrates one
    try:
        db = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro",
            uri=True,
            timeout=60,
            check_same_thread=False,
            isolation_level=None,
        )
        db.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
    except sqlite3.DatabaseError as exc:
        raise CacheError(
            f"fallback cache {path} cannot be opened read-only ({exc}); make its folder "
            "readable and writable (SQLite keeps a -shm file beside it) or leave it out"
        ) from exc
    return db


def _entry(row: tuple[Any, ...]) -> CacheEntry:
    key, kind, request, response, model, resolved, prompt, version, mode, usage, created = row
    return CacheEntry(
        key=key,
        kind=kind,
        request=json.loads(request),
        response=json.loads(response),
        model=model,
        resolved_model=resolved,
        prompt=prompt,
        prompt_version=version,
        mode=mode,
        usage=None if usage is None else json.loads(usage),
        created=created,
    )
