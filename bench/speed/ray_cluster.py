"""`judge eval --ray --ray-address` on a Ray cluster of two nodes, beside a plain run.

The closest this one machine comes to several: `ray.cluster_utils.Cluster` starts a head
node and a second node, each its own raylet (scheduler, object store, worker processes)
joined to the head's GCS, as `ray start --head` and `ray start --address` would on two
machines. judge runs as a separate driver that joins by address, against the fake server
answering after --latency seconds. The bench then:
- runs the same rows plainly and compares: results.jsonl byte for byte, and without each
  row's usage (which differs where rows share a request: see the README), summary numbers;
- reruns on the cluster with --replay: every judgment must come from the actors' caches;
- watches the cluster's processes during the Ray run and counts, per raylet (per node),
  the judge actors it started, so a run whose actors all landed on one node says so.
What one machine cannot show: network transfer between hosts, a node lost mid-run.

Run: python -m bench.speed.ray_cluster [--rows 200] [--actors 2] [--cpus 1] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from ray.cluster_utils import Cluster

from bench.speed.eval_speed import judge_eval, samples, write
from judge.testing import FakeLLMServer, heuristic_judge

METRICS = "faithfulness,answer_relevancy,context_precision,context_recall"


def timed_eval(
    data: Path, server: FakeLLMServer, cache: Path, out: Path, concurrency: int, *extra: str
) -> float:
    """Seconds one `judge eval` of the bench's metrics took (eval_speed's command)."""
    seconds, _ = judge_eval(data, server, cache, out, concurrency, "--metrics", METRICS, *extra)
    return seconds


def processes() -> dict[int, tuple[int, str, str]]:
    """Every process of this machine: {pid: (parent pid, name, command line)}, from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        found[int(entry.name)] = (parent, name, cmdline)
    return found


def watch_actors(stop: threading.Event, seen: dict[int, int]) -> None:
    """Until stop: record judge's Ray Data actor processes as {pid: their raylet's pid}
    (each Ray node is one raylet; its workers are its descendants)."""
    while not stop.is_set():
        table = processes()
        for pid, (_, _, cmdline) in table.items():
            if "MapWorker" not in cmdline or "RowJudge" not in cmdline:
                continue
            ancestor = pid
            while ancestor in table and table[ancestor][1] != "raylet":
                ancestor = table[ancestor][0]
            if ancestor in table:
                seen[pid] = ancestor
        stop.wait(0.3)


def first_difference(ray_value: object, plain_value: object, path: str = "") -> str | None:
    """The first path (row.usage.by_judge...) where two decoded values differ, with both."""
    if isinstance(ray_value, dict) and isinstance(plain_value, dict):
        for key in sorted(ray_value.keys() | plain_value.keys()):
            found = first_difference(ray_value.get(key), plain_value.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    if ray_value != plain_value:
        return f"{path.lstrip('.')}: {ray_value!r:.120} on Ray, {plain_value!r:.120} plain"
    return None


def without_usage(line: str) -> dict:
    """A row of results.jsonl without its usage."""
    row = json.loads(line)
    row.pop("usage", None)
    return row


def summary_numbers(path: Path) -> dict:
    """A summary's metric figures (what must equal the plain run's)."""
    summary = json.loads(path.read_text(encoding="utf-8"))
    return {k: summary[k] for k in ("rows", "metrics") if k in summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--cpus", type=float, default=1.0, help="CPUs each node offers")
    parser.add_argument("--latency", type=float, default=0.05, help="the fake server's delay")
    parser.add_argument("--concurrency", type=int, default=16, help="requests per actor")
    args = parser.parse_args()
    start = time.perf_counter()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": args.cpus, "include_dashboard": False}
    )
    cluster.add_node(num_cpus=args.cpus)
    cluster.wait_for_nodes()
    print(f"cluster of 2 nodes at {cluster.address} in {time.perf_counter() - start:.1f} s")
    try:
        with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=heuristic_judge) as server:
            root = Path(tmp)
            server.latency = args.latency
            write(root / "rows.jsonl", samples(args.rows))
            ray = ("--ray-address", cluster.address, "--ray-actors", str(args.actors))
            rows, on_ray, plain = root / "rows.jsonl", root / "ray.sqlite", root / "plain.sqlite"
            stop, seen = threading.Event(), {}
            watcher = threading.Thread(target=watch_actors, args=(stop, seen), daemon=True)
            watcher.start()
            ray_s = timed_eval(rows, server, on_ray, root / "ray", args.concurrency, *ray)
            stop.set()
            watcher.join()
            sent = server.count("/v1/chat/completions")
            both = args.concurrency * args.actors
            plain_s = timed_eval(rows, server, plain, root / "plain", both)
            plain_sent = server.count("/v1/chat/completions") - sent
            before = server.count()
            replay_s = timed_eval(
                rows, server, on_ray, root / "replay", args.concurrency, "--replay", *ray
            )
            replayed = server.count() - before
            ray_rows, plain_rows = (
                (root / out / "results.jsonl").read_text(encoding="utf-8").splitlines()
                for out in ("ray", "plain")
            )
            same_rows = ray_rows == plain_rows
            # A row's usage may differ where rows share a request (see the README)
            same_but_usage = [without_usage(r) for r in ray_rows] == [
                without_usage(r) for r in plain_rows
            ]
            differ = [
                f"row {n}: {first_difference(json.loads(a), json.loads(b))}"
                for n, (a, b) in enumerate(zip(ray_rows, plain_rows, strict=True))
                if a != b
            ]
            same_summary = summary_numbers(root / "ray" / "summary.json") == summary_numbers(
                root / "plain" / "summary.json"
            )
    finally:
        cluster.shutdown()
    nodes: dict[int, int] = {}
    for raylet in seen.values():
        nodes[raylet] = nodes.get(raylet, 0) + 1
    print(
        f"{args.rows} rows, {args.actors} actors x {args.concurrency} requests, fake server "
        f"{args.latency * 1000:.0f} ms per request"
    )
    print(f"ray run:   {ray_s:.1f} s, {sent} chat requests")
    print(
        f"plain run: {plain_s:.1f} s, {plain_sent} chat requests "
        f"(concurrency {args.concurrency * args.actors})"
    )
    print(f"ray rerun with --replay: {replay_s:.1f} s, {replayed} requests (must be 0)")
    print(
        f"judge actors seen per node (raylet pid: actors): {nodes or 'none seen'}; "
        f"nodes used: {len(nodes)} of 2"
    )
    print(
        f"results.jsonl identical to the plain run's: {same_rows}; summary numbers: {same_summary}"
    )
    for line in differ[:3]:
        print(f"  {line}")
    if differ:
        print(f"  ({len(differ)} of {len(plain_rows)} rows differ)")
    print(f"identical but for usage: {same_but_usage}")
    if not (same_but_usage and same_summary and replayed == 0):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
