"""The monitor's state: one SQLite file (monitor.sqlite in `--state DIR`), written one
transaction per batch, so that a monitor killed at any moment (kill -9 too) restarts where
the last batch left it: spans received are kept until their trace completes, a trace id is
completed once, and a row is judged until recorded as judged (its judgments then come from
judge's cache, not the judge, if it is judged again after a kill).

The habits of the run store (`judge.runs.store`): WAL, a mark of its own
(`PRAGMA application_id`), the format history in `judge.monitor.migrations`, one connection
shared by the threads of the process behind a lock.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from judge.cache.sqlite import immediate_transaction
from judge.errors import JudgeError
from judge.locks import LockHeld, hold_lock
from judge.monitor.migrations import APPLICATION_ID, SCHEMA_VERSION, migrate
from judge.traces.assemble import assemble, is_local_root
from judge.traces.extract import trace_result
from judge.traces.otlp import EncodedSpan, decode_span
from judge.traces.rows import Skip
from judge.traces.spans import Span

STATE_FILE = "monitor.sqlite"
LOCK_FILE = "monitor.lock"  # held (flock) by the monitor writing the state, with its pid
_BUSY_SECONDS = 30.0

# What became of a completed trace (the traces table's status).
SKIPPED = "skipped"  # gave no row: `reason` says why, as `judge traces extract` says it
SAMPLED_OUT = "sampled_out"  # left out by --sample-rate
OVER_BUDGET = "over_budget"  # sampled, but its price was over what --budget left
PENDING = "pending"  # to be judged
JUDGED = "judged"

# Why a row came after its time window had closed (the traces table's late column): the
# window closed at its --late bound while the trace was still open, or the trace's first
# span came after the window had closed.
LATE_OPEN = "open_at_close"
LATE_AFTER = "after_close"

# What became of an alert queued for the webhook (the outbox table's status).
OUTBOX_PENDING = "pending"  # to be posted (again, after a failed try)
OUTBOX_DELIVERED = "delivered"  # the webhook answered 2xx
OUTBOX_REFUSED = "refused"  # the webhook answered another 4xx: not posted again

# The counters of traces forgotten by --keep-traces: PRUNED + what `counts_of` counted them
# as (a status, skipped:REASON, late, late:REASON), added back there, and FORGOTTEN, all.
PRUNED = "pruned:"
FORGOTTEN = "forgotten"
_PRUNE_BATCH = 5000  # traces forgotten per transaction

COUNTERS = ("spans", "duplicate_spans", "late_spans", "rejected_spans", "bad_lines")
# Counters of the judge's requests sent (retries included) and answers found in judge's
# cache, from the run's usage (counter -> usage key), added in the transaction that records
# the rows judged: a restart counts nothing twice.
JUDGE_USAGE = {"judge_requests": "requests", "judge_cache_hits": "cache_hits"}


DAMAGED = (
    "if it is damaged, move it away and a new one is started (what was judged stays in "
    "judge's cache)"
)


def _remedy(exc: sqlite3.Error) -> str:
    """What to do about an SQLite error on the state, when it says: "; ..." or nothing."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return (
            ": another process holds it (a second monitor on this --state, a backup, an "
            "sqlite3 shell); one monitor per --state"
        )
    if "malformed" in text or "not a database" in text:
        return f": {DAMAGED}"
    return ""


class MonitorStateError(JudgeError):
    """The monitor's state cannot be used: damaged, not a monitor state, or from a newer judge."""


@dataclass(frozen=True)
class Completed:
    """One completed trace's fate, as `MonitorState.complete` is told it by its chooser."""

    status: str
    requests: int = 0
    window: int | None = None  # a time window's number, known from the start time


def span_json(span: Span) -> str:
    """A span as the JSON text the state keeps (bytes attributes as {"__bytes__": base64})."""
    fields = [
        span.span_id,
        span.parent_id,
        span.name,
        span.start_ns,
        span.end_ns,
        span.attributes,
        span.parent_remote,
    ]
    text = json.dumps(fields, ensure_ascii=False, default=_bytes_json)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate ("\ud800" is valid OTLP/JSON): SQLite takes UTF-8 text alone,
        # and the request would fail, with every request kept in its transaction, for good.
        text = json.dumps(fields, ensure_ascii=True, default=_bytes_json)
    return text


def _bytes_json(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    raise TypeError(f"{type(value).__name__} is not JSON")


def _bytes_back(item: dict[str, Any]) -> Any:
    if len(item) == 1 and "__bytes__" in item:
        return base64.b64decode(item["__bytes__"])
    return item


def span_data(span: Span | EncodedSpan) -> str | bytes:
    """What the state keeps of a span: a span received as protobuf, its protobuf bytes (a
    BLOB); any other, `span_json`."""
    return span.data if isinstance(span, EncodedSpan) else span_json(span)


def span_of(trace_id: str, text: str | bytes) -> Span:
    """A span back from `span_data`."""
    if isinstance(text, bytes):
        return decode_span(text)
    span_id, parent, name, start, end, attributes, remote = json.loads(
        text, object_hook=_bytes_back
    )
    return Span(trace_id, span_id, parent, name, start, end, attributes, remote)


def counts_of(db: sqlite3.Connection) -> dict[str, int]:
    """`MonitorState.counts` read on a connection (in a transaction of the caller's)."""
    out = dict.fromkeys(COUNTERS, 0)
    pruned: dict[str, int] = {}
    for name, value in db.execute("SELECT * FROM counts"):
        if name.startswith(PRUNED):
            pruned[name[len(PRUNED) :]] = int(value)
        else:
            out[name] = int(value)
    for status, n in db.execute("SELECT status, count(*) FROM traces GROUP BY status"):
        out[status] = int(n)
    for reason, n in db.execute(
        "SELECT reason, count(*) FROM traces WHERE status=? GROUP BY reason", (SKIPPED,)
    ):
        out[f"skipped:{reason}"] = int(n)
    for reason, n in db.execute(
        "SELECT late, count(*) FROM traces WHERE late IS NOT NULL GROUP BY late"
    ):
        out["late"] = out.get("late", 0) + int(n)
        out[f"late:{reason}"] = int(n)
    for key, n in pruned.items():  # the traces forgotten, counted as they were
        out[key] = out.get(key, 0) + n
    return out


def judged_total(db: sqlite3.Connection) -> int:
    """How many rows were judged, those forgotten by `MonitorState.prune` too: the windows
    of N rows are numbered by it."""
    kept = int(db.execute("SELECT count(*) FROM traces WHERE status=?", (JUDGED,)).fetchone()[0])
    found = db.execute("SELECT value FROM counts WHERE name=?", (PRUNED + JUDGED,)).fetchone()
    return kept + (int(found[0]) if found else 0)


class MonitorState:
    """The SQLite file of a monitor's state.

    Args:
        folder: the --state folder (created when absent); the file is monitor.sqlite in it.
        create: create the folder and the file when absent; False: a reader's, which
            never makes a state of its own (a MonitorStateError when there is none).
    """

    def __init__(self, folder: str | os.PathLike[str], *, create: bool = True) -> None:
        self.folder = Path(folder)
        self.path = self.folder / STATE_FILE
        if not create and not self.path.is_file():
            raise MonitorStateError(
                f"there is no monitor state {self.path} (its folder was moved or deleted?): "
                "give --state the folder of a monitor that ran"
            )
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MonitorStateError(
                f"--state {self.folder} cannot be created ({exc.strerror or exc}): give a "
                "writable folder"
            ) from exc
        self._lock = threading.Lock()
        self._held: IO[str] | None = None
        try:
            self._db = self._connect()
        except sqlite3.Error as exc:
            raise MonitorStateError(
                f"the monitor state {self.path} cannot be used ({exc})"
                + (_remedy(exc) or f": {DAMAGED}")
            ) from exc

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            self.path, timeout=_BUSY_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if app_id != APPLICATION_ID and tables:
                raise MonitorStateError(
                    f"{self.path} is an SQLite file but not a judge monitor state: give "
                    "--state another folder"
                )
            if version > SCHEMA_VERSION:
                raise MonitorStateError(
                    f"{self.path} was written by a newer judge (monitor state format "
                    f"{version}; this judge reads formats up to {SCHEMA_VERSION}): upgrade "
                    "judge, or give --state another folder"
                )
            db.execute("PRAGMA journal_mode=WAL")
            if version < SCHEMA_VERSION:
                migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def hold(self) -> None:
        """Take the state for this monitor alone until `close`: a second monitor on it
        would judge the same pending rows again (and post the same alerts). Refused with
        the holder's process id while another monitor holds it; a monitor killed (kill -9
        too) lets go of it with its process."""
        if self._held is not None:
            return
        path = self.folder / LOCK_FILE
        try:
            self._held = hold_lock(path)
        except LockHeld as held:
            raise MonitorStateError(
                f"--state {self.folder}: another judge monitor (process {held.holder}) is "
                "using this state (two would judge the same rows twice); stop it first, or "
                "give this monitor a --state of its own"
            ) from None
        except OSError as exc:
            raise MonitorStateError(
                f"--state {self.folder}: {path} cannot be opened ({exc.strerror or exc}): "
                "give a writable folder"
            ) from exc

    def close(self) -> None:
        """Close the file (and let go of the state, when held)."""
        with self._lock:
            self._db.close()
        if self._held is not None:
            self._held.close()  # closing the file releases the lock
            self._held = None

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE): all of a batch, or none of it."""
        try:
            with immediate_transaction(self._db, self._lock) as db:
                yield db
        except sqlite3.Error as exc:
            raise MonitorStateError(
                f"the monitor state {self.path} cannot be written ({exc}){_remedy(exc)}"
            ) from exc

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query in the block sees the same state (WAL lets
        it read while another connection writes)."""
        with self._lock:
            try:
                self._db.execute("BEGIN")
                try:
                    yield self._db
                finally:
                    if self._db.in_transaction:
                        self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise MonitorStateError(
                    f"the monitor state {self.path} cannot be read ({exc}){_remedy(exc)}"
                ) from exc

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query."""
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise MonitorStateError(
                    f"the monitor state {self.path} cannot be read ({exc}){_remedy(exc)}"
                ) from exc

    # The settings a state was started with: a window that changed would mix two kinds.
    def setting(self, key: str, value: str) -> str:
        """The value `key` was first given in this state (recorded now when new)."""
        with self.writing() as db:
            found = db.execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
            if found is not None:
                return str(found[0])
            db.execute("INSERT INTO settings (key, value) VALUES (?, ?)", (key, value))
            return value

    def undelivered(self) -> list[tuple[int, str]]:
        """The outbox's pending alerts, oldest first: (the alert's number, its JSON)."""
        return [
            (int(number), str(text))
            for number, text in self.read(
                "SELECT o.alert, a.alert FROM outbox o JOIN alerts a ON a.id = o.alert"
                " WHERE o.status=? ORDER BY o.alert",
                (OUTBOX_PENDING,),
            )
        ]

    def delivery(self, number: int, at: float, failure: str | None, retry: bool) -> None:
        """Record a try at posting alert `number`: delivered (no `failure`), refused (a
        failure not worth a `retry`), or still pending."""
        status = (
            OUTBOX_DELIVERED if failure is None else OUTBOX_PENDING if retry else OUTBOX_REFUSED
        )
        with self.writing() as db:
            db.execute(
                "UPDATE outbox SET status=?, attempts=attempts+1, last_at=?, failure=?"
                " WHERE alert=?",
                (status, at, failure, number),
            )

    def counts(self) -> dict[str, int]:
        """The counters (spans, duplicate_spans, late_spans, rejected_spans, bad_lines,
        and judge_requests and judge_cache_hits once something was judged) and the traces
        by status, skips by reason as skipped:REASON; rows that came after their time
        window closed as late and late:REASON (judged too: counted among their status)."""
        with self.snapshot() as db:
            return counts_of(db)

    def ingest(
        self,
        batches: Iterable[Sequence[Span | EncodedSpan]],
        now: float,
        *,
        rejected: int = 0,
        bad_lines: int = 0,
        files: Iterable[tuple[str, str, int, int]] = (),
    ) -> None:
        """Keep the spans of some requests (one transaction): a span of a trace completed
        before is late (counted, not kept), one read again is a duplicate (kept once).

        Args:
            batches: the spans of each request.
            now: the time they were received (seconds, the monitor's clock).
            rejected: spans the requests held that were refused (malformed ids).
            bad_lines: lines of followed files that are no OTLP request.
            files: (identity, path, offset, size) of followed files read up to offset.
        """
        added: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        added["rejected_spans"] = rejected
        added["bad_lines"] = bad_lines
        # Grouped by trace: one look-up and one update of open_traces per trace and batch.
        by_trace: dict[str, list[Span | EncodedSpan]] = {}
        for batch in batches:
            for span in batch:
                by_trace.setdefault(span.trace_id, []).append(span)
                added["spans"] += 1
        with self.writing() as db:
            for trace_id, spans in by_trace.items():
                if db.execute("SELECT 1 FROM traces WHERE trace_id=?", (trace_id,)).fetchone():
                    added["late_spans"] += len(spans)
                    continue
                before = db.total_changes
                db.executemany(
                    "INSERT OR IGNORE INTO spans (trace_id, span_id, data) VALUES (?, ?, ?)",
                    [(trace_id, span.span_id, span_data(span)) for span in spans],
                )
                kept = db.total_changes - before
                added["duplicate_spans"] += len(spans) - kept
                if not kept:
                    continue
                root_at = now if any(is_local_root(span) for span in spans) else None
                # The earliest start time received: the time window the trace began in
                # waits for it (a span without a start time, 0, says nothing).
                start_ns = min((s.start_ns for s in spans if s.start_ns > 0), default=None)
                db.execute(
                    "INSERT INTO open_traces (trace_id, first_at, last_at, root_at, start_ns)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (trace_id) DO UPDATE SET"
                    " last_at=excluded.last_at, root_at=coalesce(root_at, excluded.root_at),"
                    " start_ns=coalesce(min(start_ns, excluded.start_ns), start_ns,"
                    " excluded.start_ns)",
                    (trace_id, now, now, root_at, start_ns),
                )
            for name, value in added.items():
                if value:
                    db.execute(
                        "INSERT INTO counts (name, value) VALUES (?, ?) ON CONFLICT (name)"
                        " DO UPDATE SET value=value+excluded.value",
                        (name, value),
                    )
            for identity, path, offset, size in files:
                db.execute(
                    "INSERT INTO files (identity, path, offset, size) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (identity) DO UPDATE SET path=excluded.path,"
                    " offset=excluded.offset, size=excluded.size",
                    # A name of no UTF-8 (surrogate escapes) is kept escaped: SQLite takes
                    # UTF-8 text alone, and the path is only said, never opened again.
                    (identity, path.encode("utf-8", "backslashreplace").decode(), offset, size),
                )

    def file_offset(self, identity: str) -> tuple[int, int] | None:
        """(offset read up to, size then) of a followed file, or None when never read."""
        found = self.read("SELECT offset, size FROM files WHERE identity=?", (identity,))
        return (int(found[0][0]), int(found[0][1])) if found else None

    def complete(
        self,
        now: float,
        linger: float,
        choose: Callable[[sqlite3.Connection, str, dict[str, Any]], Completed],
        *,
        everything: bool = False,
        mapping: dict[str, str] | None = None,
        limit: int = 1000,
        price: Callable[[list[tuple[str, dict[str, Any]]]], None] | None = None,
    ) -> int:
        """Complete the traces due (one transaction records them): those whose root came
        `linger` seconds ago or more, those without a root whose last span came `linger`
        seconds ago or more (`everything`: every open trace). Each becomes its row, as
        `judge traces extract` makes it, or a skip with its reason; `price`, when given, is
        called with the rows (trace id, row) before that transaction, for a chooser's slow
        work (the budget's pricing) to be done outside it; `choose` says what becomes of a
        row (sampled out, over budget, pending). Returns the number completed.
        """
        with self.writing() as db:
            # Receipt times ahead of the clock: the clock stepped back since (a VM restored,
            # NTP correcting). They count from now, or they would wait the step out.
            db.execute(
                "UPDATE open_traces SET first_at=min(first_at, ?1), last_at=min(last_at, ?1),"
                " root_at=min(root_at, ?1) WHERE last_at > ?1",
                (now,),
            )
            if everything:
                due = db.execute(
                    "SELECT trace_id FROM open_traces ORDER BY first_at, trace_id LIMIT ?",
                    (limit,),
                ).fetchall()
            else:
                due = db.execute(
                    "SELECT trace_id FROM open_traces WHERE coalesce(root_at, last_at) <= ?"
                    " ORDER BY first_at, trace_id LIMIT ?",
                    (now - linger, limit),
                ).fetchall()
            # Each statement once for the batch (executemany, one IN query): per trace,
            # four statements cost more than making its row.
            ids = [trace_id for (trace_id,) in due]
            stored: dict[str, list[Span]] = {trace_id: [] for trace_id in ids}
            marks = ",".join("?" * len(ids))
            for trace_id, text in db.execute(
                f"SELECT trace_id, data FROM spans WHERE trace_id IN ({marks}) ORDER BY rowid",
                ids,
            ):
                try:
                    stored[trace_id].append(span_of(trace_id, text))
                except Exception as exc:  # protobuf's DecodeError, JSON's ValueError...
                    # ... of a row damaged or edited: every restart would stop on it.
                    raise MonitorStateError(
                        f"the monitor state {self.path} holds a span of trace {trace_id} "
                        f"that cannot be read back ({type(exc).__name__}: {exc}): {DAMAGED}"
                    ) from exc
            first_at = dict(
                db.execute(
                    f"SELECT trace_id, first_at FROM open_traces WHERE trace_id IN ({marks})", ids
                ).fetchall()
            )
            rows: list[tuple[str, dict[str, Any]]] = []
            skips: list[tuple[str, float, str, str, str]] = []
            for trace_id in ids:
                # One trace's spans in one batch: assemble finds its root as extract does.
                trace = next(iter(assemble([stored.pop(trace_id)], linger=0)))
                result = trace_result(trace, mapping)
                if isinstance(result, Skip):
                    skips.append((trace_id, now, SKIPPED, result.reason, result.message))
                else:
                    rows.append((trace_id, result))
        if not ids:
            return 0
        if price is not None and rows:
            # Outside the transaction that records them: nothing else writes meanwhile (the
            # state's work runs in one thread, and one monitor holds a --state).
            price(rows)
        with self.writing() as db:
            # Still open (a second process on this state may have completed one since):
            # a trace id is completed once.
            still = {
                t
                for (t,) in db.execute(
                    f"SELECT trace_id FROM open_traces WHERE trace_id IN ({marks})", ids
                )
            }
            if len(still) < len(ids):
                ids = [t for t in ids if t in still]
                rows = [(t, row) for t, row in rows if t in still]
                skips = [skip for skip in skips if skip[0] in still]
            keys = [(trace_id,) for trace_id in ids]
            db.executemany("DELETE FROM spans WHERE trace_id=?", keys)
            db.executemany("DELETE FROM open_traces WHERE trace_id=?", keys)
            db.executemany(
                "INSERT INTO traces (trace_id, seen_at, status, reason, message)"
                " VALUES (?, ?, ?, ?, ?)",
                skips,
            )
            closed_at = dict(db.execute("SELECT number, closed_at FROM windows").fetchall())
            completed = []
            # In the order the traces started: the windows of N rows, and the budget's
            # steps, follow the traffic's time, not the order of ids.
            for trace_id, result in sorted(rows, key=lambda item: (item[1]["start_time"], item[0])):
                fate = choose(db, trace_id, result)
                late = None
                if fate.status == PENDING and fate.window in closed_at:
                    # Its time window closed before it completed: judged, and counted as
                    # late with its window named, never in another window's figures.
                    opened = first_at.get(trace_id)
                    late = (
                        LATE_OPEN
                        if opened is not None and opened < closed_at[fate.window]
                        else LATE_AFTER
                    )
                completed.append(
                    (
                        trace_id,
                        now,
                        result["start_time"],
                        fate.status,
                        # The row is kept to be judged, and beside its scores once judged.
                        json.dumps(result, ensure_ascii=False) if fate.status == PENDING else None,
                        fate.requests,
                        fate.window,
                        late,
                    )
                )
            db.executemany(
                "INSERT INTO traces (trace_id, seen_at, start_time, status, row, requests,"
                " window, late) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                completed,
            )
            return len(ids)

    def open_traces(self) -> int:
        """How many traces are still open (spans received, not yet complete)."""
        return int(self.read("SELECT count(*) FROM open_traces")[0][0])

    def pending(self, limit: int) -> list[dict[str, Any]]:
        """The rows waiting to be judged, oldest first."""
        return [
            json.loads(text)
            for (text,) in self.read(
                "SELECT row FROM traces WHERE status=? ORDER BY seq LIMIT ?", (PENDING, limit)
            )
        ]

    def judged_count(self) -> int:
        """How many rows were judged (those forgotten by `prune` too)."""
        with self.snapshot() as db:
            return judged_total(db)

    def prune(self, before: float) -> int:
        """Forget the traces completed (and judged) before `before`, seconds of the
        monitor's clock, that nothing reads any more, one transaction per few thousand;
        their numbers stay in the counts (`counts_of`). Kept whatever their age: rows
        pending, judged rows of a window not closed yet or of a baseline window (the check
        reads them at every window), and each alert's worst traces (the viewer shows their
        rows and evidence). Returns how many were forgotten."""
        total = 0
        while True:
            with self.writing() as db:
                found = db.execute(
                    "SELECT seq, status, reason, late FROM traces WHERE status != ?"
                    " AND seen_at < ? AND coalesce(judged_at, 0) < ?"
                    " AND (status != ? OR window IN (SELECT number FROM windows"
                    "  WHERE NOT coalesce(json_extract(summary, '$.baseline'), 0)))"
                    " AND trace_id NOT IN (SELECT json_extract(w.value, '$.trace_id')"
                    "  FROM alerts, json_each(alerts.alert, '$.worst') AS w"
                    "  WHERE json_extract(w.value, '$.trace_id') IS NOT NULL)"
                    " ORDER BY seq LIMIT ?",
                    (PENDING, before, before, JUDGED, _PRUNE_BATCH),
                ).fetchall()
                added: dict[str, int] = {}
                for _, status, reason, late in found:
                    keys = [status, FORGOTTEN]
                    if status == SKIPPED:
                        keys.append(f"{SKIPPED}:{reason}")
                    if late is not None:
                        keys += ["late", f"late:{late}"]
                    for key in keys:
                        name = key if key == FORGOTTEN else PRUNED + key
                        added[name] = added.get(name, 0) + 1
                db.executemany("DELETE FROM traces WHERE seq=?", [(seq,) for seq, *_ in found])
                db.executemany(
                    "INSERT INTO counts (name, value) VALUES (?, ?) ON CONFLICT (name)"
                    " DO UPDATE SET value=value+excluded.value",
                    sorted(added.items()),
                )
            total += len(found)
            if len(found) < _PRUNE_BATCH:
                return total
