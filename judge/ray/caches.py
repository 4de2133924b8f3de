"""One cache file per Ray actor, in a directory the actors share.

Each actor writes its own SQLite file, `actor-K.sqlite` for the lowest K no live actor
holds (an advisory lock on `actor-K.lock`, released by the OS when the actor's process
ends), so two actors never write one file and a rerun reuses the same few files instead of
adding new ones. Lookups fall back to the other cache files in the directory (and to any
file given as `also_read`), so a rerun is answered from the judgments of whichever actor
made them. The files are ordinary judge caches: `judge cache merge` joins them into one.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from judge.cache.store import Cache, CacheMode

PREFIX = "actor-"


@dataclass(frozen=True)
class ActorCaches:
    """Where and how the actors keep their caches.

    Args:
        directory: the directory of the actors' cache files; None for no cache.
        mode: the mode of each actor's own file (see `judge.cache.store.Cache`).
        also_read: other cache files looked up as well (e.g. a plain run's).
    """

    directory: str | None = None
    mode: CacheMode = "read-write"
    also_read: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        directory: str | os.PathLike[str] | None,
        mode: CacheMode = "read-write",
        also_read: Sequence[str | os.PathLike[str]] = (),
    ) -> ActorCaches:
        """Settings from paths of any kind (they travel to the actors as text)."""
        where = None if directory is None else os.fspath(directory)
        return cls(where, mode, tuple(os.fspath(p) for p in also_read))

    def open(self) -> ActorCache | None:
        """This actor's cache, or None when there is no cache."""
        if self.directory is None:
            return None
        return actor_cache(self.directory, self.mode, self.also_read)


class ActorCache(Cache):
    """An actor's own cache file, reading its siblings' files as fallbacks, and the lock
    that reserves the file for the actor while it lives.

    Args:
        path: the actor's own file (written to).
        siblings: other cache files, consulted in order when the own file has no entry
            (read-only `fallbacks` of `judge.cache.store.Cache`).
        mode: the cache mode of the own file (see `judge.cache.store.Cache`).
        lock: the open lock file that reserves `path` for this actor (kept open).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        siblings: Sequence[Path],
        mode: CacheMode = "read-write",
        lock: TextIO | None = None,
    ):
        super().__init__(path, mode, fallbacks=siblings)
        self._lock_file = lock  # held open: closing it would free the slot

    def close(self) -> None:
        """Close the files and free the slot."""
        super().close()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


def caches_beside(cache: Cache | str | os.PathLike[str] | None, mode: CacheMode) -> ActorCaches:
    """The actors' caches of a run whose cache is `cache` (a `Cache` or its path; None: no
    cache): their files in the directory beside it (cache.sqlite -> cache.ray/), each
    reading the cache itself too, as `judge eval --ray` keeps them."""
    if cache is None:
        return ActorCaches()
    path = cache.path if isinstance(cache, Cache) else Path(cache)
    return ActorCaches.of(path.with_name(path.stem + ".ray"), mode, [path])


def claim_slot(directory: Path) -> tuple[Path, TextIO]:
    """The lowest `actor-K.sqlite` no live process holds, and the open lock that holds it."""
    directory.mkdir(parents=True, exist_ok=True)
    slot = 0
    while True:
        lock = open(directory / f"{PREFIX}{slot}.lock", "w")  # noqa: SIM115 (held for life)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another actor holds this slot
            lock.close()
            slot += 1
            continue
        return directory / f"{PREFIX}{slot}.sqlite", lock


def actor_cache(
    directory: str | os.PathLike[str],
    mode: CacheMode = "read-write",
    also_read: Sequence[str | os.PathLike[str]] = (),
) -> ActorCache:
    """This actor's cache in the shared directory, reading the other caches there too.

    Args:
        directory: where the actors' cache files live (created if absent).
        mode: the cache mode of the actor's own file ("replay": a missing judgment is an
            error, "read-write": look up, else call and store).
        also_read: other cache files to look judgments up in (e.g. a plain run's cache);
            those that do not exist are skipped.
    """
    own, lock = claim_slot(Path(directory))
    others = sorted(p for p in Path(directory).glob("*.sqlite") if p != own)
    others += [Path(p) for p in also_read if Path(p).is_file() and Path(p) not in others]
    return ActorCache(own, others, mode, lock)
