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
saying it is damaged. `verify_file` and `repair_file` (`judge cache verify|repair`) check
and mend a whole file, an older format's too.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from judge.cache.migrations import MIGRATIONS, SCHEMA_VERSION, migrate, with_server
from judge.errors import CacheError, CacheMiss, CacheStoreError
from judge.json_values import canonical_json, sha256_hex

CacheMode = Literal["read-write", "replay", "record", "off"]
MODES: tuple[CacheMode, ...] = ("read-write", "replay", "record", "off")

_APPLICATION_ID = 0x4A444745  # "JDGE": marks a file as a judge cache
_MMAP_BYTES = 256 * 2**20
_COLUMNS = (
    "key, kind, request, response, model, resolved_model, prompt, prompt_version, mode, "
    "usage, created"
)
# What a full read takes: the response as bytes (its checksum is of its UTF-8 bytes, and a
# text damaged into invalid UTF-8 must be a damaged entry, not an SQLite decoding error).
_READ = (
    "key, kind, request, CAST(response AS BLOB), model, resolved_model, prompt,"
    " prompt_version, mode, usage, created, response_crc, vector_crc, vector"
)
# The fast path of a hit: an embedding's bytes, else the JSON (see get_response).
_READ_RESPONSE = (
    "SELECT response_crc, vector_crc, vector, CASE WHEN vector IS NULL THEN"
    " CAST(response AS BLOB) END FROM judgments WHERE key = ?"
)
# SQLite's words for a file whose pages are damaged (the others: locked, I/O, full ...).
_DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


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


def checksum(key: str | bytes, data: bytes) -> int:
    """The crc32 of data seeded with the crc32 of its key: an entry's bytes found under
    another key (a damaged index) do not match either."""
    seed = zlib.crc32(key if isinstance(key, bytes) else key.encode())
    return zlib.crc32(data, seed)


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
            self.path.parent.mkdir(parents=True, exist_ok=True)
        else:
            self.read_only = not _writable(self.path)
        db: sqlite3.Connection | None = None
        try:
            db = _connect(self.path, read_only=self.read_only)
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
            if self.read_only:
                if version < SCHEMA_VERSION:
                    raise CacheError(
                        f"{self.path} is read-only and in cache format {version}, which this "
                        f"judge reads once upgraded to format {SCHEMA_VERSION}: open it once "
                        "where it is writable (or use a writable copy) to upgrade it"
                    )
                return db
            _use_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            if not tables:
                db.execute(f"PRAGMA application_id={_APPLICATION_ID}")
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
        if _is_damage(exc):
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
            elif _is_damage(exc):
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
        return self._lookup(f"SELECT {_READ} FROM judgments WHERE key = ?", key, _checked_entry)

    def get_response(self, key: str) -> Any | None:
        """Only the stored response under key (the fast path of a cache hit), or None; an
        embedding stored as floats comes back as a read-only float64 numpy array. A damaged
        entry is None too (in replay mode a `CacheMiss` saying so)."""
        if not self.reads:
            return None
        # An embedding's float64 bytes when stored (see migrations.m003_rowid_table_with_vectors):
        # the same floats as its JSON, without parsing the decimals; the JSON is read only
        # when there are no bytes.
        return self._lookup(_READ_RESPONSE, key, _checked_response)

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
            try:
                with self._lock, self._failing_as_cache_error("reading", path):
                    row: tuple[Any, ...] | None = db.execute(query, (key,)).fetchone()
            except _Damaged as exc:
                damage.append((path, exc.why))
                continue
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
            if doing == "reading" and (_is_damage(exc) or _is_undecodable(exc)):
                raise _Damaged(f"SQLite: {exc}") from exc
            error = CacheStoreError if doing == "writing" else CacheError
            if _is_damage(exc):  # SQLite refuses to write into damaged pages
                where = path or self.path
                raise error(
                    f"{where}: {doing} the cache failed: the file is damaged ({exc}); drop "
                    f"what is damaged with `judge cache repair {where}`, then rerun"
                ) from exc
            raise error(
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
                f"INSERT OR REPLACE INTO judgments ({_COLUMNS}, vector, response_crc, "
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
                rows = self._db.execute(f"SELECT {_READ} FROM judgments ORDER BY key").fetchall()
        except sqlite3.Error as exc:
            raise CacheError(f"{self.path}: reading the entries failed ({exc}); {mend}") from exc
        for row in rows:
            entry, why = _checked_entry(row[0], row)
            if entry is None:
                damaged = f"{self.path}: the entry of key {row[0]} is damaged ({why})"
                raise CacheError(f"{damaged}; {mend}")
            yield entry

    def verify(self) -> Verification:
        """Check the whole file: SQLite's integrity check, and every entry's checksums."""
        with self._lock:
            return _verify_db(self._db)

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
            if _is_damage(exc):
                return False
            with self._failing_as_cache_error("writing"):
                raise
        return True

    def _rebuild(self) -> None:
        """Copy every entry SQLite can read and whose checksums match into a new file, and
        put it in this one's place (the caller holds the lock)."""
        fresh = self.path.with_name(f".{self.path.name}.repairing")
        for leftover in _files_of(fresh):
            leftover.unlink(missing_ok=True)
        out = sqlite3.connect(fresh, isolation_level=None)
        try:
            out.execute(f"PRAGMA application_id={_APPLICATION_ID}")
            migrate(out)
            columns = f"{_COLUMNS}, vector, response_crc, vector_crc"
            out.execute("BEGIN")
            for row in _readable_rows(self._db, columns):
                key, response, vector, response_crc, vector_crc = (
                    row[0], row[3], row[11], row[12], row[13]
                )  # fmt: skip
                raw = response.encode() if isinstance(response, str) else response
                if _damage_of(key.encode(), response_crc, vector_crc, vector, raw) is None:
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
        for leftover in _files_of(self.path)[1:]:
            leftover.unlink(missing_ok=True)
        os.replace(fresh, self.path)
        self._db = _connect(self.path, read_only=False)
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


def verify_file(path: str | os.PathLike[str]) -> Verification:
    """Check a cache file without writing to it (an older format is not upgraded): SQLite's
    integrity check, and from format 4 every entry's checksums.

    Args:
        path: the cache file (it must exist; it may be read-only).
    """
    path = Path(path)
    try:
        db = _connect(path, read_only=True)
    except sqlite3.Error as exc:
        raise CacheError(f"{path}: cannot be opened to read ({exc})") from exc
    try:
        version = _format_of(path, db)
        if version >= SCHEMA_VERSION:
            return _verify_db(db)
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
    if path.is_file() and _writable(path):
        db = _connect(path, read_only=False)
        try:
            version = _format_of(path, db)
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


def _format_of(path: Path, db: sqlite3.Connection) -> int:
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
    if app_id != _APPLICATION_ID and tables:
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


def _verify_db(db: sqlite3.Connection) -> Verification:
    """Verify a format-4 file: SQLite's integrity check, and every entry's checksums."""
    found = Verification(integrity=_integrity(db))
    try:
        for rowid, key, *stored in db.execute(
            "SELECT rowid, CAST(key AS BLOB), response_crc, vector_crc, vector,"
            " CAST(response AS BLOB) FROM judgments NOT INDEXED"
        ):
            found.entries += 1
            kind = _damage_of(key, *stored)
            if kind is not None:
                found.damaged.setdefault(kind, []).append(rowid)
    except sqlite3.Error as exc:
        found.integrity.append(f"reading the entries stopped: {exc}")
    return found


def _rebuild_old(path: Path, db: sqlite3.Connection, version: int) -> int | None:
    """Put in place of an older-format file a new one holding every row SQLite can read of
    it, upgraded to the current format; returns how many rows could not be read (None when
    SQLite could not count them). Closes db."""
    fresh = path.with_name(f".{path.name}.repairing")
    for leftover in _files_of(fresh):
        leftover.unlink(missing_ok=True)
    out = sqlite3.connect(fresh, isolation_level=None)
    try:
        try:  # through the (smaller) index of keys, which may be intact
            before = int(db.execute("SELECT count(*) FROM judgments").fetchone()[0])
        except sqlite3.Error:
            before = None
        out.execute(f"PRAGMA application_id={_APPLICATION_ID}")
        for migration in MIGRATIONS[:version]:  # the same table, empty
            migration(out)
        out.execute(f"PRAGMA user_version={version}")
        names = ", ".join(r[1] for r in out.execute("PRAGMA table_info(judgments)"))
        marks = ", ".join("?" * len(names.split(", ")))
        # Format 3 has rowids to step by; formats 1 and 2 are keyed by their keys only.
        rows = _readable_rows(db, names) if version >= 3 else _readable_rows_by_key(db, names)
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
        for leftover in _files_of(fresh):
            leftover.unlink(missing_ok=True)
        raise
    out.close()
    db.close()
    for leftover in _files_of(path)[1:]:
        leftover.unlink(missing_ok=True)
    os.replace(fresh, path)
    return None if before is None else max(before - copied, 0)


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A fallback cache file, checked (and migrated if old) as any cache, then opened
    read-only so that nothing can write to it through this connection."""
    if not path.is_file():
        raise CacheError(f"fallback cache {path}: no such file; give an existing cache file")
    Cache(path, mode="off").close()  # refuses a file that is not a judge cache, migrates one
    try:
        return _connect(path, read_only=True)
    except sqlite3.DatabaseError as exc:
        raise CacheError(
            f"fallback cache {path} cannot be opened read-only ({exc}); make its folder "
            "readable and writable (SQLite keeps a -shm file beside it) or leave it out"
        ) from exc


# How long opening waits for another connection's write transaction (the busy timeout).
_BUSY_SECONDS = 60.0


def _use_wal(db: sqlite3.Connection) -> None:
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


def _connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
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


def _writable(path: Path) -> bool:
    """Whether judge may write the cache file: the file, and its folder (SQLite keeps its
    -wal and -shm files beside it), both writable."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _files_of(path: Path) -> list[Path]:
    """A database file and its -wal and -shm files."""
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _is_damage(exc: sqlite3.Error) -> bool:
    """Whether SQLite found the file's pages damaged (not locked, full or unreadable)."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(_DAMAGE_CODES) or "malformed" in str(exc)


def _is_undecodable(exc: sqlite3.Error) -> bool:
    """A text column holding invalid UTF-8 (raised by Python's sqlite3 when it decodes)."""
    return isinstance(exc, sqlite3.OperationalError) and "decode" in str(exc)


class _Damaged(Exception):
    """A lookup whose row SQLite could not read: a damaged entry, not a failing file."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


# The kinds of damage `Cache.verify` reports, one line each.
BAD_RESPONSE = "with a response that does not match its checksum"
BAD_VECTOR = "with vector bytes that do not match their checksum"
_WHY = {
    BAD_RESPONSE: "its response does not match its checksum",
    BAD_VECTOR: "its vector bytes do not match their checksum",
}


def _damage_of(
    key: bytes, response_crc: Any, vector_crc: Any, vector: Any, response: Any
) -> str | None:
    """The kind of damage of an entry's stored values, or None when they check out."""
    if vector is not None and not (
        isinstance(vector, bytes)
        and len(vector) % 8 == 0
        and isinstance(vector_crc, int)
        and checksum(key, vector) == vector_crc
    ):
        return BAD_VECTOR
    if response is not None and not (
        isinstance(response, bytes)
        and isinstance(response_crc, int)
        and checksum(key, response) == response_crc
    ):
        return BAD_RESPONSE
    return None


def _checked_response(key: str, row: tuple[Any, ...]) -> tuple[Any, str | None]:
    """get_response's row checked: (the value, None), or (None, what is damaged). Inlined
    checks: this is every cache hit's path."""
    response_crc, vector_crc, vector, response = row
    seed = zlib.crc32(key.encode())
    if vector is not None:
        if type(vector) is not bytes or len(vector) % 8 or zlib.crc32(vector, seed) != vector_crc:
            return None, _WHY[BAD_VECTOR]
        return np.frombuffer(vector, dtype="<f8"), None  # no copy, no list of float objects
    if type(response) is not bytes or zlib.crc32(response, seed) != response_crc:
        return None, _WHY[BAD_RESPONSE]
    try:  # decoded first: json.loads of bytes guesses their encoding, in Python code
        return json.loads(response.decode()), None
    except ValueError:  # written so (a checksum matches what was stored, even not JSON)
        return None, "its response is not JSON"


def _checked_entry(key: str, row: tuple[Any, ...]) -> tuple[CacheEntry | None, str | None]:
    """A full row checked: (the entry, None), or (None, what is damaged)."""
    *columns, response_crc, vector_crc, vector = row
    damage = _damage_of(key.encode(), response_crc, vector_crc, vector, columns[3])
    if damage is not None:
        return None, _WHY[damage]
    try:
        return _entry(tuple(columns)), None
    except (ValueError, TypeError) as exc:
        return None, f"it is not JSON ({exc})"


def _readable_rows(db: sqlite3.Connection, columns: str) -> Iterator[tuple[Any, ...]]:
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
