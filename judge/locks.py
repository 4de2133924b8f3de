"""A folder held by one process at a time: an exclusive lock on a file in it, which names
the holder's process id and is let go of when the process ends, even by kill -9 (the
output folder of a run, the state of a monitor)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO

if sys.platform != "win32":  # on Windows a folder is not held (two processes may share it)
    import fcntl


class LockHeld(Exception):
    """Another process holds the lock; `holder` is its process id as the file names it
    ("unknown" when the file names none). Its callers say what that means for them."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def hold_lock(path: Path) -> IO[str] | None:
    """The open lock file at `path`, held exclusively and naming this process, until it is
    closed; None where there are no locks (Windows, some network and FUSE mounts).

    Raises:
        LockHeld: another process holds it.
        OSError: the file cannot be opened.
    """
    if sys.platform == "win32":  # pragma: no cover
        return None
    while True:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held while open)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # EWOULDBLOCK: another process holds it
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise LockHeld(holder) from None
        except OSError:  # no locks on this file system
            handle.close()
            return None
        try:  # still the lock file at `path`, not one its holder removed as it finished
            same = os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        handle.close()
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle
