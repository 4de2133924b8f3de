"""RAG traces for the monitor's tests, made by the real OpenTelemetry SDK at chosen times:
each a CHAIN root with a retriever and an answer that the heuristic judge finds faithful
(its words are in the documents) or not."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers.cli import run
from tests.helpers.rag_spans import KIND
from tests.helpers.traces import export, write_json_lines

PER_ROW = 2  # faithfulness asks the heuristic judge twice a row: the claims, their verdicts
MINUTE = 60 * 10**9
START = 1_796_000_400 * 10**9  # 2026-11-30, on a whole hour


def good_answer(n: int) -> str:
    return f"River {n} is {n * 100} km long."


BAD_ANSWER = "The moon is made of green cheese."


def rag_traces(
    provider: Any,
    count: int,
    *,
    start: int = START,
    step: int = MINUTE,
    bad_from: int | None = None,
    first: int = 0,
) -> list[str]:
    """`count` traces numbered from `first`, trace n starting at start + n * step, each
    retrieving its own document (so no two rows share a judgment); from trace `bad_from`
    on the answers are unfaithful. Returns their trace ids (hex), in order."""
    from opentelemetry.trace import set_span_in_context

    tracer = provider.get_tracer("tests.monitor")
    ids = []
    for n in range(first, first + count):
        t = start + n * step
        root = tracer.start_span("RAG", start_time=t)
        root.set_attribute(KIND, "CHAIN")
        root.set_attribute("input.value", f"How long is river {n}?")
        child = tracer.start_span("retrieve", context=set_span_in_context(root), start_time=t)
        child.set_attribute(KIND, "RETRIEVER")
        prefix = "retrieval.documents.0.document"
        child.set_attribute(f"{prefix}.id", f"r{n}")
        child.set_attribute(
            f"{prefix}.content", f"Document {n} says river {n} is {n * 100} km long."
        )
        child.set_attribute(f"{prefix}.score", 1.0)
        child.end(end_time=t + 10**6)
        bad = bad_from is not None and n >= bad_from
        root.set_attribute("output.value", BAD_ANSWER if bad else good_answer(n))
        root.end(end_time=t + 2 * 10**6)
        ids.append(format(root.get_span_context().trace_id, "032x"))
    return ids


def no_retriever_trace(provider: Any, start: int = START) -> str:
    """A trace without a retriever span: no row (no_retriever)."""
    tracer = provider.get_tracer("tests.monitor")
    root = tracer.start_span("RAG", start_time=start)
    root.set_attribute(KIND, "CHAIN")
    root.set_attribute("input.value", "Hello?")
    root.set_attribute("output.value", "Hi.")
    root.end(end_time=start + 10**6)
    return format(root.get_span_context().trace_id, "032x")


@contextmanager
def serving(config: Any, **options: Any) -> Iterator[tuple[Any, str]]:
    """A `Monitor` serving on a loopback port in a thread of its own: (monitor, base URL);
    stopped as SIGTERM stops it when the block ends."""
    from judge.monitor.monitor import Monitor

    monitor = Monitor(config)
    ready = threading.Event()
    bound: dict[str, int] = {}
    failed: list[BaseException] = []

    def on_ready(port: int | None) -> None:
        bound["port"] = int(port or 0)
        ready.set()

    def run() -> None:
        try:
            asyncio.run(monitor.aserve(host="127.0.0.1", port=0, on_ready=on_ready, **options))
        except BaseException as exc:  # said by the test, not lost in the thread
            failed.append(exc)
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(30), "the monitor did not start"
    assert not failed, failed
    try:
        yield monitor, f"http://127.0.0.1:{bound['port']}"
    finally:
        monitor.request_stop()
        thread.join(60)
        monitor.close()
        assert not failed, failed


def post(
    url: str, body: bytes, content_type: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """POST a body; (status, headers, body) whatever the status."""
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": content_type, **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def wait_for(condition: Callable[[], bool], seconds: float = 60) -> None:
    """Wait until `condition()` holds; fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def state_counts(folder: Path) -> dict[str, int]:
    """The traces of a monitor state by status, read as another process reads it."""
    db = sqlite3.connect(f"file:{folder / 'monitor.sqlite'}?mode=ro", uri=True, timeout=30)
    try:
        return dict(db.execute("SELECT status, count(*) FROM traces GROUP BY status").fetchall())
    except sqlite3.OperationalError:  # not created yet
        return {}
    finally:
        db.close()


def judge_flags(server: Any, tmp: Path, model: str = "openai/fake-model") -> list[str]:
    """The judge flags of `judge monitor` (or `judge eval`) against the fake judge,
    faithfulness only."""
    return [
        "--model",
        model,
        "--api-base",
        server.base_url,
        "--api-key",
        "x",
        "--cache",
        str(tmp / "cache.sqlite"),
        "--metrics",
        "faithfulness",
    ]


def pinned_run(tmp: Path, server: Any, rows: int = 40) -> str:
    """A `judge eval` of `rows` faithful rows recorded in tmp/runs.sqlite and pinned with
    `judge runs baseline`; its id."""
    data = tmp / "gold.jsonl"
    with open(data, "w", encoding="utf-8") as f:
        for n in range(1000, 1000 + rows):  # not the traces' rows: nothing cached for them
            row = {
                "id": f"g{n}",
                "question": f"How long is river {n}?",
                "answer": good_answer(n),
                "contexts": [f"Document {n} says river {n} is {n * 100} km long."],
            }
            f.write(json.dumps(row) + "\n")
    runs = str(tmp / "runs.sqlite")
    done = run("eval", data, *judge_flags(server, tmp), "--out", tmp / "gold", "--runs", runs)
    assert done.returncode == 0, done.stderr
    done = run("runs", "list", "--json", "--runs", runs)
    [record] = json.loads(done.stdout)
    assert record["summary"]["faithfulness"]["mean"] == 1.0
    done = run("runs", "baseline", record["id"], "--runs", runs)
    assert done.returncode == 0, done.stderr
    return str(record["id"])


def traces_file(path: Path, make: Any) -> list[str]:
    """Write the traces `make(provider)` makes as the Collector's OTLP/JSON lines."""
    ids: list[str] = []
    bodies = export(lambda provider: ids.extend(make(provider)), batch=4)
    write_json_lines(bodies, path)
    return ids


def free_port() -> int:
    """A loopback port free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
