"""How many spans a second does `judge monitor --listen` take in, and is its memory flat?

The script starts `judge monitor --listen` on loopback in a child process (retrieval
metrics only, `--sample-rate 0`: no trace is judged, so what is measured is the receiver's
work: requests received, parsed, their spans written to the state, and traces completed
into rows and sampled out), then posts OTLP/HTTP export requests to it as the
OpenTelemetry SDK's exporter sends them: protobuf `ExportTraceServiceRequest`s of 512 spans
(the batch processor's default batch), spans in the order they end (a trace's children
before its root, so traces straddle requests), RAG-shaped traces of 3 spans each with
OpenInference attributes (a CHAIN root with the question and answer, a RETRIEVER with 5
documents, an LLM with its messages and token counts), about 700 bytes of protobuf a span.

The requests are made from a few templates whose trace ids are patched per request (every
trace id is new; building 1,000,000 spans with protobuf would take the client more CPU
than the monitor): `--concurrency` requests in flight, each retried after a 503.

It prints, for the spans sent (`--spans`, default 1,000,000):

- spans a second of wall time (first request to last answer) and of the monitor's CPU
  time (its user + system time over the same interval, from /proc: its threads together);
- the monitor's peak RSS (VmHWM) when 100,000 spans (`--checkpoint`) were answered, and at
  the end; memory is flat when the end's is within 1.2x of the checkpoint's;
- the time and CPU until every trace is completed (`--linger` seconds after its root),
  and the state file's size. With `--receive-only` no trace is completed while the spans
  come (the monitor's --linger is a day): the CPU is the receipt alone (requests read,
  parsed, their spans written to the state), and the state holds every span at the end.

The machine's load (os.getloadavg) is printed beside them: the wall figures depend on it,
the CPU figures less. `--profile FILE` runs the monitor under cProfile (every thread: the
event loop and the state's thread) and writes the merged stats to FILE (pstats format;
the top entries are printed).

    python -m bench.monitor.ingest [--spans 1000000] [--checkpoint 100000]
        [--concurrency 4] [--linger 5 | --receive-only] [--gzip] [--profile FILE]
        [--keep DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.support.peak_memory import status_kib

BATCH = 512  # spans per request: the SDK's default max_export_batch_size
SPANS_PER_TRACE = 3
TEMPLATES = 12  # requests per cycle: 12 x 512 spans = 2,048 whole traces
TRACES_PER_CYCLE = TEMPLATES * BATCH // SPANS_PER_TRACE
MARK = bytes.fromhex("f00dfacecafebeef")  # the first 8 bytes of each template trace id
START_NS = 1_796_000_000 * 10**9
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _attrs(items: dict[str, Any]) -> list[Any]:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    out = []
    for key, value in items.items():
        if isinstance(value, bool):
            any_value = AnyValue(bool_value=value)
        elif isinstance(value, int):
            any_value = AnyValue(int_value=value)
        elif isinstance(value, float):
            any_value = AnyValue(double_value=value)
        else:
            any_value = AnyValue(string_value=value)
        out.append(KeyValue(key=key, value=any_value))
    return out


def trace_spans(number: int, rng: random.Random) -> list[Any]:
    """One trace's 3 spans (children first, the order they end in); `number` is the
    trace's place in its cycle (the low 8 bytes of its id)."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    trace_id = MARK + struct.pack(">Q", number)
    root_id, retriever_id, llm_id = (struct.pack(">Q", 3 * number + k + 1) for k in range(3))
    start = START_NS + number * 50_000_000
    topic = number % 97
    question = f"What does the handbook say about topic {topic}, case {number}?"
    docs = rng.sample(range(100_000), 5)
    contents = [
        f"Passage {doc}: the handbook's section on topic {doc % 97} says that a request of "
        f"kind {doc % 13} is answered within {doc % 30 + 1} days, unless it is urgent."
        for doc in docs
    ]
    answer = f"Topic {topic}: a request of this kind is answered within {number % 30 + 1} days."
    retrieved: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for n, (doc, content) in enumerate(zip(docs, contents, strict=True)):
        retrieved[f"retrieval.documents.{n}.document.id"] = f"doc-{doc}"
        retrieved[f"retrieval.documents.{n}.document.content"] = content
        retrieved[f"retrieval.documents.{n}.document.score"] = round(rng.random(), 4)
    context = "\n\n".join(contents[:3])
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-mini",
        "llm.invocation_parameters": '{"temperature": 0.0, "max_tokens": 256}',
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Answer from the context only.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": f"Context:\n{context}\n\nQuestion: {question}",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
        "llm.token_count.prompt": 180 + number % 50,
        "llm.token_count.completion": 24,
        "llm.token_count.total": 204 + number % 50,
    }
    root = {
        "openinference.span.kind": "CHAIN",
        "input.value": question,
        "input.mime_type": "text/plain",
        "output.value": answer,
        "output.mime_type": "text/plain",
        "session.id": f"session-{number % 1000}",
    }

    def span(span_id: bytes, parent: bytes, name: str, offset: int, attributes: dict) -> Span:
        return Span(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent,
            name=name,
            kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start + offset * 1_000_000,
            end_time_unix_nano=start + offset * 1_000_000 + 900_000,
            attributes=_attrs(attributes),
            flags=0x100,  # the SDK's: whether the parent is remote is known (it is not)
        )

    return [
        span(retriever_id, root_id, "retrieve", 1, retrieved),
        span(llm_id, root_id, "llm", 2, llm),
        span(root_id, b"", "rag", 0, root),
    ]


def templates() -> list[bytes]:
    """The cycle's requests, serialized: 12 of 512 spans, 2,048 traces straddling them."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

    rng = random.Random(0)
    spans = [s for number in range(TRACES_PER_CYCLE) for s in trace_spans(number, rng)]
    out = []
    for first in range(0, len(spans), BATCH):
        request = ExportTraceServiceRequest(
            resource_spans=[
                ResourceSpans(
                    resource={"attributes": _attrs({"service.name": "rag-app"})},
                    scope_spans=[
                        ScopeSpans(
                            scope={"name": "openinference.instrumentation.llama_index"},
                            spans=spans[first : first + BATCH],
                        )
                    ],
                )
            ]
        )
        body = request.SerializeToString()
        assert body.count(MARK) == len(request.resource_spans[0].scope_spans[0].spans)
        out.append(body)
    return out


def body_of(templates: list[bytes], number: int) -> bytes:
    """Request `number`: its template with the cycle's number in its trace ids."""
    cycle, place = divmod(number, len(templates))
    return templates[place].replace(MARK, struct.pack(">Q", cycle + 1))


# -- the monitor process -------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident memory so far (VmHWM)."""
    return status_kib("VmHWM", pid) / 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_monitor(state: Path, port: int, linger: float, profile: str | None) -> Any:
    command = [
        "monitor",
        "--listen",
        f"127.0.0.1:{port}",
        "--state",
        str(state),
        "--metrics",
        "ndcg@10",  # retrieval alone: no model
        "--sample-rate",
        "0",
        "--linger",
        str(linger),
        "--quiet",
    ]
    if profile:
        argv = [sys.executable, "-m", "bench.monitor.ingest", "--profile-child", profile]
    else:
        argv = [sys.executable, "-m", "judge"]
    return subprocess.Popen([*argv, *command], stdout=subprocess.DEVNULL, stderr=sys.stderr)


def profiled_child(out: str, argv: list[str]) -> None:
    """Run `judge ARGV` here under cProfile, each thread with a profiler of its own (the
    state's work runs in a thread), and write the merged stats to `out`."""
    import cProfile
    import pstats
    import threading

    from judge.cli.main import main

    profiles: list[cProfile.Profile] = []

    def start(frame: Any, event: str, arg: Any) -> None:
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()  # replaces this hook in the new thread

    threading.setprofile(start)
    first = cProfile.Profile()
    profiles.append(first)
    first.enable()
    try:
        main(argv)
    except SystemExit:
        pass
    finally:
        first.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
        stats = pstats.Stats(*profiles)
        stats.dump_stats(out)


async def health(session: Any, url: str) -> dict[str, Any]:
    async with session.get(url) as response:
        return dict(await response.json())


async def send(args: argparse.Namespace, port: int, pid: int) -> dict[str, Any]:
    import aiohttp

    bodies = templates()
    requests = -(-args.spans // BATCH)
    base = f"http://127.0.0.1:{port}"
    headers = {"Content-Type": "application/x-protobuf"}
    if args.gzip:
        headers["Content-Encoding"] = "gzip"
    figures: dict[str, Any] = {"requests": requests, "retries": 0}
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for _ in range(300):  # the monitor's start: up to 30 s
            try:
                await health(session, f"{base}/healthz")
                break
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
        else:
            raise RuntimeError("the monitor did not answer /healthz in 30 s")
        next_request = 0
        answered = 0
        bytes_sent = 0
        checkpoint_at = -(-args.checkpoint // BATCH)

        async def worker() -> None:
            nonlocal next_request, answered, bytes_sent
            while next_request < requests:
                number = next_request
                next_request += 1
                body = body_of(bodies, number)
                if number == requests - 1 and args.spans % BATCH:
                    body = last_request(bodies, number, args.spans % BATCH)
                if args.gzip:
                    body = gzip.compress(body, compresslevel=1)
                bytes_sent += len(body)
                while True:
                    async with session.post(
                        f"{base}/v1/traces", data=body, headers=headers
                    ) as response:
                        await response.read()
                        if response.status == 200:
                            break
                        if response.status != 503:
                            raise RuntimeError(f"request {number}: HTTP {response.status}")
                    figures["retries"] += 1
                    await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
                answered += 1
                if answered == checkpoint_at:
                    figures["checkpoint_peak_mib"] = peak_rss_mib(pid)
                    figures["checkpoint_spans"] = answered * BATCH

        cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
        figures["start_peak_mib"] = peak_rss_mib(pid)
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        figures["send_wall_s"] = time.perf_counter() - wall0
        figures["send_cpu_s"] = cpu_seconds(pid) - cpu0
        figures["send_peak_mib"] = peak_rss_mib(pid)
        figures["bytes_sent"] = bytes_sent
        # Every trace completed (sampled out): the rest of the monitor's work on them.
        while not args.receive_only:
            report = await health(session, f"{base}/healthz")
            if report["open_traces"] == 0:
                break
            await asyncio.sleep(0.5)
        else:
            report = await health(session, f"{base}/healthz")
        figures["drain_wall_s"] = time.perf_counter() - wall0
        figures["drain_cpu_s"] = cpu_seconds(pid) - cpu0
        figures["peak_mib"] = peak_rss_mib(pid)
        figures["counts"] = report["counts"]
    return figures


def last_request(bodies: list[bytes], number: int, spans: int) -> bytes:
    """The last request when --spans is no multiple of 512: its template's first spans."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(body_of(bodies, number))
    del request.resource_spans[0].scope_spans[0].spans[spans:]
    return request.SerializeToString()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans sent (1000000)")
    parser.add_argument(
        "--checkpoint",
        type=int,
        default=100_000,
        help="spans answered when the first peak memory is read (100000)",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight at once (4)")
    parser.add_argument(
        "--linger",
        type=float,
        default=5.0,
        help="the monitor's --linger: seconds a trace waits after its root (5)",
    )
    parser.add_argument(
        "--receive-only",
        action="store_true",
        help="complete no trace while the spans come (--linger of a day): the receipt alone",
    )
    parser.add_argument("--gzip", action="store_true", help="gzip the request bodies")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the monitor into FILE")
    parser.add_argument("--keep", metavar="DIR", help="the monitor's --state (kept)")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON to FILE")
    parser.add_argument("--profile-child", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.profile_child:
        profiled_child(args.profile_child, rest)
        return
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    with tempfile.TemporaryDirectory() as scratch:
        state = Path(args.keep or scratch) / "state"
        port = free_port()
        linger = 86_400.0 if args.receive_only else args.linger
        monitor = start_monitor(state, port, linger, args.profile)
        try:
            figures = asyncio.run(send(args, port, monitor.pid))
        finally:
            monitor.terminate()
            code = monitor.wait(timeout=120)
        figures["monitor_exit"] = code
        figures["state_mib"] = (
            sum(p.stat().st_size for p in state.iterdir() if p.name.startswith("monitor.sqlite"))
            / 2**20
        )
    figures["spans"] = args.spans
    figures["load"] = os.getloadavg()
    report(figures, args)
    if args.profile:
        import pstats

        pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


def report(f: dict[str, Any], args: argparse.Namespace) -> None:
    spans = f["spans"]
    counts = f["counts"]
    print(
        f"{spans:,} spans in {f['requests']:,} protobuf requests of {BATCH} "
        f"({f['bytes_sent'] / 2**20:,.0f} MiB{', gzip' if args.gzip else ''}), "
        f"{args.concurrency} in flight, {f['retries']} retried after 503"
    )
    print(
        f"received: {f['send_wall_s']:.1f} s wall ({spans / f['send_wall_s']:,.0f} spans/s), "
        f"monitor CPU {f['send_cpu_s']:.1f} s ({spans / f['send_cpu_s']:,.0f} spans/s of CPU)"
    )
    if args.receive_only:
        print(f"{counts.get('spans', 0):,} spans kept, no trace completed (--receive-only)")
    else:
        print(
            f"all traces completed: {f['drain_wall_s']:.1f} s wall, monitor CPU "
            f"{f['drain_cpu_s']:.1f} s ({spans / f['drain_cpu_s']:,.0f} spans/s of CPU); "
            f"{counts.get('spans', 0):,} spans kept, "
            f"{counts.get('sampled_out', 0) + counts.get('skipped', 0):,} traces completed "
            f"({counts.get('skipped', 0):,} skipped), "
            f"{counts.get('duplicate_spans', 0)} duplicate, {counts.get('late_spans', 0)} late"
        )
    at = f.get("checkpoint_spans")
    ratio = f["peak_mib"] / f["checkpoint_peak_mib"] if at else float("nan")
    print(
        f"monitor peak RSS: {f['start_peak_mib']:.0f} MiB started, "
        + (f"{f['checkpoint_peak_mib']:.0f} MiB at {at:,} spans, " if at else "")
        + f"{f['peak_mib']:.0f} MiB at the end ({ratio:.2f}x: "
        f"{'flat' if ratio <= 1.2 else 'NOT flat'}); state file {f['state_mib']:.0f} MiB"
    )
    load = ", ".join(f"{x:.2f}" for x in f["load"])
    print(f"load average (1, 5, 15 min): {load}; monitor exit code {f['monitor_exit']}")


if __name__ == "__main__":
    main()
