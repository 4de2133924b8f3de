"""A run's output folder: one run at a time, outputs published whole, no debris left.

`judge eval`, `judge merge` and `judge demo` write results.jsonl, report.html (shard.json)
and summary.json. Each is first written under a temporary name in the folder, then all
are renamed into place, summary.json last. A run killed while writing leaves the previous
run's files as they were; one killed between two renames leaves a results.jsonl that its
summary.json's `results_sha256` does not match, which every reader refuses. Temporary
files carry their process id and a token of the process (`.judge-out-PID-TOKEN-NAME`, the
row spill files `.judge-rows-PID-TOKEN-*.jsonl`): the next run over the folder removes
those of processes that are gone. A lock (`.judge.lock`, held while the run lasts) stops
a second run on the same folder; the cache stays shareable.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import os
import re
import secrets
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from judge.errors import OutputError
from judge.locks import LockHeld, hold_lock
from judge.run.folder import OUTPUT_NAMES, check_results_hash, file_sha256

if sys.platform != "win32":  # on Windows the shared temporary folder is not swept
    import fcntl

__all__ = [
    "OUTPUT_NAMES",
    "OutputFolder",
    "check_results_hash",
    "file_sha256",
    "remove_debris",
    "remove_leftovers",
    "sweep_shared_folder",
    "temporary_prefix",
    "write_failure",
]

LOCK_NAME = ".judge.lock"
OUTPUT_PREFIX = ".judge-out-"
ROWS_PREFIX = ".judge-rows-"  # judge.run.checkpoint's spill files
# .judge-KIND-PID-TOKEN-...: the token tells this process's files from those of an earlier
# process that had the same id (in a container judge may be process 1 on every run).
_DEBRIS = re.compile(r"^\.judge-(?:out|rows)-(\d+)-(?:([0-9a-f]{8})-)?")
_TOKEN = secrets.token_hex(4)
LIVE_PREFIX = ".judge-live-"
_MARK = re.compile(r"^\.judge-live-(\d+)-([0-9a-f]{8})$")


def _new_token() -> None:
    """A forked child's own token. With its parent's, a child given the id of an earlier
    child that was killed would take that child's files and live mark for its own: its mark
    replaced the ended one, and the files were left for good once it exited."""
    global _TOKEN  # (this module's process state: the token is per process by design)
    _TOKEN = secrets.token_hex(4)


if hasattr(os, "register_at_fork"):  # (not on Windows, which has no fork)
    os.register_at_fork(after_in_child=_new_token)


def temporary_prefix(kind: str) -> str:
    """The prefix of this process's temporary files of a kind ("out", "rows")."""
    return f".judge-{kind}-{os.getpid()}-{_TOKEN}-"


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (signal 0 checks without sending)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # none, or an id no process can have
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_debris(folder: Path) -> list[Path]:
    """Remove the temporary files that runs killed in this folder left behind (their
    process is gone; only this user's regular files); returns what was removed."""
    removed = []
    marks: dict[tuple[int, str], bool] = {}
    for name in _judge_names(folder):
        match = _DEBRIS.match(name)
        if match is None:
            continue
        path = folder / name
        pid, token = int(match.group(1)), match.group(2)
        if pid == os.getpid() and token == _TOKEN:
            continue  # ours: a result of this process may still read it
        if pid != os.getpid() and process_alive(pid):
            continue  # another live process's (a Python caller without the lock)
        if not _own_file(path):
            continue  # another user's (root's run in a shared /tmp), or not a file
        if token is not None and _marked_alive(folder, pid, token, marks):
            # a live process of another container (its id names none here) when the
            # folder is the shared temporary one: see sweep_shared_folder
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed


def _judge_names(folder: Path) -> list[str]:
    """The names in `folder` that start as judge's files do (none if it cannot be listed):
    a shared temporary folder may hold many other files, passed over by their name alone."""
    try:
        with os.scandir(folder) as entries:
            return [entry.name for entry in entries if entry.name.startswith(".judge-")]
    except OSError:
        return []


def _marked_alive(folder: Path, pid: int, token: str, seen: dict[tuple[int, str], bool]) -> bool:
    """Whether process `pid` of this `token` holds its live mark in `folder`."""
    if sys.platform == "win32":
        return False
    if (pid, token) not in seen:
        seen[pid, token] = _mark_held(folder / f"{LIVE_PREFIX}{pid}-{token}")
    return seen[pid, token]


def remove_leftovers(folder: Path | None) -> None:
    """Before a run keeps files in `folder` (None: the system's temporary folder), remove
    what ended runs left there: by `sweep_shared_folder` in the system's temporary folder
    (which also marks this process alive there, so its own files are not taken for
    leftovers), by `remove_debris` in a folder of the run's own (a checkpoint's)."""
    shared = Path(tempfile.gettempdir())
    if folder is None or _same_folder(folder, shared):
        sweep_shared_folder(shared)
    if folder is not None:
        remove_debris(folder)


def _same_folder(folder: Path, other: Path) -> bool:
    """Whether two paths name one folder (either absent: no)."""
    try:
        return os.path.samefile(folder, other)
    except OSError:
        return False


# This process's live marks, by folder and process id (see `sweep_shared_folder`): held, by
# design, for as long as the process lives, as its process id and token are.
_MARKS: dict[tuple[str, int], int | None] = {}


def sweep_shared_folder(folder: Path) -> list[Path]:
    """In a temporary folder other processes share (the system's, perhaps with other
    containers, where a process id names another process or none): hold this process's
    live mark there, and remove the files of processes whose mark is no longer held (they
    ended, even by kill -9, with their results' files left). Once per process and folder;
    returns what was removed.

    A mark is a lock file, `.judge-live-PID-TOKEN`, held while its process lives and
    removed when it exits; files whose process has no mark (an older judge, a system
    without file locks) are left, as nothing here can tell whether it is alive, and so are
    those of a mark made under another kernel (its boot id, written in the mark: another
    machine's, on a folder shared over NFS, whose locks are not seen here). Only this
    user's regular files are touched, never through a symbolic link (anyone may write in
    /tmp).
    """
    # by process too: a forked child names its files with its own id, so it needs its own
    # mark (its parent's, inherited, would leave them unswept once the child is killed)
    key = (str(folder), os.getpid())
    if key in _MARKS or sys.platform == "win32":
        return []
    _MARKS[key] = _hold_mark(folder / f"{LIVE_PREFIX}{os.getpid()}-{_TOKEN}")
    owners: dict[tuple[str, str], list[str]] = {}
    marked: set[tuple[str, str]] = set()
    for name in _judge_names(folder):
        match = _DEBRIS.match(name) or _MARK.match(name)
        if match is not None and match.group(2) is not None:
            owner = (match.group(1), match.group(2))
            owners.setdefault(owner, []).append(name)
            if name.startswith(LIVE_PREFIX):
                marked.add(owner)
    removed = []
    for (pid, token), names in owners.items():
        # Only the marks listed are opened: files with none are left anyway, and a folder
        # anyone can fill with such names cost every run a look for each (1.2 s for
        # 100,000 of them).
        if (pid, token) == (str(os.getpid()), _TOKEN) or (pid, token) not in marked:
            continue
        mark = folder / f"{LIVE_PREFIX}{pid}-{token}"
        held = _ended_mark(mark)
        if held is None:
            continue  # alive, or nothing tells
        try:
            for path in (folder / name for name in names):
                if path != mark and _own_file(path):
                    with contextlib.suppress(OSError):
                        path.unlink()
                        removed.append(path)
            with contextlib.suppress(OSError):
                mark.unlink()
        finally:
            os.close(held)
    return removed


def _hold_mark(path: Path) -> int | None:
    """This process's live mark at `path` (never opened through a link), locked until the
    process exits, then removed; None where it cannot be held."""
    # Made and locked under a name no sweep reads as a mark, then renamed into place: a
    # mark seen unlocked, even for a moment, would be taken for an ended process's, and
    # the files this process already has in the folder (a checkpoint's) removed.
    pending = path.with_name(f"{temporary_prefix('rows')}live")
    try:
        held = os.open(pending, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(held, f"{_boot_id()}\n".encode())
        os.rename(pending, path)
    except OSError:  # no locks on this file system: no mark
        os.close(held)
        with contextlib.suppress(OSError):
            pending.unlink()
        return None
    atexit.register(_drop_mark, path, held, os.getpid())
    return held


def _open_mark(path: Path) -> int | None:
    """`path` opened to read, if it is this user's regular file (never through a link,
    nor a FIFO's open left waiting for a writer); None otherwise."""
    if not _own_file(path):
        return None
    try:
        held = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # gone, or a link
        return None
    with contextlib.suppress(OSError):
        found = os.fstat(held)  # what was opened, should it have been replaced since
        if stat.S_ISREG(found.st_mode) and found.st_uid == os.getuid():
            return held
    os.close(held)
    return None


def _ended_mark(path: Path) -> int | None:
    """The mark of an ended process, opened and locked by this one (an open descriptor);
    None when its process lives, or when it is not this user's regular file."""
    held = _open_mark(path)
    if held is None:
        return None
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _made_here(held):
            return held
    except OSError:  # held by its living process (or no locks here)
        pass
    os.close(held)
    return None


def _mark_held(path: Path) -> bool:
    """Whether `path` is a live process's mark (this user's file, locked)."""
    held = _open_mark(path)
    if held is None:
        return False
    try:
        fcntl.flock(held, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return not _made_here(held)  # another kernel's: its lock is not seen here
    except BlockingIOError:
        return True
    except OSError:  # no locks here: nothing tells
        return False
    finally:
        os.close(held)


def _made_here(mark: int) -> bool:
    """Whether an open mark was made under this kernel: a folder shared between machines
    (NFS) holds marks whose locks, another machine's, are not seen here."""
    try:
        return os.pread(mark, 64, 0).decode("ascii", "replace").strip() == _boot_id()
    except OSError:
        return False


@functools.cache
def _boot_id() -> str:
    """This kernel's boot id (Linux; '' elsewhere), written in every mark."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            return boot.read().strip()
    except (OSError, ValueError):
        return ""


def _own_file(path: Path) -> bool:
    """Whether `path` is this user's regular file (not followed through a link)."""
    try:
        found = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_uid == os.getuid()


def _drop_mark(path: Path, held: int, owner: int) -> None:
    if os.getpid() != owner:  # a forked child exiting: the mark is its parent's
        return
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(held)


def write_failure(path: Path, exc: OSError) -> OutputError:
    """An OSError while writing an output as one line saying what to do."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        advice = "free disk space, then rerun (finished rows are kept and resume)"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        advice = "give an output folder on a writable disk"
    else:
        advice = "check the disk and the folder, then rerun"
    return OutputError(f"{path}: cannot be written ({reason}); {advice}")


class OutputFolder:
    """The folder of one run's outputs, locked while open.

    Args:
        path: the folder; created if absent.
        inputs: the files the run reads: none may be replaced by an output (refused when
            the folder is opened, as an `OutputError` naming the file).
    """

    def __init__(self, path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]] = ()):
        self.path = Path(path)
        self.inputs = [Path(p) for p in inputs]
        self._lock: IO[str] | None = None
        self._pending: dict[str, Path] = {}
        self._created = False

    def __enter__(self) -> OutputFolder:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Create the folder, take its lock and remove what killed runs left in it."""
        if self.path.exists() and not self.path.is_dir():
            raise OutputError(
                f"{self.path} is a file, not a folder: give the outputs a folder of their own"
            )
        for name in OUTPUT_NAMES:
            self._check_inputs(name)
        self._created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_failure(self.path, exc) from None
        self._take_lock()
        remove_debris(self.path)

    def _take_lock(self) -> None:
        try:
            self._lock = hold_lock(self.path / LOCK_NAME)
        except LockHeld as held:
            raise OutputError(
                f"{self.path}: another judge run (process {held.holder}) is writing to this "
                "folder; wait for it to finish, or give this run another output folder"
            ) from None
        except OSError as exc:
            raise write_failure(self.path / LOCK_NAME, exc) from None

    def close(self) -> None:
        """Remove the temporary files not published and release the lock."""
        for path in self._pending.values():
            path.unlink(missing_ok=True)
        self._pending.clear()
        if self._lock is not None:
            if self._created:  # a run that stopped before writing anything leaves nothing
                with contextlib.suppress(OSError):  # removed while still locked: see _take_lock
                    if [p.name for p in self.path.iterdir()] == [LOCK_NAME]:
                        (self.path / LOCK_NAME).unlink()
                        self.path.rmdir()
            self._lock.close()  # closing the file releases the lock
            self._lock = None

    def _check_inputs(self, name: str) -> None:
        """Refuse an output `name` that would replace a file the run reads (the same file,
        by any path or link to it)."""
        target = self.path / name
        for source in self.inputs:
            try:
                same = os.path.samefile(source, target)
            except OSError:  # either is absent (or unreadable): not the same file
                continue
            if same:
                raise OutputError(
                    f"{source}: this run reads that file and would replace it with its "
                    f"{name}; give the outputs another folder, or move the file out of "
                    f"{self.path}"
                )

    def temporary(self, name: str) -> Path:
        """Where to write the output `name` before it is published."""
        self._check_inputs(name)
        path = self.path / f"{temporary_prefix('out')}{name}"
        self._pending[name] = path
        return path

    @contextlib.contextmanager
    def writing(self, name: str) -> Iterator[Path]:
        """The temporary path of output `name`; an OSError while writing it becomes an
        OutputError (a full or read-only disk), and the partial file is removed."""
        path = self.temporary(name)
        try:
            yield path
        except OSError as exc:
            path.unlink(missing_ok=True)
            raise write_failure(self.path / name, exc) from None

    def publish(self, names: Sequence[str]) -> None:
        """Move the written outputs into place, in this order (give summary.json last):
        each is flushed to disk first, so a crash cannot publish a file cut short."""
        for name in names:
            try:
                _fsync(self._pending[name])
            except OSError as exc:  # a full disk can surface only now
                raise write_failure(self.path / name, exc) from None
        for name in names:
            os.replace(self._pending.pop(name), self.path / name)
        with contextlib.suppress(OSError):
            _fsync(self.path)  # the renames themselves


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
