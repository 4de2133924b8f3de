"""How fast are production traces read into rows, and is memory flat in the number of traces?

The script writes OTLP/JSON as the OpenTelemetry Collector's file exporter does (one
`ExportTraceServiceRequest` per line, 512 spans a line as the SDK's batch processor sends
them, spans in the order they end: a trace's children before its root, so traces straddle
lines), 100,000 traces of 5 spans each (a CHAIN root, EMBEDDING, RETRIEVER with 5
documents, RERANKER keeping 3, LLM with token counts), spread over 7 days. Then a child
process reads it with `judge.traces.extract.read_rows` (what `judge traces extract` and
`judge eval TRACES` do) and counts the rows: wall and CPU time, peak memory (the child's
max RSS). The same with 10x fewer traces: the peak should be the same (goal: under 60 s
on one core for 100,000 traces, memory flat).

`--sessions` reads them as `judge traces extract --sessions` does (`conversations`: the
traces are in 1,000 sessions, interleaved over the 7 days, spooled to SQLite and read back
a session at a time): memory should stay flat there too.

    python -m bench.speed.traces_read [--traces 100000] [--small 10000] [--keep DIR]
        [--sessions]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.support.peak_memory import own_peak_kib

DAY_NS = 86_400 * 10**9
START_NS = 1_796_000_000 * 10**9
BATCH = 512  # spans per request: the SDK's default max_export_batch_size


def _s(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _i(key: str, value: int) -> dict[str, Any]:
    return {"key": key, "value": {"intValue": str(value)}}


def _d(key: str, value: float) -> dict[str, Any]:
    return {"key": key, "value": {"doubleValue": value}}


def _docs(prefix: str, ids: list[int], rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for n, doc in enumerate(ids):
        out += [
            _s(f"{prefix}.{n}.document.id", f"doc-{doc}"),
            _s(f"{prefix}.{n}.document.content", f"Passage {doc}: a fact about topic {doc % 97}."),
            _d(f"{prefix}.{n}.document.score", round(rng.random(), 4)),
        ]
    return out


def trace_spans(number: int, traces: int, rng: random.Random) -> list[dict[str, Any]]:
    """One trace's 5 spans, children first (the order they end in)."""
    trace_id = f"{number + 1:032x}"
    root_id = f"{5 * number + 1:016x}"
    start = START_NS + (number * 7 * DAY_NS) // traces
    ids = rng.sample(range(100_000), 5)

    def span(offset: int, name: str, kind: str, attributes: list[dict[str, Any]]) -> dict:
        return {
            "traceId": trace_id,
            "spanId": f"{5 * number + offset:016x}",
            "parentSpanId": root_id,
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(start + offset * 1_000_000),
            "endTimeUnixNano": str(start + offset * 1_000_000 + 900_000),
            "attributes": [_s("openinference.span.kind", kind), *attributes],
            "status": {},
        }

    question = f"What is fact {number} about topic {number % 97}?"
    children = [
        span(2, "embed", "EMBEDDING", [_s("embedding.model_name", "text-embedding-3-small")]),
        span(
            3,
            "retrieve",
            "RETRIEVER",
            [_s("input.value", question), *_docs("retrieval.documents", ids, rng)],
        ),
        span(
            4,
            "rerank",
            "RERANKER",
            [
                *_docs("reranker.input_documents", ids, rng),
                *_docs("reranker.output_documents", ids[:3], rng),
            ],
        ),
        span(
            5,
            "llm",
            "LLM",
            [
                _s("llm.model_name", "gpt-4o-mini"),
                _i("llm.token_count.prompt", 400 + number % 50),
                _i("llm.token_count.completion", 40),
                _i("llm.token_count.total", 440 + number % 50),
            ],
        ),
    ]
    root = {
        "traceId": trace_id,
        "spanId": root_id,
        "name": "rag",
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 6_000_000),
        "attributes": [
            _s("openinference.span.kind", "CHAIN"),
            _s("input.value", question),
            _s("output.value", f"Fact {number} is this."),
            _s("session.id", f"session-{number % 1000}"),
        ],
        "status": {},
    }
    return [*children, root]


def write(path: Path, traces: int) -> int:
    """Write the traces as OTLP/JSON lines; returns the file's size in bytes."""
    rng = random.Random(0)
    resource_attrs = [_s("service.name", "rag-app")]
    pending: list[dict[str, Any]] = []
    with open(path, "w", encoding="utf-8") as out:

        def flush() -> None:
            request = {
                "resourceSpans": [
                    {
                        "resource": {"attributes": resource_attrs},
                        "scopeSpans": [{"scope": {"name": "bench"}, "spans": pending}],
                    }
                ]
            }
            out.write(json.dumps(request, separators=(",", ":")) + "\n")

        for number in range(traces):
            pending.extend(trace_spans(number, traces, rng))
            if len(pending) >= BATCH:
                flush()
                pending = []
        if pending:
            flush()
    return path.stat().st_size


def child(path: str, sessions: bool = False) -> None:
    """Read the file into rows (or conversations) in this process; print the figures as
    JSON."""
    from judge.traces.extract import ExtractSummary, conversations, read_rows

    summary = ExtractSummary()
    started, cpu = time.perf_counter(), time.process_time()
    if sessions:
        rows = sum(len(c.traces) for c in conversations(path, summary=summary))
    else:
        rows = sum(1 for _ in read_rows(path, summary=summary))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = own_peak_kib() / 1024  # not ru_maxrss: see bench/support/peak_memory.py
    print(
        json.dumps(
            {"rows": rows, "wall_s": wall, "cpu_s": cpu, "peak_mib": peak, **summary.to_dict()}
        )
    )


def measure(path: Path, sessions: bool = False) -> dict[str, Any]:
    flag = ["--sessions"] if sessions else []
    done = subprocess.run(
        [sys.executable, "-m", "bench.speed.traces_read", *flag, "--child", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--traces", type=int, default=100_000, help="traces in the big file (default 100000)"
    )
    parser.add_argument(
        "--small",
        type=int,
        default=10_000,
        help="traces in the small file, whose peak memory the big one's is compared with",
    )
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="write the trace files (OTLP/JSON lines) into DIR and keep them; default: a "
        "temporary folder, removed at the end",
    )
    parser.add_argument(
        "--sessions", action="store_true", help="read the traces as conversations by session"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.sessions)
        return
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        figures = {}
        for traces in (args.small, args.traces):
            path = folder / f"traces_{traces}.jsonl"
            size = write(path, traces)
            result = measure(path, args.sessions)
            assert result["rows"] == traces, result
            figures[traces] = result
            print(
                f"{traces:>7,} traces, {result['spans']:>9,} spans, {size / 2**20:7.1f} MiB: "
                f"{result['wall_s']:6.1f} s wall, {result['cpu_s']:6.1f} s CPU "
                f"({result['spans'] / result['cpu_s']:,.0f} spans/s), "
                f"peak {result['peak_mib']:.0f} MiB, {result['rows']:,} rows"
                + (f" in {result['sessions']:,} sessions" if args.sessions else "")
            )
        small, big = figures[args.small], figures[args.traces]
        print(
            f"peak memory at {args.traces:,} traces / at {args.small:,}: "
            f"{big['peak_mib'] / small['peak_mib']:.2f}x; "
            f"goal under 60 s: {'met' if big['wall_s'] < 60 else 'missed'}"
        )


if __name__ == "__main__":
    main()
