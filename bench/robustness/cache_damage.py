"""A damaged cache never changes a score without an error: random bytes at seeded places.

A cache is filled by `judge.evaluate` over --rows samples (the four core metrics and
answer_relevancy, through the fake server of `judge.testing`). Two copies of it get
--bytes random bytes at each of --places seeded random offsets of the file (anywhere:
pages of entries, of the index, of SQLite's own bookkeeping). The same evaluation then
runs on one copy in read-write mode against the fake server (damaged entries are asked
for again and rewritten) and on the other in replay mode (no request), and every row is
compared with the undamaged run's.

Prints per mode: rows changed without an error (the goal is 0: a changed score must come
with an error saying why), rows with a damaged-entry error, rows with another error, the
damaged entries the cache counted, and the requests made (read-write: to heal them). A run
that cannot start (the file's header hit: not openable) is reported as such: every row is
then an error, none a wrong value. When SQLite refuses to write into damaged pages the
read-write run stops (`CacheStoreError`, naming `judge cache repair`); the bench then
repairs the copy as the message says and runs again, and reports both.

Run: python -m bench.robustness.cache_damage [--rows 300] [--places 50] [--bytes 64] [--seed 0]
     [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.speed.eval_speed import samples
from judge.cache.store import Cache
from judge.errors import CacheStoreError, JudgeError
from judge.llm.config import LLM, Embeddings
from judge.run.evaluate import evaluate
from judge.testing import FakeLLMServer, heuristic_judge

METRICS = [
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_recall",
]


def models(server: FakeLLMServer) -> tuple[LLM, Embeddings]:
    """The judge and embedding models, under one cache identity for every fake server."""
    llm = LLM("openai/judge", api_base=server.base_url, api_key="k", cache_as="fake")
    embeddings = Embeddings("openai/embed", api_base=server.base_url, api_key="k", cache_as="fake")
    return llm, embeddings


def run(rows: list[dict[str, Any]], cache: Cache, server: FakeLLMServer) -> list[dict[str, Any]]:
    """Each row's scores and errors (a row error for bad input counts as every metric's)."""
    llm, embeddings = models(server)
    result = evaluate(
        rows, metrics=METRICS, llm=llm, embeddings=embeddings, cache=cache, progress=False
    )
    out = []
    for row in result.rows:
        errors = dict(row.errors)
        if row.error is not None:
            errors = dict.fromkeys(METRICS, row.error)
        out.append({"scores": dict(row.scores), "errors": errors})
    return out


def damage(path: Path, places: int, size: int, seed: int) -> list[int]:
    """Random bytes at `places` seeded offsets of the file; returns the offsets."""
    rng = random.Random(seed)
    length = path.stat().st_size
    offsets = sorted(rng.randrange(0, max(1, length - size)) for _ in range(places))
    with open(path, "r+b") as f:
        for offset in offsets:
            f.seek(offset)
            f.write(rng.randbytes(size))
    return offsets


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def compare(reference: list[dict[str, Any]], got: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows changed without an error, with a damaged-entry error, with another error."""
    silent = damaged = other = 0
    seen: list[str] = []
    for ref, row in zip(reference, got, strict=True):
        changed = [m for m in METRICS if not same(ref["scores"][m], row["scores"].get(m, math.nan))]
        if any(m not in row["errors"] for m in changed):
            silent += 1
        if any("damaged" in e for e in row["errors"].values()):
            damaged += 1
        elif row["errors"]:
            other += 1
            seen += [e[:160] for e in row["errors"].values() if e[:160] not in seen]
    return {
        "rows_changed_without_an_error": silent,
        "rows_with_a_damaged_entry_error": damaged,
        "rows_with_another_error": other,
        "other_errors": seen[:3],
    }


def trial(
    rows: list[dict[str, Any]],
    reference: list[dict[str, Any]],
    clean: Path,
    work: Path,
    mode: str,
    places: int,
    size: int,
    seed: int,
) -> dict[str, Any]:
    """One damaged copy evaluated in one mode, compared with the reference rows."""
    path = work / f"{mode}.sqlite"
    shutil.copyfile(clean, path)
    damage(path, places, size, seed)
    outcome: dict[str, Any] = {"mode": mode}
    with FakeLLMServer(chat=heuristic_judge) as server:
        for attempt in range(2):
            try:
                with Cache(path, mode="replay" if mode == "replay" else "read-write") as cache:
                    got = run(rows, cache, server)
                    counted = cache.damaged
                break
            except CacheStoreError as exc:  # SQLite cannot write into damaged pages
                outcome["stopped"] = f"{type(exc).__name__}: {exc}"[:300]
                outcome["requests_before_the_stop"] = server.count()
                if attempt:
                    return outcome
                with Cache(path) as cache:  # what the message says to do, then rerun
                    outcome["repair_dropped"], _ = cache.repair()
            except JudgeError as exc:  # the run cannot start: no row gets a value
                outcome["stopped"] = f"{type(exc).__name__}: {exc}"[:300]
                outcome["rows_changed_without_an_error"] = 0
                return outcome
        figures = compare(reference, got)
        return {**outcome, **figures, "damaged_entries": counted, "requests": server.count()}


def measure(rows: int, places: int, size: int, seed: int, work: Path) -> dict[str, Any]:
    """Fill a cache, then damage two copies and run each mode; returns the figures."""
    data = samples(rows)
    clean = work / "clean.sqlite"
    with FakeLLMServer(chat=heuristic_judge) as server, Cache(clean) as cache:
        reference = run(data, cache, server)
        entries, filled = len(cache), server.count()
    outcome: dict[str, Any] = {
        "rows": rows,
        "cache_entries": entries,
        "cache_bytes": clean.stat().st_size,
        "requests_to_fill": filled,
        "places": places,
        "bytes_per_place": size,
        "seed": seed,
        "runs": [
            trial(data, reference, clean, work, mode, places, size, seed)
            for mode in ("read-write", "replay")
        ],
    }
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--places", type=int, default=50)
    parser.add_argument("--bytes", type=int, default=64, dest="size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="keep the caches in this folder")
    args = parser.parse_args()
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
        outcome = measure(args.rows, args.places, args.size, args.seed, work)
    else:
        with tempfile.TemporaryDirectory() as folder:
            outcome = measure(args.rows, args.places, args.size, args.seed, Path(folder))
    print(json.dumps(outcome, indent=2))


if __name__ == "__main__":
    main()
