"""Replay of 100,000 fully cached rows: `judge eval --replay` wall time and peak memory.

The rows are --distinct samples (5 contexts each; the four core metrics with embeddings)
repeated until there are --rows of them, each with its own id. The cache is filled by one
`judge eval` of the distinct samples against the fake server; the replay then does all of
a row's work for every row (hashing each request, a lookup, parsing and validating each
reply, scoring, writing the row, the summary and the report) without a request. A run
remembers the responses it has read (`LLMSession(memo_bytes=...)`), so repeated rows skip
the SQLite lookup and the JSON decoding.

--all-distinct makes every row different, as in real logs: row n is project 100000+n.
Filling that cache through the fake server would take 600,000 requests, so it is derived
from the distinct samples' entries: project i becomes project 100000+n in every request
and reply (the fake judge's heuristics only compare words, so its replies carry over),
embeddings are computed again, keys recomputed. A few rows are also filled through the
fake server and must give exactly the derived entries.

Peak memory is the replay process's own maximum resident set size (start-up, input rows,
cache and output writing included); CPU is its user plus system time. Goals: under 60 s
and under 1 GB.

Run: python bench/replay_100k.py [--rows 100000] [--distinct 1000] [--concurrency 32]
     [--all-distinct]
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from judge.llm.cache import Cache, CacheEntry, cache_key
from judge.testing import FakeLLMServer, heuristic_judge
from judge.testing.replies import hashed_embedding

TOPICS = ["Python", "Rust", "SQLite", "Linux", "HTTP", "Unicode", "NumPy", "Git"]
# Runs `judge` and reports its own peak RSS (KiB on Linux) on stderr.
MEASURED = (
    "import resource, sys\n"
    "from judge.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "used = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print('MAXRSS_KIB', used.ru_maxrss, file=sys.stderr)\n"
    "print('CPU_S', used.ru_utime + used.ru_stime, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def sample(i: int, number: int, project: int | None = None) -> dict:
    """Distinct sample i (of the --distinct ones) as row `number`, about project i (or
    `project`, which must equal i modulo 1000 so the topic and the year stay)."""
    t = TOPICS[i % len(TOPICS)]
    i = i if project is None else project
    return {
        "id": f"r{number}",
        "question": f"What is {t} used for in project {i}?",
        "answer": f"{t} is used for project {i}. {t} is fast. {t} has a large community.",
        "contexts": [
            f"{t} is used for project {i}.",
            f"{t} is fast.",
            "Bananas are yellow.",
            f"The community of {t} is large and {t} has a large community.",
            f"Project {i} started in {2000 + i % 20}.",
        ],
        "ground_truth": f"{t} is used for project {i}. It started in {2000 + i % 20}.",
    }


def judge_eval(
    data: Path, server: FakeLLMServer, root: Path, out: str, *extra: str, cache: str = "cache"
) -> tuple:
    """(seconds, peak RSS in MiB, CPU seconds) of one `judge eval`."""
    command = [
        sys.executable,
        "-c",
        MEASURED,
        "eval",
        str(data),
        "--model",
        "openai/bench-judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "x",
        "--embedding-model",
        "openai/bench-embed",
        "--cache",
        str(root / f"{cache}.sqlite"),
        "--out",
        str(root / out),
        "--no-progress",
        *extra,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"judge eval failed ({done.returncode}):\n{done.stderr[-3000:]}")
    found = dict(
        line.split() for line in done.stderr.splitlines() if line[:6] in ("MAXRSS", "CPU_S ")
    )
    return seconds, int(found["MAXRSS_KIB"]) / 1024, float(found["CPU_S"])


PROJECT = re.compile(r"(?<=[Pp]roject )(\d+)\b")


def renumbered(entry: CacheEntry, copy: int, distinct: int) -> CacheEntry | None:
    """The entry of distinct sample i as row copy*distinct+i's (project 100000+that), or
    None when it names no project (shared by every row of its topic)."""
    text = json.dumps({"request": entry.request, "response": entry.response})
    numbers = set(PROJECT.findall(text))
    if not numbers:
        return None
    (number,) = numbers  # each entry belongs to one sample
    new = str(100_000 + copy * distinct + int(number))
    data = json.loads(PROJECT.sub(new, text))
    request, response = data["request"], data["response"]
    if entry.kind == "embedding":  # as the fake server sends it: base64 float32
        vector = hashed_embedding(request["text"])
        response = list(struct.unpack(f"<{len(vector)}f", struct.pack(f"<{len(vector)}f", *vector)))
    return replace(entry, key=cache_key(request), request=request, response=response)


def derive_distinct(root: Path, rows: int, distinct: int) -> int:
    """Add every row's own entries to the cache (see the module docstring); returns how many."""
    added = 0
    with Cache(root / "cache.sqlite") as cache:
        template = list(cache.entries())
        for copy in range(rows // distinct):
            batch = [e for e in (renumbered(t, copy, distinct) for t in template) if e]
            cache.put_many(batch)
            added += len(batch)
    return added


def check_derived(root: Path, server: FakeLLMServer, numbers: list[int], distinct: int) -> None:
    """Rows filled through the fake server must give exactly the derived entries."""
    with open(root / "check.jsonl", "w", encoding="utf-8") as out:
        for n in numbers:
            out.write(json.dumps(sample(n % distinct, n, project=100_000 + n)) + "\n")
    judge_eval(root / "check.jsonl", server, root, "check", cache="check")
    with Cache(root / "check.sqlite") as real, Cache(root / "cache.sqlite") as derived:
        for entry in real.entries():
            got = derived.get(entry.key)
            if got is None or got.response != entry.response:
                raise SystemExit(f"derived cache differs from the fake server's at {entry.key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--distinct", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--all-distinct", action="store_true", help="every row different")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=heuristic_judge) as server:
        root = Path(tmp)
        distinct = min(args.distinct, args.rows)
        with open(root / "fill.jsonl", "w", encoding="utf-8") as out:
            for i in range(distinct):
                out.write(json.dumps(sample(i, i)) + "\n")
        with open(root / "rows.jsonl", "w", encoding="utf-8") as out:
            for n in range(args.rows):
                project = 100_000 + n if args.all_distinct else None
                out.write(json.dumps(sample(n % distinct, n, project)) + "\n")
        fill, _, _ = judge_eval(root / "fill.jsonl", server, root, "fill", "--concurrency", "64")
        recorded = server.count()
        if args.all_distinct:
            start = time.perf_counter()
            added = derive_distinct(root, args.rows, distinct)
            print(f"derived {added:,} entries in {time.perf_counter() - start:.0f} s")
            check_derived(root, server, [0, distinct + 7, args.rows - 1], distinct)
            recorded = server.count()
        seconds, mib, cpu = judge_eval(
            root / "rows.jsonl",
            server,
            root,
            "replay",
            "--replay",
            "--concurrency",
            str(args.concurrency),
        )
        summary = json.loads((root / "replay" / "summary.json").read_text(encoding="utf-8"))
        results = (root / "replay" / "results.jsonl").stat().st_size / 2**20
        kind = "all distinct" if args.all_distinct else f"{distinct:,} distinct"
        print(
            f"replay of {args.rows:,} cached rows ({kind}; cache filled with "
            f"{recorded:,} requests in {fill:.1f} s): {seconds:.1f} s wall with start-up "
            f"(goal < 60 s), {cpu:.1f} s CPU, {args.rows / seconds:,.0f} rows/s; "
            f"peak RSS {mib:,.0f} MiB "
            f"(goal < 1024); requests during replay {server.count() - recorded}; "
            f"results.jsonl {results:,.0f} MiB; rows in summary {summary['rows']:,}"
        )


if __name__ == "__main__":
    main()
