"""Client throughput: judged requests per second one process sustains at zero latency.

The client is `LLMSession.chat` (a pydantic schema, structured output, retries, usage,
cache), as every judge uses it, with --concurrency requests in flight. Each request is
distinct (its own user message), so with the cache on the first pass misses (the request
is sent and its judgment written) and the second pass hits (nothing is sent).

Routes: `openai/` (judge's own JSON POST over aiohttp, `judge.llm.openai_http`) and a
litellm route (`hosted_vllm/`, which goes through litellm.acompletion to the same
OpenAI-compatible server). The server runs in a process
of its own, so it does not share the client's interpreter lock:
- `fake`: `judge.testing.FakeLLMServer` (threaded stdlib HTTP server, answering a fixed
  judgment);
- `minimal`: a few lines of asyncio answering every POST with one canned completion, to
  tell whether the fake server is the bottleneck (if the client is faster against it).

Printed per route, server and cache: requests per second, microseconds per request (wall
and the client's CPU), requests the server received. `--profile` adds a cProfile top-15
(by own time) of each combination. Goal (issue 14): at least 1,000 requests per second
with the openai route and the cache on. `--replay-rows N` also runs bench/speed/replay_100k.py
with N rows (the replay time and peak memory of a fully cached `judge eval`).

Run: python -m bench.speed.client_throughput [--requests 3000] [--concurrency 32]
     [--servers fake,minimal] [--routes openai,litellm] [--profile] [--replay-rows 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from judge.cache.store import Cache
from judge.llm.config import LLM, PromptRef
from judge.llm.session import LLMSession

ROUTES = {"openai": "openai/bench-judge", "litellm": "hosted_vllm/bench-judge"}
REPLY = json.dumps({"verdict": "supported", "reason": "The context states it."})
PROMPT = PromptRef("bench", "0" * 16)
SYSTEM = "You check one claim against the contexts and answer in JSON. " * 8


class Verdict(BaseModel):
    """The judgment every request asks for."""

    verdict: Literal["supported", "contradicted", "not_found"]
    reason: str


# Each server prints its base URL, serves until stdin closes, then prints its CPU seconds.
FAKE_SERVER = f"""
import resource, sys
from judge.testing import FakeLLMServer
with FakeLLMServer(chat=lambda body: {REPLY!r}) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
    print(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), flush=True)
"""
MINIMAL_SERVER = f"""
import asyncio, json, resource, sys
BODY = json.dumps({{
    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "bench-judge",
    "choices": [{{"index": 0, "finish_reason": "stop", "logprobs": None,
                 "message": {{"role": "assistant", "content": {REPLY!r}}}}}],
    "usage": {{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}},
}}).encode()
HEAD = (b"HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\ncontent-length: "
        + str(len(BODY)).encode() + b"\\r\\n\\r\\n")

async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\\r\\n\\r\\n")
            length = 0
            for line in head.split(b"\\r\\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            writer.write(HEAD + BODY)
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()
    except asyncio.CancelledError:  # the loop ends with keep-alive connections still open
        writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=512)
    print(f"http://127.0.0.1:{{server.sockets[0].getsockname()[1]}}/v1", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    print(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), flush=True)

asyncio.run(main())
"""
SERVERS = {"fake": FAKE_SERVER, "minimal": MINIMAL_SERVER}


class Server:
    """A server in its own process; `cpu()` stops it and returns its CPU seconds."""

    def __init__(self, kind: str):
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVERS[kind]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        self.requests = 0  # counted by the client: what it sent

    def cpu(self) -> float:
        """Stop the server; its CPU seconds (user + system)."""
        out, _ = self.process.communicate("")
        return float(out.strip() or "nan")


def messages(i: int) -> list[dict[str, str]]:
    """Request i: a system prompt of ~500 characters and a user message of its own."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Contexts: [1] Item {i} is made in Lyon.\nClaim: item {i}."},
    ]


async def run_pass(session: LLMSession, count: int, concurrency: int) -> None:
    """count distinct requests through session.chat, concurrency at a time."""
    pending = iter(range(count))

    async def worker() -> None:
        for i in pending:
            replies = await session.chat(messages(i), Verdict, prompt=PROMPT, label="bench")
            assert replies[0].verdict == "supported"

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def measure(
    session: LLMSession, count: int, concurrency: int, profile: bool
) -> tuple[float, float, str]:
    """(wall seconds, client CPU seconds, cProfile top-15 or "") of one pass, in a fresh loop
    (the session rebinds its clients to it; the litellm import is done before)."""
    profiler = cProfile.Profile() if profile else None
    start, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()

    async def one_pass() -> None:
        try:
            await run_pass(session, count, concurrency)
        finally:
            await session.aclose()

    asyncio.run(one_pass())
    if profiler:
        profiler.disable()
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    top = ""
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
        top = text.getvalue()
    return wall, used, top


def warm_up(route: str, url: str) -> None:
    """Import the route's client and open its connections outside the measurement."""
    session = LLMSession(LLM(model=route, api_base=url, api_key="x", max_concurrency=8))
    measure(session, 16, 8, profile=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--servers", default="fake,minimal")
    parser.add_argument("--routes", default="openai,litellm")
    parser.add_argument("--profile", action="store_true", help="a cProfile top-15 per line")
    parser.add_argument("--replay-rows", type=int, default=0, help="also run replay_100k.py")
    args = parser.parse_args()
    lines = []
    header = (
        f"{'route':<8} {'server':<8} {'cache':<10} {'req/s':>7} {'us/req':>7} "
        f"{'client CPU us/req':>17} {'sent':>6}"
    )
    profiles = []
    for kind in args.servers.split(","):
        for name in args.routes.split(","):
            server = Server(kind)
            try:
                warm_up(ROUTES[name], server.url)
                llm = LLM(
                    model=ROUTES[name],
                    api_base=server.url,
                    api_key="x",
                    max_concurrency=args.concurrency,
                )
                with tempfile.TemporaryDirectory() as tmp:
                    cache = Cache(Path(tmp) / "cache.sqlite")
                    cases = [
                        ("off", LLMSession(llm)),
                        ("on, miss", LLMSession(llm, cache=cache)),
                        ("on, hit", LLMSession(llm, cache=cache)),
                    ]
                    for label, session in cases:
                        wall, cpu, top = measure(
                            session, args.requests, args.concurrency, args.profile
                        )
                        sent = session.usage.total().requests
                        lines.append(
                            f"{name:<8} {kind:<8} {label:<10} {args.requests / wall:>7,.0f} "
                            f"{wall / args.requests * 1e6:>7,.0f} "
                            f"{cpu / args.requests * 1e6:>17,.0f} {sent:>6}"
                        )
                        print(lines[-1], file=sys.stderr, flush=True)
                        if top:
                            profiles.append(f"== {name} / {kind} / cache {label}\n{top}")
                    cache.close()
            finally:
                server_cpu = server.cpu()
            lines.append(f"{'':<8} {kind:<8} server CPU {server_cpu:.1f} s over the three passes")
    print(
        f"{args.requests:,} distinct requests per pass, {args.concurrency} in flight, zero "
        "latency; one client process, the server in another"
    )
    print(header)
    print("\n".join(lines))
    for top in profiles:
        print(top)
    if args.replay_rows:
        replay = [sys.executable, "-m", "bench.speed.replay_100k", "--rows", str(args.replay_rows)]
        subprocess.run(replay, cwd=Path(__file__).resolve().parents[2], check=True)


if __name__ == "__main__":
    main()
