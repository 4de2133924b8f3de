"""A SQLite cache of judgments and embeddings: readable JSON, safe across processes.

The key of an entry is the sha256 of the canonical JSON of everything that decides the
model's output (the server's identity, model, messages, output schema, n, temperature,
seed, max_tokens, prompt name and version) and nothing else: keys, timeouts, retry
settings and the structured-output mode are not in it. The server identity (see
`judge.cache.identity`) is the normalised `api_base`, or a name given on purpose with
`cache_as`, which is how recorded judgments replay against a server at another address.
Entries can be exported to and imported from sorted JSONL, so recorded judgments can live
in git. The file's format is versioned and migrated in place (`judge.cache.migrations`).
Every response is stored as JSON; an embedding's floats are also stored as their float64
bytes, which lookups read (the same numbers, without parsing thousands of decimals).

Every entry carries checksums (crc32, seeded with its key) of its JSON and of its bytes,
checked on every read: a damaged entry is never served. It counts as a miss (`damaged`
counts them): a read-write run asks again and rewrites it, a replay raises a `CacheMiss`
saying it is damaged. `judge.cache.integrity.verify_file` and
`judge.cache.repair.repair_file` (`judge cache verify|repair`) check and mend a whole file,
an older format's too; how the files are opened is `judge.cache.sqlite`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Literal

from judge.cache.entries import (
    COLUMNS,
    READ,
    CacheEntry,
    cache_key,
    checked_entry,
    checked_response,
    checksum,
    damage_of,
    vector_blob,
)
from judge.cache.integrity import Verification, readable_rows, verify_db
from judge.cache.migrations import SCHEMA_VERSION, migrate, with_server
from judge.cache.sqlite import (
    APPLICATION_ID,
    connect,
    files_of,
    is_damage,
    is_undecodable,
    use_wal,
    writable,
)
from judge.errors import CacheError, CacheMiss, CacheStoreError
from judge.json_values import canonical_json

# CacheEntry and cache_key are the cache's vocabulary, importable from here as before.
__all__ = ["MODES", "Cache", "CacheEntry", "CacheMode", "Verification", "cache_key"]

CacheMode = Literal["read-write", "replay", "record", "off"]
MODES: tuple[CacheMode, ...] = ("read-write", "replay", "record", "off")


# The fast path of a hit: an embedding's bytes, else the JSON (see get_response).
_READ_RESPONSE = (
    "SELECT response_crc, vector_crc, vector, CASE WHEN vector IS NULL THEN"
    " CAST(response AS BLOB) END FROM judgments WHERE key = ?"
)


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
        self.path = Path(path)
        self.read_only = False
        self.mode = mode  # checked before the file is touched
        self.fallbacks = tuple(Path(p) for p in fallbacks)
        self.hits = 0
        self.misses = 0
        self.damaged = 0  # damaged entries found (and not served) by lookups
        self._lock = threading.Lock()
        self._db = self._open()
        if self.read_only and self.stores:
            self._db.close()
            raise CacheError(self._cannot_store())
        # Lookups try these in order: the own file first.
        self._readers = [(self.path, self._db), *((p, _open_read_only(p)) for p in self.fallbacks)]

    def _cannot_store(self) -> str:
        return (
            f"{self.path} is read-only (no permission to write it or its folder, or a "
            "read-only file system), so this run could not store the judgments it pays "
            "for: give a writable --cache, or --no-cache, or --replay to only read it "
            "(in Python: Cache(path, mode='replay'))"
        )

    def _open(self) -> sqlite3.Connection:
        if not self.path.exists():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CacheError(
                    f"{self.path}: the cache's folder {self.path.parent} cannot be made "
                    f"({exc.strerror or exc}): give a --cache in a writable folder, or "
                    "--no-cache"
                ) from None
        else:
            self.read_only = not writable(self.path)
        db: sqlite3.Connection | None = None
        try:
            db = connect(self.path, read_only=self.read_only)
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if app_id != APPLICATION_ID and tables:
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
            if self.read_only:
                if version < SCHEMA_VERSION:
                    raise CacheError(
                        f"{self.path} is read-only and in cache format {version}, which this "
                        f"judge reads once upgraded to format {SCHEMA_VERSION}: open it once "
                        "where it is writable (or use a writable copy) to upgrade it"
                    )
                return db
            use_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            if not tables:
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            if version < SCHEMA_VERSION:
                self._migrate(db, version)
        except sqlite3.Error as exc:
            if db is not None:
                db.close()
            raise CacheError(self._open_failure(exc)) from exc
        except BaseException:
            if db is not None:
                db.close()
            raise
        return db

    def _open_failure(self, exc: sqlite3.Error) -> str:
        """Why the file could not be opened, in words that do not call a healthy file damaged."""
        if is_damage(exc):
            return (
                f"{self.path} is damaged or not an SQLite file ({exc}); move it away or give "
                "--cache a new path (`judge cache repair` mends a file with damaged entries)"
            )
        if getattr(exc, "sqlite_errorname", "").startswith("SQLITE_READONLY"):
            return self._cannot_store()
        return (
            f"{self.path}: opening the cache failed ({exc}); check that the file and its "
            "folder can be read and written and that the disk has space, or give --cache "
            "another path"
        )

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
            elif is_damage(exc):
                raise CacheError(
                    f"{self.path} is damaged: upgrading it from cache format {version} to "
                    f"{SCHEMA_VERSION} could not read some of its pages ({exc}); this process "
                    "left the file unchanged. Rebuild it from every entry still readable with "
                    f"`judge cache repair {self.path}` (a read-write run asks for the others again)"
                ) from exc
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
        if self.read_only and value in ("read-write", "record"):
            raise CacheError(self._cannot_store())
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
        """The entry stored under key, or None (always None unless the mode reads); a
        damaged entry is None too (in replay mode a `CacheMiss` saying so)."""
        if not self.reads:
            return None
        return self._lookup(f"SELECT {READ} FROM judgments WHERE key = ?", key, checked_entry)

    def get_response(self, key: str) -> Any | None:
        """Only the stored response under key (the fast path of a cache hit), or None; an
        embedding stored as floats comes back as a read-only float64 numpy array. A damaged
        entry is None too (in replay mode a `CacheMiss` saying so)."""
        if not self.reads:
            return None
        # An embedding's float64 bytes when stored (see migrations.m003_rowid_table_with_vectors):
        # the same floats as its JSON, without parsing the decimals; the JSON is read only
        # when there are no bytes.
        return self._lookup(_READ_RESPONSE, key, checked_response)

    def _lookup(
        self,
        query: str,
        key: str,
        check: Callable[[str, tuple[Any, ...]], tuple[Any, str | None]],
    ) -> Any | None:
        """The checked value of key in the own file, else in the first fallback holding a
        good one; None on a miss. A damaged entry is counted and passed over: in replay mode,
        with none good, it is a CacheMiss saying so."""
        damage: list[tuple[Path, str]] = []
        for path, db in self._readers:
            # Not through _failing_as_cache_error: a context manager of its own for every
            # lookup cost more than the lookup's own Python code.
            try:
                with self._lock:
                    row: tuple[Any, ...] | None = db.execute(query, (key,)).fetchone()
            except sqlite3.Error as exc:
                error = self._cache_error(exc, "reading", path)
                if isinstance(error, _Damaged):
                    damage.append((path, error.why))
                    continue
                raise error from exc
            if row is None:
                continue
            value, why = check(key, row)
            if why is None:
                self.hits += 1
                self.damaged += len(damage)
                return value
            damage.append((path, why))
        self.misses += 1
        self.damaged += len(damage)
        if damage and self._mode == "replay":
            path, why = damage[0]
            raise CacheMiss(
                f"replay mode: the entry of key {key[:16]} in {path} is damaged ({why}); "
                "nothing was sent. Record it again with a read-write run (it is asked for "
                f"again and rewritten), or drop the damaged entries: judge cache repair {path}",
                key=key,
            )
        return None

    @contextlib.contextmanager
    def _failing_as_cache_error(self, doing: str, path: Path | None = None) -> Iterator[None]:
        """An SQLite failure (I/O error, a closed or locked file) as a CacheError, so the
        judge call it happened in fails alone, not the whole run; pages SQLite finds
        damaged as `_Damaged` (a damaged entry), a failed write as a CacheStoreError."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self._cache_error(exc, doing, path) from exc

    def _cache_error(self, exc: sqlite3.Error, doing: str, path: Path | None) -> Exception:
        """What `_failing_as_cache_error` raises for an SQLite failure."""
        if doing == "reading" and (is_damage(exc) or is_undecodable(exc)):
            return _Damaged(f"SQLite: {exc}")
        error = CacheStoreError if doing == "writing" else CacheError
        if is_damage(exc):  # SQLite refuses to write into damaged pages
            where = path or self.path
            return error(
                f"{where}: {doing} the cache failed: the file is damaged ({exc}); drop "
                f"what is damaged with `judge cache repair {where}`, then rerun"
            )
        return error(
            f"{path or self.path}: {doing} the cache failed ({type(exc).__name__}: "
            f"{exc}); free disk space or give --cache a new path, then rerun to fill the gaps"
        )

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
        rows = []
        for e in entries:
            response = canonical_json(e.response)
            vector = vector_blob(e.response) if e.kind == "embedding" else None
            rows.append(
                (
                    e.key,
                    e.kind,
                    canonical_json(e.request),
                    response,
                    e.model,
                    e.resolved_model,
                    e.prompt,
                    e.prompt_version,
                    e.mode,
                    None if e.usage is None else canonical_json(e.usage),
                    e.created,  # 0 means unknown; kept, so export -> import -> export is stable
                    vector,
                    checksum(e.key, response.encode()),
                    None if vector is None else checksum(e.key, vector),
                )
            )
        if self.read_only:
            raise CacheStoreError(self._cannot_store())
        with self._lock, self._failing_as_cache_error("writing"):
            self._store(rows)

    def _store(self, rows: list[tuple[Any, ...]]) -> None:
        """Write rows in one transaction (the caller holds the lock)."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                f"INSERT OR REPLACE INTO judgments ({COLUMNS}, vector, response_crc, "
                "vector_crc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        """Every entry, sorted by key; a damaged one is a CacheError (an export or a merge
        must not carry it on), which says how to find and drop them."""
        mend = (
            f"see them all with `judge cache verify {self.path}`, drop them with "
            f"`judge cache repair {self.path}`"
        )
        try:
            with self._lock:
                rows = self._db.execute(f"SELECT {READ} FROM judgments ORDER BY key").fetchall()
        except sqlite3.Error as exc:
            raise CacheError(f"{self.path}: reading the entries failed ({exc}); {mend}") from exc
        for row in rows:
            entry, why = checked_entry(row[0], row)
            if entry is None:
                damaged = f"{self.path}: the entry of key {row[0]} is damaged ({why})"
                raise CacheError(f"{damaged}; {mend}")
            yield entry

    def verify(self) -> Verification:
        """Check the whole file: SQLite's integrity check, and every entry's checksums."""
        with self._lock:
            return verify_db(self._db)

    def repair(self) -> tuple[int, int]:
        """Drop every damaged entry; returns (dropped, kept). When SQLite finds the file
        itself damaged, its index is rebuilt, or else every readable good entry is copied
        into a new file that takes its place."""
        if self.read_only:
            raise CacheError(self._cannot_store())
        found = self.verify()
        rowids = [r for kind in found.damaged.values() for r in kind]
        with self._lock:
            try:  # through the index of keys: the scan of verify may have stopped early
                before = int(self._db.execute("SELECT count(*) FROM judgments").fetchone()[0])
            except sqlite3.Error:
                before = found.entries
        with self._lock:
            if found.integrity:
                # A DELETE would have to update the damaged pages (SQLite refuses): mend the
                # index first; if that is not enough, copy the good entries to a new file.
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("REINDEX judgments")
                try:
                    still = [r[0] for r in self._db.execute("PRAGMA integrity_check(1)")]
                except sqlite3.Error:
                    still = ["damaged"]
                if still != ["ok"] or not self._delete(rowids):
                    self._rebuild()
            elif not self._delete(rowids):
                self._rebuild()  # damage the integrity check did not see
        with self._lock:
            kept = int(self._db.execute("SELECT count(*) FROM judgments").fetchone()[0])
        return max(before - kept, len(rowids)), kept

    def _delete(self, rowids: list[int]) -> bool:
        """Delete rows in one transaction (the caller holds the lock); False when SQLite
        finds pages on the way damaged (nothing is deleted then)."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "DELETE FROM judgments WHERE rowid = ?", [(r,) for r in rowids]
                )
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            if is_damage(exc):
                return False
            with self._failing_as_cache_error("writing"):
                raise
        return True

    def _rebuild(self) -> None:
        """Copy every entry SQLite can read and whose checksums match into a new file, and
        put it in this one's place (the caller holds the lock)."""
        fresh = self.path.with_name(f".{self.path.name}.repairing")
        for leftover in files_of(fresh):
            leftover.unlink(missing_ok=True)
        out = sqlite3.connect(fresh, isolation_level=None)
        try:
            out.execute(f"PRAGMA application_id={APPLICATION_ID}")
            migrate(out)
            columns = f"{COLUMNS}, vector, response_crc, vector_crc"
            out.execute("BEGIN")
            for row in readable_rows(self._db, columns):
                key, response, vector, response_crc, vector_crc = (
                    row[0], row[3], row[11], row[12], row[13]
                )  # fmt: skip
                raw = response.encode() if isinstance(response, str) else response
                if damage_of(key.encode(), response_crc, vector_crc, vector, raw) is None:
                    out.execute(
                        f"INSERT OR IGNORE INTO judgments ({columns}) VALUES "
                        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        row,
                    )
            out.execute("COMMIT")
            out.execute("PRAGMA journal_mode=WAL")
        finally:
            out.close()
        self._db.close()
        for leftover in files_of(self.path)[1:]:
            leftover.unlink(missing_ok=True)
        os.replace(fresh, self.path)
        self._db = connect(self.path, read_only=False)
        self._readers[0] = (self.path, self._db)

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
        return connect(path, read_only=True)
    except sqlite3.DatabaseError as exc:
        raise CacheError(
            f"fallback cache {path} cannot be opened read-only ({exc}); make its folder "
            "readable and writable (SQLite keeps a -shm file beside it) or leave it out"
        ) from exc


class _Damaged(Exception):
    """A lookup whose row SQLite could not read: a damaged entry, not a failing file."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why
