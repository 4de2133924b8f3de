"""`judge cache merge`: the caches of several machines or shards as one file.

Each input is opened with `Cache`, so an older format is migrated first (in place, as any
judge command opening it would) and its keys are those of the current format. A key held
by two inputs must hold the same response (what a cache hit returns); the first input's
entry is kept, with its `created`, `usage` and `mode`, which may differ between two
recordings of one request. A different response under one key is an error naming the key:
the inputs were recorded from different models or from a server that is not
deterministic, and merging them would make replays depend on the order of the inputs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from judge.cache.entries import CacheEntry
from judge.cache.store import Cache
from judge.errors import CacheError

BATCH = 5_000  # entries written per transaction


def _conflict(key: str, entry: CacheEntry, source: Path, earlier: list[Path]) -> CacheError:
    what = entry.prompt or entry.kind
    return CacheError(
        f"cache key {key} ({what}, model {entry.model}) holds a different response in "
        f"{source} than in {' or '.join(map(str, earlier))}: they were recorded from "
        "different models or a non-deterministic server; drop one of the two caches, or "
        "delete the entry from one (judge cache export, edit, import)"
    )


def merge_caches(
    sources: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str]
) -> tuple[int, int]:
    """Merge caches into a new file; returns (entries written, duplicates skipped).

    Args:
        sources: the cache files, in order of preference (their entries are all kept).
        output: the merged cache; must not exist. Written to a temporary file first, so a
            conflict leaves nothing behind.

    Raises:
        judge.errors.CacheError: an input is missing or not a judge cache, the output
            exists, or one key holds different responses in two inputs.
    """
    out_path = Path(output)
    paths = [Path(s) for s in sources]
    for path in paths:
        if not path.is_file():
            raise CacheError(f"{path}: no such cache file")
    if out_path.exists():
        raise CacheError(
            f"{out_path} exists; give a new path for the merged cache (to add to it, "
            "list it among the inputs)"
        )
    temporary = out_path.with_name(f".{out_path.name}.merging")
    _remove(temporary)
    written = skipped = 0
    try:
        with Cache(temporary) as merged:
            for number, path in enumerate(paths):
                with Cache(path) as source:
                    batch: list[CacheEntry] = []
                    for entry in source.entries():
                        held = merged.get(entry.key)
                        if held is None:
                            batch.append(entry)
                        elif held.response != entry.response or held.kind != entry.kind:
                            raise _conflict(entry.key, entry, path, paths[:number])
                        else:
                            skipped += 1
                        if len(batch) >= BATCH:
                            merged.put_many(batch)
                            written += len(batch)
                            batch = []
                    merged.put_many(batch)
                    written += len(batch)
        os.replace(temporary, out_path)
    finally:
        _remove(temporary)
    return written, skipped


def _remove(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
