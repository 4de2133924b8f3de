"""Cache writes of one session gathered into one SQLite transaction per event-loop turn.

A transaction costs far more than the row it stores (BEGIN IMMEDIATE and COMMIT take the
file's write lock and append to the WAL): written one by one, storing judgments was the
largest cost of a cache miss after the HTTP request, about 75 µs of CPU and 280 µs of
blocked event loop each, against about 30 µs and 90 µs in batches of 32
(`bench/speed/client_throughput.py`, a loaded 2-core machine).

What is guaranteed: a judgment is committed in the event loop's next turn after its reply
arrived (every judgment that arrived in one turn goes in one transaction), and before
the call returns when no other request of the session is in flight, so a caller awaiting
one request at a time, and the last request of a run, find it written. Until then it is
answered from memory, so an identical request never goes out twice. A crash (kill -9)
loses at most the judgments of the current turn: replies of requests that were in flight,
which a rerun asks for again. A write that fails (disk full) is a `CacheStoreError`; one
that fails in a later turn is raised by the next lookup, store or flush of the session, and
by every one after it: every later judgment would be paid for and lost the same way, so
the run must stop (`judge.evaluate` does, as for `LLMConfigError`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from judge.cache.entries import CacheEntry
from judge.cache.store import Cache
from judge.errors import CacheStoreError


class WriteBatch:
    """Judgments waiting to be stored in a cache, flushed once per event-loop turn.

    Args:
        cache: where they are stored (nothing is kept unless its mode stores).
    """

    def __init__(self, cache: Cache):
        self.cache = cache
        self._pending: dict[str, CacheEntry] = {}
        self._scheduled = False
        self._failed: CacheStoreError | None = None

    def put(self, entry: CacheEntry, *, alone: bool) -> None:
        """Store entry in this turn's transaction; at once when alone (nothing else in flight)."""
        self._raise_failure()
        if not self.cache.stores:
            return
        self._pending[entry.key] = entry
        if alone:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_later)

    def get_response(self, key: str) -> Any | None:
        """The response under key, waiting or stored (None unless the cache's mode reads)."""
        self._raise_failure()
        entry = self._pending.get(key)
        if entry is not None and self.cache.reads:
            self.cache.hits += 1
            return entry.response
        return self.cache.get_response(key)

    def flush(self) -> None:
        """Write what is waiting, in one transaction (CacheStoreError if it fails)."""
        self._raise_failure()
        self._scheduled = False
        if not self._pending:
            return
        entries = list(self._pending.values())
        self._pending.clear()
        self.cache.put_many(entries)

    def _flush_later(self) -> None:
        """The flush of a loop turn: its error waits for the next put, as no call awaits it."""
        try:
            self.flush()
        except CacheStoreError as exc:
            self._failed = self._failed or CacheStoreError(
                f"judgments received earlier were not stored: {exc} (they will be asked "
                "for again on a rerun)"
            )
            self._failed.__cause__ = exc

    def _raise_failure(self) -> None:
        """A failed earlier write, raised again by every call (it is never forgotten)."""
        if self._failed is not None:
            raise self._failed
