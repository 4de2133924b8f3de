"""Replay of 100,000 fully cached rows: `judge eval --replay` wall time and peak memory.

The rows are --distinct samples (5 contexts each; the four core metrics with embeddings)
repeated until there are --rows of them, each with its own id. The cache is filled by one
`judge eval` of the distinct samples against the fake server; the replay then does all of
a row's work for every distinct row (hashing each request, a lookup, parsing and
validating each reply, scoring, writing the row, the summary and the report) without a
request. A replay judges a sample met again under another id from memory
(`judge.run.sample_memo.SampleMemo`: its scores, evidence and usage, and its line put
together from an earlier row's), so a repeated row costs reading, hashing and writing it;
--all-distinct is the case where every row goes through its judges.

--all-distinct makes every row different, as in real logs: row n is project 100000+n.
Filling that cache through the fake server would take 600,000 requests, so it is derived
from the distinct samples' entries: project i becomes project 100000+n in every request
and reply (the fake judge's heuristics only compare words, so its replies carry over),
embeddings are computed again, keys recomputed. A few rows are also filled through the
fake server and must give exactly the derived entries.

--embedding-dims N gives every text a dense vector of N dimensions (a seeded normal draw,
normalised, as float32 like the fake server's), where the default fake embedding is a
hashed bag of words of 256 dimensions, mostly zeros. A provider's vectors are dense (1,536
for text-embedding-3-small): each replayed vector is N decimal numbers to parse.

Peak memory is the replay process's own maximum resident set size since its start
(VmHWM: start-up, input rows, cache and output writing included; before 2026-12-06 it was
ru_maxrss, which starts from this benchmark's own peak, 440 MiB once it has derived an
--all-distinct cache: see bench/support/peak_memory.py); CPU is its user plus system time.
Goals: under 60 s and under 1 GB.

--shards N runs the replay as N `judge eval --replay --shard I/N` processes at once (each
its own output directory, all reading the one cache file), then `judge merge`. Its wall
time runs from the start of the first shard to the end of the merge; CPU is the sum over
the shards and the merge; peak RSS the largest of any one process (they run at once, so
the machine holds up to N of them). With --rows <= 20,000, or with --check, a one-process
replay is run first and the merged results.jsonl, summary.json and report.html must equal
its own byte for byte, but for config.seconds (each run's own time; the merge's is the
sum of its shards').

The I/O floor is what any replay must pay, measured in its own process after the
one-process replay: parsing each input line (json.loads) and encoding and writing each
result row as results.jsonl holds it (json.dumps with sorted keys; the rows are taken from
the replay's results.jsonl outside the measured time, and the file written must equal it
byte for byte). The replay's CPU over the floor's is printed (goal: under 4x).

The machine's load (from /proc/loadavg) is printed beside the figures: on a shared
machine wall time says more about the others than about judge; compare CPU, or ratios
measured in one go.

--processes N times the same with one command, `judge eval --replay --processes N`, which
runs the shards in its own processes and merges them (wall time with start-up and merge;
CPU of all its processes; peak RSS the largest process's).

Run: python -m bench.speed.replay_100k [--rows 100000] [--distinct 1000] [--concurrency 32]
     [--all-distinct] [--embedding-dims N] [--shards N] [--processes N] [--check]
     [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import re
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.support.peak_memory import (
    MEASURED_JUDGE,
    judge_figures,
    recorded_peaks,
    recording_peaks,
)
from judge.cache.store import Cache, CacheEntry, cache_key
from judge.testing import FakeLLMServer, heuristic_judge
from judge.testing.replies import hashed_embedding

TOPICS = ["Python", "Rust", "SQLite", "Linux", "HTTP", "Unicode", "NumPy", "Git"]
# The I/O floor (see the module docstring): CPU seconds of reading the input and writing
# the results, and nothing else; the result rows are parsed outside the measured time.
FLOOR = (
    "import json, sys, time\n"
    "source, results, out = sys.argv[1:4]\n"
    "spent = 0.0\n"
    "with open(source, 'rb') as rows, open(results, 'rb') as done:\n"
    "    written = open(out, 'w', encoding='utf-8')\n"
    "    for line, result in zip(rows, done, strict=True):\n"
    "        row = json.loads(result)\n"
    "        start = time.process_time()\n"
    "        json.loads(line)\n"
    "        written.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + '\\n')\n"
    "        spent += time.process_time() - start\n"
    "    start = time.process_time()\n"
    "    written.close()\n"
    "    spent += time.process_time() - start\n"
    "print('FLOOR_CPU_S', spent)\n"
)


def io_floor(root: Path, out: str) -> float:
    """CPU seconds of the I/O floor of the replay written to root/out (see FLOOR)."""
    written = root / "floor.jsonl"
    command = [sys.executable, "-c", FLOOR, str(root / "rows.jsonl")]
    command += [str(root / out / "results.jsonl"), str(written)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    if written.read_bytes() != (root / out / "results.jsonl").read_bytes():
        raise SystemExit("the I/O floor wrote other bytes than the replay's results.jsonl")
    written.unlink()
    return float(done.stdout.split()[-1])


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


def dense_embedding(text: str, dims: int) -> list[float]:
    """A dense unit vector of dims float32 numbers, the same for the same text."""
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(dims)
    return (vector / np.linalg.norm(vector)).astype(np.float32).astype(np.float64).tolist()


def dense_embeddings(texts: list[str], dims: int) -> list[list[float]]:
    """The fake server's embedding handler for --embedding-dims."""
    return [dense_embedding(t, dims) for t in texts]


def embedding(text: str, dims: int | None) -> list[float]:
    """A text's vector as the fake server sends it (base64 float32), decoded."""
    if dims:
        return dense_embedding(text, dims)
    vector = hashed_embedding(text)
    return list(struct.unpack(f"<{len(vector)}f", struct.pack(f"<{len(vector)}f", *vector)))


def eval_command(
    data: Path, server: FakeLLMServer, root: Path, out: str, *extra: str, cache: str = "cache"
) -> list[str]:
    """The measured `judge eval` of data into root/out with root/cache.sqlite."""
    return [
        sys.executable,
        "-c",
        MEASURED_JUDGE,
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
        # Keys name the server by this, not by the fake server's port: a kept --keep
        # directory can be replayed again (e.g. under a profiler) by a later process.
        "--cache-as",
        "bench-fake",
        "--cache",
        str(root / f"{cache}.sqlite"),
        "--out",
        str(root / out),
        "--no-progress",
        *extra,
    ]


@dataclass
class Running:
    """A measured command started, and where the processes it starts record their peaks."""

    process: subprocess.Popen
    recording: contextlib.ExitStack
    peaks: Path


def finish(running: Running, start: float) -> tuple[float, float, float]:
    """(seconds since start, peak RSS in MiB: the largest of its own and its processes',
    CPU seconds) of a MEASURED_JUDGE process."""
    with running.recording:
        _, err = running.process.communicate()
        seconds = time.perf_counter() - start
        peaks = recorded_peaks(running.peaks)
    if running.process.returncode != 0:
        raise SystemExit(
            f"{running.process.args[3]} failed ({running.process.returncode}):\n{err[-3000:]}"
        )
    figures = judge_figures(err, peaks)
    return seconds, max(figures.own_kib, figures.children_kib) / 1024, figures.cpu


def launch(command: list[str]) -> Running:
    """A measured command started (stdout and stderr captured)."""
    recording = contextlib.ExitStack()
    env, peaks = recording.enter_context(recording_peaks())
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    return Running(process, recording, peaks)


def measure(command: list[str]) -> tuple[float, float, float]:
    """(seconds, peak RSS in MiB, CPU seconds) of one measured command run to its end."""
    start = time.perf_counter()
    return finish(launch(command), start)


def judge_eval(
    data: Path, server: FakeLLMServer, root: Path, out: str, *extra: str, cache: str = "cache"
) -> tuple[float, float, float]:
    """(seconds, peak RSS in MiB, CPU seconds) of one `judge eval`."""
    return measure(eval_command(data, server, root, out, *extra, cache=cache))


def sharded_replay(
    root: Path, server: FakeLLMServer, shards: int, concurrency: int
) -> dict[str, float]:
    """The replay as `shards` concurrent `judge eval --shard I/N` processes, then
    `judge merge` into root/merged: wall time from the first start to the merge's end,
    the shards' wall time, CPU summed, the largest peak RSS, the merge's own figures."""
    start = time.perf_counter()
    running = [
        launch(
            eval_command(
                root / "rows.jsonl",
                server,
                root,
                f"shard{i}",
                "--replay",
                "--concurrency",
                str(concurrency),
                "--shard",
                f"{i}/{shards}",
            )
        )
        for i in range(1, shards + 1)
    ]
    done = [finish(process, start) for process in running]
    merge_command = [sys.executable, "-c", MEASURED_JUDGE, "merge", str(root / "merged")]
    merge_command += [str(root / f"shard{i}") for i in range(1, shards + 1)]
    merge_start = time.perf_counter()
    merge = finish(launch(merge_command), merge_start)
    return {
        "wall": time.perf_counter() - start,
        "shards_wall": max(d[0] for d in done),
        "cpu": sum(d[2] for d in done) + merge[2],
        "shard_cpu_max": max(d[2] for d in done),
        "mib": max([d[1] for d in done] + [merge[1]]),
        "merge_wall": merge[0],
        "merge_cpu": merge[2],
        "merge_mib": merge[1],
    }


SECONDS = {
    "summary.json": re.compile(rb'"seconds": [0-9.e+-]+'),
    "report.html": re.compile(rb"&quot;seconds&quot;: [0-9.e+-]+"),
}


def differences(a: Path, b: Path) -> list[str]:
    """The output files of two runs that differ (config.seconds aside)."""
    differ = []
    for name in ("results.jsonl", "summary.json", "report.html"):
        one, two = (a / name).read_bytes(), (b / name).read_bytes()
        if name in SECONDS:
            one, two = (SECONDS[name].sub(b"SECONDS", x) for x in (one, two))
        if one != two:
            differ.append(name)
    return differ


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


PROJECT = re.compile(r"(?<=[Pp]roject )(\d+)\b")


def renumbered(
    entry: CacheEntry, copy: int, distinct: int, dims: int | None = None
) -> CacheEntry | None:
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
    if entry.kind == "embedding":
        response = embedding(request["text"], dims)
    return replace(entry, key=cache_key(request), request=request, response=response)


def derive_distinct(root: Path, rows: int, distinct: int, dims: int | None) -> int:
    """Add every row's own entries to the cache (see the module docstring); returns how many."""
    added = 0
    with Cache(root / "cache.sqlite") as cache:
        template = list(cache.entries())
        for copy in range(rows // distinct):
            batch = [e for e in (renumbered(t, copy, distinct, dims) for t in template) if e]
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
    parser.add_argument(
        "--embedding-dims", type=int, help="dense embeddings of N dimensions (default: sparse 256)"
    )
    parser.add_argument(
        "--shards", type=int, default=0, help="replay as N shard processes at once, then merge"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="also replay with one command, judge eval --processes N (N shards and the merge)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="with --shards: also a one-process replay, whose outputs the merge must equal "
        "(default when --rows <= 20,000)",
    )
    parser.add_argument(
        "--keep", metavar="DIR", help="work in DIR (new or empty) and keep it: data, cache, outputs"
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.keep:
            root = Path(args.keep)
            root.mkdir(parents=True, exist_ok=True)
            if any(root.iterdir()):
                raise SystemExit(f"--keep {root}: give a new or empty directory")
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        embed = (
            functools.partial(dense_embeddings, dims=args.embedding_dims)
            if args.embedding_dims
            else None
        )
        server = stack.enter_context(FakeLLMServer(chat=heuristic_judge, embed=embed))
        run(args, root, server)


def run(args: argparse.Namespace, root: Path, server: FakeLLMServer) -> None:
    """Fill the cache, then replay (in one process, or sharded, or both) and print."""
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
        added = derive_distinct(root, args.rows, distinct, args.embedding_dims)
        print(f"derived {added:,} entries in {time.perf_counter() - start:.0f} s")
        check_derived(root, server, [0, distinct + 7, args.rows - 1], distinct)
        recorded = server.count()
    kind = "all distinct" if args.all_distinct else f"{distinct:,} distinct"
    if args.embedding_dims:
        kind += f", dense embeddings of {args.embedding_dims:,} dimensions"
    print(
        f"{args.rows:,} cached rows ({kind}); cache filled with {recorded:,} requests in "
        f"{fill:.1f} s; goals: under 60 s wall and under 1,024 MiB"
    )
    sharded = args.shards or args.processes
    one_process = not sharded or args.check or args.rows <= 20_000
    if one_process:
        before = load()
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
        print(
            f"one process: {seconds:.1f} s wall with start-up, {cpu:.1f} s CPU "
            f"({cpu / args.rows * 1000:.2f} ms a row), {args.rows / seconds:,.0f} rows/s; "
            f"peak RSS {mib:,.0f} MiB; load {before} -> {load()}; results.jsonl "
            f"{results:,.0f} MiB; rows in summary {summary['rows']:,}"
        )
        before = load()
        floor = io_floor(root, "replay")
        print(
            f"I/O floor (parse the input, encode and write results.jsonl): {floor:.1f} s "
            f"CPU; the replay's CPU is {cpu / floor:.1f}x it (goal under 4x); load "
            f"{before} -> {load()}"
        )
    if args.shards:
        before = load()
        got = sharded_replay(root, server, args.shards, args.concurrency)
        summary = json.loads((root / "merged" / "summary.json").read_text(encoding="utf-8"))
        print(
            f"{args.shards} shards at once, then judge merge: {got['wall']:.1f} s wall from "
            f"the first shard's start to the merge's end (shards {got['shards_wall']:.1f} s, "
            f"merge {got['merge_wall']:.1f} s wall, {got['merge_cpu']:.1f} s CPU, "
            f"{got['merge_mib']:,.0f} MiB); CPU summed {got['cpu']:.1f} s "
            f"({got['cpu'] / args.rows * 1000:.2f} ms a row; the busiest shard "
            f"{got['shard_cpu_max']:.1f} s); peak RSS of one process {got['mib']:,.0f} MiB; "
            f"{args.rows / got['wall']:,.0f} rows/s; load {before} -> {load()}; rows in "
            f"summary {summary['rows']:,}"
        )
        if one_process:
            differ = differences(root / "replay", root / "merged")
            if differ:
                raise SystemExit(
                    f"the merged {', '.join(differ)} differ from the one-process replay's"
                )
            print(
                "merged results.jsonl, summary.json and report.html equal the one-process "
                "replay's byte for byte (config.seconds aside)"
            )
    if args.processes:
        before = load()
        seconds, mib, cpu = judge_eval(
            root / "rows.jsonl",
            server,
            root,
            "processes",
            "--replay",
            "--concurrency",
            str(args.concurrency),
            "--processes",
            str(args.processes),
        )
        print(
            f"judge eval --processes {args.processes}: {seconds:.1f} s wall with start-up and "
            f"the merge, {cpu:.1f} s CPU of all its processes ({cpu / args.rows * 1000:.2f} "
            f"ms a row); peak RSS of one process {mib:,.0f} MiB; {args.rows / seconds:,.0f} "
            f"rows/s; load {before} -> {load()}"
        )
        if one_process:
            differ = differences(root / "replay", root / "processes")
            if differ:
                raise SystemExit(f"--processes wrote other {', '.join(differ)} than one process")
            print("its outputs equal the one-process replay's byte for byte (seconds aside)")
    print(f"requests during replay: {server.count() - recorded} (must be 0)")
    if server.count() != recorded:
        raise SystemExit("the replay sent requests")


if __name__ == "__main__":
    main()
