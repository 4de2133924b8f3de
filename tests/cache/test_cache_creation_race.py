"""Several processes opening one new cache file at the same moment (pytest-xdist workers
on one `--judge-cache`, `--processes`): each waits for the others, none fails with
"database is locked"."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from judge.cache.store import Cache, CacheEntry


def test_a_cache_opens_while_another_connection_is_creating_it(tmp_path: Path) -> None:
    # Another process creating the file's tables holds a write transaction; switching the
    # file to WAL then is refused at once by SQLite (no busy wait), which two xdist
    # workers starting on a new cache hit about one time in six.
    path = tmp_path / "cache.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE being_created (x)")
    threading.Timer(0.5, lambda: (other.execute("ROLLBACK"), other.close())).start()
    started = time.monotonic()
    cache = Cache(path)
    try:
        assert time.monotonic() - started >= 0.4  # it waited for the other's transaction
        cache.put(CacheEntry("k" * 64, "chat", {"request": 1}, {"choices": []}, "m"))
        assert cache.get_response("k" * 64) is not None
    finally:
        cache.close()
