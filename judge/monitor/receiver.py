"""The OTLP/HTTP receiver of `judge monitor --listen`, on aiohttp's web server.

As the OTLP specification's OTLP/HTTP section says: `POST /v1/traces` with a protobuf
(`application/x-protobuf`) or JSON (`application/json`) `ExportTraceServiceRequest`,
optionally gzip-compressed (`Content-Encoding: gzip`, undone by aiohttp); success is 200
with an `ExportTraceServiceResponse` in the request's encoding, whose `partial_success`
counts the spans refused (malformed ids) and says why; a body that is no request is 400
with a `google.rpc.Status`; a full queue is 503 with `Retry-After`, which exporters retry.
A request is answered 200 only once its spans are committed to the state: an exporter's
retry after a crash never loses them, and a span read twice is kept once.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from judge.errors import InputFormatError
from judge.lines import max_line_bytes
from judge.traces.otlp import NESTED, EncodedSpan, encoded_spans_of_protobuf, spans_of_json
from judge.traces.spans import Span

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
RETRY_AFTER_SECONDS = 1  # what a full queue asks exporters to wait


@dataclass
class Received:
    """One accepted request waiting for its commit: its spans, those refused, and the
    future its handler awaits."""

    spans: Sequence[Span | EncodedSpan]
    rejected: int
    done: asyncio.Future[None] = field(repr=False)


def _status(code: int, message: str, protobuf: bool) -> tuple[bytes, str]:
    """A `google.rpc.Status` body (OTLP's error body) in the request's encoding."""
    if protobuf:
        try:
            from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
        except ImportError:  # googleapis-common-protos absent: the status code says it all
            return b"", PROTOBUF
        return Status(code=code, message=message).SerializeToString(), PROTOBUF
    return json.dumps({"code": code, "message": message}).encode(), JSON


def _success(rejected: list[str], protobuf: bool) -> tuple[bytes, str]:
    """An `ExportTraceServiceResponse`, with `partial_success` when spans were refused."""
    message = "; ".join(dict.fromkeys(rejected))[:1000] if rejected else ""
    if protobuf:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTracePartialSuccess,
            ExportTraceServiceResponse,
        )

        response = ExportTraceServiceResponse()
        if rejected:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=len(rejected), error_message=message)
            )
        return response.SerializeToString(), PROTOBUF
    body: dict[str, Any] = {}
    if rejected:
        body["partialSuccess"] = {"rejectedSpans": len(rejected), "errorMessage": message}
    return json.dumps(body).encode(), JSON


def parse_request(body: bytes, content_type: str) -> tuple[Sequence[Span | EncodedSpan], list[str]]:
    """The spans of one OTLP/HTTP request body and why each refused span was refused;
    those of a protobuf body are kept encoded (the state stores them so, and decodes them
    once, when their trace is complete).

    Raises:
        InputFormatError: the body is no `ExportTraceServiceRequest`.
    """
    rejected: list[str] = []
    if content_type == PROTOBUF:
        return encoded_spans_of_protobuf(body, rejected), rejected
    try:
        request = json.loads(body)
    except RecursionError:
        raise InputFormatError(NESTED) from None
    except ValueError as exc:
        raise InputFormatError(f"not JSON ({exc})") from None
    return spans_of_json(request, rejected=rejected), rejected


def make_app(
    queue: asyncio.Queue[Received],
    *,
    token: str | None = None,
    health: Callable[[], Awaitable[dict[str, Any]]] | None = None,
) -> web.Application:
    """The receiver's aiohttp application.

    Args:
        queue: where accepted requests go, bounded: when it is full the request is answered
            503 with Retry-After; a request is answered 200 once its `done` is set.
        token: when given, requests must carry `Authorization: Bearer TOKEN` (else 401);
            /healthz stays open.
        health: what GET /healthz reports (JSON).
    """
    app = web.Application(client_max_size=max_line_bytes())

    async def traces(request: web.Request) -> web.Response:
        content_type = request.content_type
        protobuf = content_type == PROTOBUF
        if token is not None:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                body, kind = _status(16, "a bearer token is required (Authorization)", protobuf)
                return web.Response(
                    status=401,
                    body=body,
                    content_type=kind,
                    headers={"WWW-Authenticate": 'Bearer realm="judge monitor"'},
                )
        if content_type not in (PROTOBUF, JSON):
            body, kind = _status(
                3, f"Content-Type {content_type!r}: send {PROTOBUF} or {JSON}", protobuf
            )
            return web.Response(status=415, body=body, content_type=kind)
        try:
            data = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise
        except Exception as exc:  # a gzip body that does not decompress
            body, kind = _status(3, f"the body cannot be read ({exc})", protobuf)
            return web.Response(status=400, body=body, content_type=kind)
        try:
            spans, rejected = parse_request(data, content_type)
        except InputFormatError as exc:
            body, kind = _status(3, f"not an OTLP trace request: {exc}", protobuf)
            return web.Response(status=400, body=body, content_type=kind)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            queue.put_nowait(Received(spans, len(rejected), done))
        except asyncio.QueueFull:
            body, kind = _status(14, "the monitor's queue is full: retry later", protobuf)
            return web.Response(
                status=503,
                body=body,
                content_type=kind,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        try:
            await done
        except Exception as exc:  # the state could not be written: the exporter retries
            body, kind = _status(14, f"the spans could not be kept ({exc})", protobuf)
            return web.Response(
                status=503,
                body=body,
                content_type=kind,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        body, kind = _success(rejected, protobuf)
        return web.Response(status=200, body=body, content_type=kind)

    async def healthz(request: web.Request) -> web.Response:
        report = await health() if health is not None else {}
        return web.json_response({"status": "ok", **report})

    app.router.add_post("/v1/traces", traces)
    app.router.add_get("/healthz", healthz)
    return app


async def listen(runner: web.AppRunner, host: str, port: int, *, tries: int = 5) -> None:
    """Serve `runner` on every address `host` names, on `port`: with 0, the port the system
    chose for the first address is taken on the others too (each would get a port of its
    own, and only one is said), tried again with another when one of them has it taken.

    Args:
        runner: the app's runner, set up.
        host: a name or address (a name can stand for several, localhost for ::1 and
            127.0.0.1).
        port: the port, or 0 for one the system chooses.
        tries: how many ports chosen by the system are tried at most.
    """
    if port != 0 or not host:  # "": every interface, as asyncio's create_server takes it
        await web.TCPSite(runner, host, port).start()
        return
    loop = asyncio.get_running_loop()
    found = await loop.getaddrinfo(host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if len(addresses) < 2:
        await web.TCPSite(runner, host, 0).start()
        return
    for attempt in range(tries):
        first = web.TCPSite(runner, addresses[0], 0)
        await first.start()
        chosen = int(runner.addresses[-1][1])
        started = [first]
        try:
            for address in addresses[1:]:
                site = web.TCPSite(runner, address, chosen)
                await site.start()
                started.append(site)
            return
        except OSError:  # that port taken on another address: all again, on another
            for site in started:
                await site.stop()
            if attempt == tries - 1:
                raise
