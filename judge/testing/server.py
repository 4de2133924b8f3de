"""A fake OpenAI-compatible HTTP server on 127.0.0.1 for tests, with scripted answers and faults.

Real clients (`openai`, `litellm`) talk to it over real HTTP, so retries, timeouts and error
mapping are exercised as in production, without network access or API keys. Stdlib only:
importing this module loads neither openai, litellm nor pytest.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import random
import struct
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import SHUT_RDWR, socket
from types import TracebackType
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

from judge.testing.replies import (
    FakeHTTPError,
    error_body,
    hashed_embeddings,
    message_text,
    schema_example,
    schema_in_text,
)

CHAT_PATH = "/v1/chat/completions"
EMBED_PATH = "/v1/embeddings"
MALFORMED_CONTENT = '{"claims": ["a", '
LLAMA_CPP_REJECTION = "Input should be 'text' or 'json_object'"
_SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key"})


@dataclass(frozen=True)
class Reply:
    """One assistant answer, with optional finish reason and token counts."""

    content: str
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


ChatHandler: TypeAlias = Callable[[dict[str, Any]], str | Reply | list[str | Reply]]
EmbedHandler: TypeAlias = Callable[[list[str]], list[list[float]]]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received; secret header values are replaced by "<redacted>"."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]


FaultKind = Literal["status", "delay", "malformed", "truncated", "broken_body", "disconnect"]


@dataclass(frozen=True)
class Fault:
    """A misbehaviour for one request, made by the class methods; malformed/truncated: chat only."""

    kind: FaultKind
    code: int = 200
    message: str = ""
    retry_after: float | None = None
    seconds: float = 0.0

    @classmethod
    def status(
        cls, code: int, message: str = "fake error", retry_after: float | None = None
    ) -> Fault:
        """Answer with HTTP `code`, an OpenAI-style error body and optional Retry-After."""
        return cls("status", code=code, message=message, retry_after=retry_after)

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        """Wait `seconds` before answering normally (to exceed a client timeout)."""
        return cls("delay", seconds=seconds)

    @classmethod
    def malformed(cls) -> Fault:
        """Answer 200 with assistant content that is not valid JSON."""
        return cls("malformed")

    @classmethod
    def truncated(cls) -> Fault:
        """Answer 200 with the content cut in half and finish_reason "length"."""
        return cls("truncated")

    @classmethod
    def broken_body(cls) -> Fault:
        """Answer 200 with a body that is not JSON at all."""
        return cls("broken_body")

    @classmethod
    def disconnect(cls) -> Fault:
        """Close the connection without sending a response."""
        return cls("disconnect")


def _tokens(text: str) -> int:
    """Estimate a token count as one token per four characters."""
    return math.ceil(len(text) / 4)


def _normalise(path: str) -> str:
    """Map "/chat/completions" and "/v1/chat/completions/" to "/v1/chat/completions"."""
    path = "/" + urlsplit(path).path.strip("/")
    return path if path == "/v1" or path.startswith("/v1/") else "/v1" + path


class _Server(ThreadingHTTPServer):
    """The HTTP server, with a back-reference to its FakeLLMServer."""

    daemon_threads = True
    request_queue_size = 128  # benchmarks send many concurrent requests
    fake: FakeLLMServer


class _Handler(BaseHTTPRequestHandler):
    """Routes one HTTP request to the FakeLLMServer."""

    protocol_version = "HTTP/1.1"  # keep-alive, as real clients expect from an API server
    disable_nagle_algorithm = True  # headers and body go out separately: avoid 40 ms stalls
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.fake._track(self.connection, add=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Stay silent: test output should not fill with access logs."""

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        """Record the request, apply a pending fault, and answer."""
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        route = _normalise(self.path)
        fault = fake._record(method, urlsplit(self.path).path, body, dict(self.headers.items()))
        stop = fake._stopping
        if fault is not None and fault.kind == "delay" and stop.wait(fault.seconds):
            return self._drop()
        if (fake.latency and stop.wait(fake.latency)) or (fault and fault.kind == "disconnect"):
            return self._drop()
        if fault is not None and fault.kind == "broken_body":
            return self._send(200, b"<html>502 Bad Gateway, or is it?", {})
        try:
            if fault is not None and fault.kind == "status":
                raise FakeHTTPError(fault.code, fault.message)
            if raw and body is None:
                raise FakeHTTPError(400, "request body is not valid JSON")
            payload = fake._answer(method, route, body, fault)
            status = 200
        except FakeHTTPError as exc:
            status, payload = exc.status, exc.payload
        except Exception as exc:  # a user handler's bug must reach the test as a readable 500
            status, payload = 500, error_body(500, f"fake server handler raised {exc!r}")
        headers = {}
        if fault is not None and fault.retry_after is not None:
            seconds = fault.retry_after
            headers["Retry-After"] = str(int(seconds)) if seconds == int(seconds) else str(seconds)
        self._send(status, json.dumps(payload).encode(), headers)

    def _send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        """Write a complete response with a JSON content type."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (e.g. timed out) before the answer was ready
            self.close_connection = True

    def _drop(self) -> None:
        """Close the connection without a response."""
        self.close_connection = True


class FakeLLMServer:
    """An OpenAI-compatible chat and embeddings server on 127.0.0.1 with scripted faults."""

    def __init__(
        self,
        chat: ChatHandler | None = None,
        embed: EmbedHandler | None = None,
        *,
        model: str = "fake-model",
    ):
        self.chat = chat
        self.embed: EmbedHandler = embed or hashed_embeddings
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.reject_response_format: set[str] = set()
        self.latency = 0.0
        self._faults: dict[str, deque[Fault]] = {}
        self._chaos: list[tuple[float, Fault]] = []
        self._chaos_random = random.Random(0)
        self.faults_injected: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket] = set()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, "http://127.0.0.1:<port>/v1"."""
        if self._httpd is None:
            raise RuntimeError("FakeLLMServer is not started; call start() or use `with`")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FakeLLMServer:
        """Listen on a free port of 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is None:
            self._stopping.clear()
            self._httpd = _Server(("127.0.0.1", 0), _Handler)
            self._httpd.fake = self
            # A short poll interval lets stop() return quickly.
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, args=(0.05,), name="fake-llm", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, waking delayed handlers and closing idle keep-alive connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def count(self, path: str | None = None) -> int:
        """Count the requests received, all or those to `path` (e.g. "/v1/chat/completions")."""
        with self._lock:
            if path is None:
                return len(self.requests)
            return sum(_normalise(r.path) == _normalise(path) for r in self.requests)

    def reset(self) -> None:
        """Forget recorded requests, pending faults and random faults."""
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self._chaos = []
            self.faults_injected.clear()

    def fail_next(self, *faults: Fault, path: str = CHAT_PATH) -> None:
        """Queue faults for the next requests to `path`, one fault per request."""
        with self._lock:
            self._faults.setdefault(_normalise(path), deque()).extend(faults)

    def chaos(self, faults: list[tuple[Fault, float]], *, seed: int = 0) -> None:
        """Inject faults at random into chat requests: each (fault, probability), seeded.

        Queued faults (`fail_next`) still come first; `faults_injected` counts what was
        injected, by kind and status code.
        """
        cumulative, table = 0.0, []
        for fault, probability in faults:
            cumulative += probability
            table.append((cumulative, fault))
        if cumulative > 1.0:
            raise ValueError("fault probabilities add up to more than 1")
        with self._lock:
            self._chaos = table
            self._chaos_random = random.Random(seed)
            self.faults_injected.clear()

    @staticmethod
    def schema_echo(body: dict[str, Any]) -> str:
        """A ChatHandler answering a minimal JSON object valid for the requested schema."""
        fmt = body.get("response_format") or {}
        schema = fmt.get("json_schema", {}).get("schema") if isinstance(fmt, dict) else None
        if not isinstance(schema, dict):
            messages = body.get("messages") or []
            texts = (
                message_text(m.get("content")) for m in reversed(messages) if isinstance(m, dict)
            )
            schema = next((s for s in map(schema_in_text, texts) if s is not None), None)
        return json.dumps(schema_example(schema, schema) if schema else {})

    def _track(self, conn: socket, *, add: bool) -> None:
        """Remember open connections so stop() can close them."""
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _record(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Fault | None:
        """Record a request and pop the fault queued for its path, if any."""
        clean = {k.lower(): v for k, v in headers.items()}
        clean.update({k: "<redacted>" for k in _SECRET_HEADERS & clean.keys()})
        with self._lock:
            self.requests.append(RecordedRequest(method, path, body, clean))
            queue = self._faults.get(_normalise(path))
            if queue:
                return queue.popleft()
            if self._chaos and _normalise(path) == CHAT_PATH:
                draw = self._chaos_random.random()
                for threshold, fault in self._chaos:
                    if draw < threshold:
                        self.faults_injected[fault.kind + str(fault.code)] += 1
                        return fault
            return None

    def _answer(self, method: str, route: str, body: Any, fault: Fault | None) -> dict[str, Any]:
        """Build the JSON payload of a successful response, or raise FakeHTTPError."""
        if method == "GET" and route == "/v1/models":
            return {"object": "list", "data": [self._model_card(self.model)]}
        if method == "GET" and route.startswith("/v1/models/"):
            return self._model_card(route.removeprefix("/v1/models/"))
        if method == "POST" and route in (CHAT_PATH, EMBED_PATH):
            if not isinstance(body, dict):
                raise FakeHTTPError(400, "request body must be a JSON object")
            if route == CHAT_PATH:
                return self._chat(body, fault)
            return self._embeddings(body)
        raise FakeHTTPError(404, f"fake server has no route {method} {route}")

    @staticmethod
    def _model_card(model: str) -> dict[str, Any]:
        """Describe one model as /v1/models does."""
        return {"id": model, "object": "model", "created": 0, "owned_by": "judge.testing"}

    def _chat(self, body: dict[str, Any], fault: Fault | None) -> dict[str, Any]:
        """Answer a chat completion request with the chat handler's replies."""
        if body.get("stream"):
            raise FakeHTTPError(400, "the fake server does not support stream=true")
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") in self.reject_response_format:
            error = {"code": 500, "message": LLAMA_CPP_REJECTION, "type": "server_error"}
            raise FakeHTTPError(500, LLAMA_CPP_REJECTION, {"error": error})
        if self.chat is None:
            raise FakeHTTPError(
                500, "no chat handler set: pass chat= to FakeLLMServer or set .chat"
            )
        n = int(body.get("n") or 1)
        answers = [self.chat(body)]
        if not isinstance(answers[0], list):
            # A handler answering one item at a time is called once per requested choice.
            answers += [self.chat(body) for _ in range(n - 1)]
        replies = [_as_reply(a) for x in answers for a in (x if isinstance(x, list) else [x])]
        if fault is not None and fault.kind == "malformed":
            replies = [Reply(MALFORMED_CONTENT) for _ in replies]
        elif fault is not None and fault.kind == "truncated":
            replies = [Reply(r.content[: len(r.content) // 2], "length") for r in replies]
        messages = body.get("messages") or []
        prompt = sum(
            _tokens(message_text(m.get("content"))) for m in messages if isinstance(m, dict)
        )
        prompt = next((r.prompt_tokens for r in replies if r.prompt_tokens is not None), prompt)
        completion = sum(
            _tokens(r.content) if r.completion_tokens is None else r.completion_tokens
            for r in replies
        )
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": r.content},
                "finish_reason": r.finish_reason,
                "logprobs": None,
            }
            for i, r in enumerate(replies)
        ]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
            "system_fingerprint": "fp_judge_testing",
        }

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answer an embeddings request, as floats or as base64 float32 (the openai default)."""
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise FakeHTTPError(400, "input must be a non-empty string or list of strings")
        vectors = self.embed(texts)
        if len(vectors) != len(texts):
            raise FakeHTTPError(
                500, f"embed handler returned {len(vectors)} vectors for {len(texts)}"
            )
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": _base64_floats(v) if as_base64 else [float(x) for x in v],
            }
            for i, v in enumerate(vectors)
        ]
        tokens = sum(_tokens(t) for t in texts)
        return {
            "object": "list",
            "data": data,
            "model": body.get("model") or self.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _as_reply(answer: str | Reply) -> Reply:
    """Wrap a plain string answer in a Reply."""
    return answer if isinstance(answer, Reply) else Reply(str(answer))


def _base64_floats(vector: list[float]) -> str:
    """Encode a vector as base64 of little-endian float32, as the OpenAI API does."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def make_fixture() -> Any:
    """Build the `fake_llm_server` pytest fixture; pytest is imported only here, on first use."""
    import pytest

    @pytest.fixture
    def fake_llm_server() -> Iterator[FakeLLMServer]:
        """Yield a started FakeLLMServer; stop it after the test."""
        with FakeLLMServer() as server:
            yield server

    return fake_llm_server
