"""The run store: one SQLite file holding a record of every finished run, oldest first.

A record says what was run (command, data and its hash, models, prompt versions, metrics,
the user's git commit), what came of it (each metric's mean and interval) and where its
outputs are (`out_dir`, an absolute path). The outputs themselves stay in their folder:
forgetting a run never deletes them, nor anything of the judgment cache.

Several processes may add runs at once (WAL, and a writer waits for the lock); the file's
format history is `judge.runs.migrations`.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

from judge.cache.sqlite import immediate_transaction
from judge.errors import JudgeError
from judge.runs.migrations import APPLICATION_ID, SCHEMA_VERSION, migrate

DEFAULT_RUNS = ".judge/runs.sqlite"  # beside the default cache, .judge/cache.sqlite
RUNS_ENV = "JUDGE_RUNS"
BASELINE = "baseline"  # the reference that names the pinned baseline
MIN_PREFIX = 4  # shortest id prefix taken as a reference
_BUSY_SECONDS = 30.0  # how long a writer waits for another process's write to finish
_COLUMNS = (
    "id, name, created, command, out_dir, data, data_sha256, model, embeddings, prompts,"
    " metrics, summary, rows, git, app, baseline, results_sha256"
)
_SEE_RUNS = "see the recorded runs with: judge runs list"


class RunStoreError(JudgeError):
    """The run store file cannot be used: damaged, not a run store, from a newer judge, or
    absent where one was needed."""


# How runs get into a store, for the messages that find none.
RECORDED_THERE = (
    "judge eval, judge merge and judge experiment record every finished run there "
    "(runs= or JUDGE_RUNS choose the store; --no-record skips it)"
)


class RunNotFound(JudgeError):
    """No run (or more than one) answers to a reference; the message says how to see them."""


def default_runs_path() -> Path:
    """The run store's path: $JUDGE_RUNS if set, else .judge/runs.sqlite (relative to the
    working directory)."""
    return Path(os.environ.get(RUNS_ENV) or DEFAULT_RUNS)


def open_existing(path: Path, context: str = "") -> RunStore:
    """The run store at `path`, which must exist: reading one never creates it. The error
    names the path and how runs are recorded, after `context` (what needed the store)."""
    if not path.is_file():
        not_a_folder(path)
        raise RunStoreError(f"{context}no run store at {path}: {RECORDED_THERE}")
    return RunStore(path)


def not_a_folder(path: Path) -> None:
    """Refuse a folder given as the run store, which is one file in it."""
    if path.is_dir():
        env = os.environ.get(RUNS_ENV)  # the variable the user set, else the keyword/flag
        given = RUNS_ENV if env and Path(env) == path else "runs"
        raise RunStoreError(
            f"{given}={str(path)!r} is a folder, not a run store file: give the store's file, "
            f"such as {path / 'runs.sqlite'} (the default is {DEFAULT_RUNS})"
        )


def new_run_id() -> str:
    """A new run id: 12 random lowercase hex characters."""
    return secrets.token_hex(6)


def utc_now() -> str:
    """The time now, ISO 8601 UTC to the second ("2026-12-04T22:51:07Z")."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class RunRecord:
    """One finished run, as the run store keeps it.

    Attributes:
        id: 12 lowercase hex characters, unique in the store.
        name: the name given with --name, or None.
        created: when it was recorded, ISO 8601 UTC to the second.
        command: "eval", "experiment", "merge", or "python" (`EvaluationResult.write`).
        out_dir: the absolute path of the run's output folder.
        data: where the rows came from (summary.json's config.source).
        data_sha256: the hash of the rows' inputs (config.data.sha256).
        model: the judge model, or None (retrieval metrics alone).
        embeddings: the embedding model, or None.
        prompts: prompt name -> version.
        metrics: the metrics computed.
        summary: metric -> {"mean", "ci_low", "ci_high", "scored"} (None for NaN).
        rows: the number of rows.
        git: {"commit", "dirty", "root"} of the repository the run was made in, or None.
        app: an experiment's app (config.app of summary.json), or None.
        tags: the run's tags, sorted.
        baseline: whether it is the pinned baseline.
        results_sha256: the sha256 of the results.jsonl the run wrote, or None (recorded by
            an older judge, or from a folder whose summary.json has none): a folder whose
            results.jsonl differs holds another run's rows now.
        damaged: what is wrong with the stored record when its fields cannot be read (the
            store's file edited or damaged), else None; the fields hold what could be read.
    """

    id: str
    name: str | None
    created: str
    command: str
    out_dir: str
    data: str
    data_sha256: str
    model: str | None
    embeddings: str | None
    prompts: dict[str, str]
    metrics: list[str]
    summary: dict[str, dict[str, Any]]
    rows: int
    git: dict[str, Any] | None = None
    app: dict[str, Any] | None = None
    tags: list[str] = field(default_factory=list)
    baseline: bool = False
    results_sha256: str | None = None
    damaged: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON-able data, field by field (`judge runs list --json`)."""
        return {
            "id": self.id,
            "name": self.name,
            "created": self.created,
            "command": self.command,
            "out_dir": self.out_dir,
            "data": self.data,
            "data_sha256": self.data_sha256,
            "model": self.model,
            "embeddings": self.embeddings,
            "prompts": dict(self.prompts),
            "metrics": list(self.metrics),
            "summary": {m: dict(s) for m, s in self.summary.items()},
            "rows": self.rows,
            "git": dict(self.git) if self.git is not None else None,
            "app": dict(self.app) if self.app is not None else None,
            "tags": list(self.tags),
            "baseline": self.baseline,
            "results_sha256": self.results_sha256,
            "damaged": self.damaged,
        }


def _is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused for a lock another connection holds (SQLITE_BUSY, _LOCKED)."""
    text = str(exc)
    return "database is locked" in text or "database table is locked" in text or "busy" in text


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


class RunStore:
    """The run store file: a record per finished run.

    Args:
        path: the SQLite file (`default_runs_path()` is where the CLI keeps it); created
            with its folders when absent, upgraded when written by an older judge, refused
            when written by a newer one.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()  # one connection, shared by the threads of a process
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        not_a_folder(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunStoreError(
                f"the run store {self.path} cannot be created ({exc.strerror or exc}): point "
                "--runs (or JUDGE_RUNS) at a writable place, or skip recording with --no-record"
            ) from exc
        deadline = time.monotonic() + _BUSY_SECONDS
        while True:
            try:
                return self._connect()
            except sqlite3.Error as exc:
                # Two processes creating or upgrading one file: when each holds a lock the
                # other needs, SQLite fails one at once instead of letting it wait. Again.
                if _is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(random.uniform(0.01, 0.1))
                    continue
                raise RunStoreError(
                    f"the run store {self.path} cannot be used ({exc}): if it is damaged, "
                    "move it away (the runs' output folders are not in it) and a new one is "
                    "started; or give --runs (or JUDGE_RUNS) another path"
                ) from exc

    def _connect(self) -> sqlite3.Connection:
        """The file opened, checked, in WAL mode and at the latest format."""
        db = sqlite3.connect(
            self.path, timeout=_BUSY_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            db.execute("BEGIN")  # the mark, the tables and the format seen at one moment
            try:
                app_id = db.execute("PRAGMA application_id").fetchone()[0]
                tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                version = int(db.execute("PRAGMA user_version").fetchone()[0])
            finally:
                db.execute("COMMIT")
            if app_id != APPLICATION_ID and tables:
                raise RunStoreError(
                    f"{self.path} is an SQLite file but not a judge run store: give --runs "
                    "(or JUDGE_RUNS) another path"
                )
            if version > SCHEMA_VERSION:
                raise RunStoreError(
                    f"{self.path} was written by a newer judge (run store format {version}; "
                    f"this judge reads formats up to {SCHEMA_VERSION}): upgrade judge, or "
                    "give --runs (or JUDGE_RUNS) another path"
                )
            # WAL: readers never wait for a writer, and writers of several processes queue.
            db.execute("PRAGMA journal_mode=WAL")
            if version < SCHEMA_VERSION:
                migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE): a second process waits
        for the lock instead of failing when its read turns into a write."""
        try:
            with immediate_transaction(self._db, self._lock) as db:
                yield db
        except sqlite3.Error as exc:
            raise RunStoreError(f"the run store {self.path} cannot be written ({exc})") from exc

    def _select(self, where: str = "", params: tuple[Any, ...] = ()) -> list[RunRecord]:
        with self._lock:
            try:
                found = self._db.execute(
                    f"SELECT {_COLUMNS} FROM runs {where} ORDER BY created, rowid", params
                ).fetchall()
                tags: dict[str, list[str]] = {}
                for run_id, tag in self._db.execute(
                    f"SELECT run_id, tag FROM tags WHERE run_id IN (SELECT id FROM runs {where})"
                    " ORDER BY run_id, tag",
                    params,
                ):
                    tags.setdefault(run_id, []).append(tag)
            except sqlite3.Error as exc:
                raise RunStoreError(f"the run store {self.path} cannot be read ({exc})") from exc
        return [_record(row, tags.get(row[0], [])) for row in found]

    def add(self, record: RunRecord) -> RunRecord:
        """Store a run's record (a baseline record takes the flag from any other run);
        returns it as stored."""
        with self._writing() as db:
            if record.baseline:
                db.execute("UPDATE runs SET baseline = 0 WHERE baseline = 1")
            try:
                db.execute(
                    f"INSERT INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * 17)})",
                    (
                        record.id,
                        record.name,
                        record.created,
                        record.command,
                        record.out_dir,
                        record.data,
                        record.data_sha256,
                        record.model,
                        record.embeddings,
                        _json(record.prompts),
                        _json(record.metrics),
                        _json(record.summary),
                        record.rows,
                        _json(record.git),
                        _json(record.app),
                        int(record.baseline),
                        record.results_sha256,
                    ),
                )
            except sqlite3.IntegrityError:
                raise RunStoreError(
                    f"a run with id {record.id} is in {self.path} already; give the record "
                    "a new id (judge.runs.store.new_run_id())"
                ) from None
            db.executemany(
                "INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)",
                [(record.id, tag) for tag in record.tags],
            )
        return replace(record, tags=sorted(set(record.tags)))

    def runs(self) -> list[RunRecord]:
        """Every run's record, oldest first."""
        return self._select()

    def get(self, ref: str, *, damaged: bool = False) -> RunRecord:
        """The run a reference names: its id, a unique prefix of its id (4 characters or
        more), its name (the latest run of that name), or "baseline": the pinned run, else
        (none pinned) the run named "baseline", so that one can be pinned by its name.
        A damaged record is refused (`check`) unless damaged=True."""
        found = self._find(ref)
        return found if damaged else self.check(found)

    def check(self, record: RunRecord) -> RunRecord:
        """The record, or RunStoreError when it is damaged: naming the store, the run and
        what is wrong, and how to forget it."""
        if record.damaged:
            raise RunStoreError(
                f"run {record.id} in the run store {self.path} is damaged ({record.damaged}): "
                f"its record cannot be used; forget it with judge runs rm {record.id} "
                "(its output folder stays)"
            )
        return record

    def _find(self, ref: str) -> RunRecord:
        """The run a reference names, damaged or not (see `get`)."""
        if ref == BASELINE:
            found = self.baseline() or next(iter(self._select("WHERE name = ?", (ref,))[-1:]), None)
            if found is None:
                raise RunNotFound(
                    f"no baseline is pinned in {self.path}: pin one with "
                    f"judge runs baseline REF; {_SEE_RUNS}"
                )
            return found
        by_id = self._select("WHERE id = ?", (ref,))
        if by_id:
            return by_id[0]
        by_name = self._select("WHERE name = ?", (ref,))
        if by_name:
            return by_name[-1]
        if len(ref) >= MIN_PREFIX:
            matches = self._select("WHERE substr(id, 1, ?) = ?", (len(ref), ref))
            if len(matches) == 1:
                return matches[0]
            if matches:
                raise RunNotFound(
                    f"{ref!r} is the start of {len(matches)} run ids "
                    f"({', '.join(r.id for r in matches)}): give more of the id"
                )
        short = (
            f" (an id prefix needs {MIN_PREFIX} characters or more)"
            if len(ref) < MIN_PREFIX
            else ""
        )
        raise RunNotFound(
            f"no run {ref!r} in {self.path}{short}: give a run's id, the start of one, its "
            f"name or 'baseline'; {_SEE_RUNS}"
        )

    def tag(self, ref: str, tags: list[str], *, remove: bool = False) -> RunRecord:
        """Add tags to a run (or remove them with remove=True); returns the run as now."""
        run = self.get(ref)
        blank = [t for t in tags if not t.strip()]
        if blank:
            raise JudgeError("a tag cannot be empty or only spaces")
        with self._writing() as db:
            if remove:
                db.executemany(
                    "DELETE FROM tags WHERE run_id = ? AND tag = ?", [(run.id, t) for t in tags]
                )
            else:
                db.executemany(
                    "INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)",
                    [(run.id, t) for t in tags],
                )
        return self.get(run.id)

    def remove(self, ref: str) -> RunRecord:
        """Forget a run; its output folder and the judgment cache are left as they are.
        A damaged record is forgotten all the same. Returns the record forgotten."""
        run = self.get(ref, damaged=True)
        with self._writing() as db:
            db.execute("DELETE FROM tags WHERE run_id = ?", (run.id,))
            db.execute("DELETE FROM runs WHERE id = ?", (run.id,))
        return run

    def set_baseline(self, ref: str | None) -> RunRecord | None:
        """Pin a run as the baseline (the one before is unpinned), or with None unpin it;
        returns the baseline now."""
        run = self.get(ref) if ref is not None else None
        with self._writing() as db:
            db.execute("UPDATE runs SET baseline = 0 WHERE baseline = 1")
            if run is not None:
                db.execute("UPDATE runs SET baseline = 1 WHERE id = ?", (run.id,))
        return self.baseline()

    def baseline(self) -> RunRecord | None:
        """The pinned baseline, or None."""
        found = self._select("WHERE baseline = 1")
        return found[0] if found else None

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _record(row: tuple[Any, ...], tags: list[str]) -> RunRecord:
    """A stored row as a record; a row whose fields cannot be read (the file edited or
    damaged by hand) is a record marked `damaged`, saying what is wrong, with what could be
    read, so that it can be listed and forgotten."""
    problems: list[str] = []

    def text(at: int, column: str, *, optional: bool = False) -> Any:
        value = row[at]
        if isinstance(value, str) or (optional and value is None):
            return value
        problems.append(f"{column} is not text")
        return None if optional else ("" if value is None else str(value))

    def loaded(at: int, column: str, kind: type, default: Any, check: Any = None) -> Any:
        if row[at] is None:
            return default
        try:
            value = json.loads(row[at])
        except (TypeError, ValueError, RecursionError):
            problems.append(f"{column} is not JSON")
            return default
        if value is None:
            return default
        wrong = check(value) if check is not None and isinstance(value, kind) else None
        if not isinstance(value, kind) or wrong:
            problems.append(wrong or f"{column} is not a JSON {kind.__name__}")
            return default
        return value

    def strings(column: str) -> Any:
        def check(value: Any) -> str | None:
            items = value.items() if isinstance(value, dict) else [("", v) for v in value]
            if all(isinstance(k, str) and isinstance(v, str) for k, v in items):
                return None
            return f"{column} holds a value that is not text"

        return check

    def summary_check(value: dict[str, Any]) -> str | None:
        for metric, numbers in value.items():
            if not isinstance(numbers, dict):
                return f"summary of {metric} is not a JSON object"
            for key in ("mean", "ci_low", "ci_high", "scored"):
                number = numbers.get(key)
                if number is not None and (
                    isinstance(number, bool) or not isinstance(number, (int, float))
                ):
                    return f"summary {key} of {metric} is not a number: {number!r}"
        return None

    rows = row[12]
    if isinstance(rows, bool) or not isinstance(rows, int):
        problems.append(f"rows is not a whole number: {rows!r}")
        rows = 0
    results_sha256 = text(16, "results_sha256", optional=True)
    made = RunRecord(
        id=str(row[0]),
        name=text(1, "name", optional=True),
        created=text(2, "created"),
        command=text(3, "command"),
        out_dir=text(4, "out_dir"),
        data=text(5, "data"),
        data_sha256=text(6, "data_sha256"),
        model=text(7, "model", optional=True),
        embeddings=text(8, "embeddings", optional=True),
        prompts=loaded(9, "prompts", dict, {}, strings("prompts")),
        metrics=loaded(10, "metrics", list, [], strings("metrics")),
        summary=loaded(11, "summary", dict, {}, summary_check),
        rows=rows,
        git=loaded(13, "git", dict, None),
        app=loaded(14, "app", dict, None),
        tags=tags,
        baseline=bool(row[15]),
        results_sha256=results_sha256,
    )
    return replace(made, damaged="; ".join(problems)) if problems else made
