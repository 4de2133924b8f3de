"""The page of `judge annotate`, served on loopback by aiohttp's web server.

Every request but the page's static assets needs the token the command printed in the
page's URL (`?token=`; the page sends it back in a header), so another local user or a web
page open in the same browser cannot read the rows or write labels. The page gets its data
as JSON and puts every text in with textContent, never as markup.
"""

from __future__ import annotations

import asyncio
import hmac
import signal
from collections.abc import Awaitable, Callable
from importlib import resources

from aiohttp import web

from judge.annotate.session import Annotation
from judge.errors import JudgeError

ASSETS = {"annotate.js": "text/javascript", "annotate.css": "text/css"}
TOKEN_HEADER = "X-Judge-Token"
# The page runs its own script and nothing else, and talks to this server alone.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",  # the token is in the page's URL
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def _asset(name: str) -> bytes:
    return (resources.files("judge.annotate") / "assets" / name).read_bytes()


def make_app(annotation: Annotation, token: str) -> web.Application:
    """The page's aiohttp application.

    Args:
        annotation: the rows and the labels file (opened).
        token: what every request must carry: `?token=` for the page, the
            X-Judge-Token header for its data.
    """

    def allowed(given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), token.encode())

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not request.path.startswith("/assets/"):
            given = request.headers.get(TOKEN_HEADER) or request.query.get("token")
            if not allowed(given):
                return web.Response(
                    status=403,
                    text="open the page at the URL judge annotate printed (with its token)\n",
                    headers=HEADERS,
                )
        response = await handler(request)
        response.headers.update(HEADERS)
        return response

    app = web.Application(middlewares=[guard], client_max_size=1 << 16)

    async def page(request: web.Request) -> web.Response:
        return web.Response(body=_asset("annotate.html"), content_type="text/html", charset="utf-8")

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in ASSETS:
            raise web.HTTPNotFound()
        return web.Response(body=_asset(name), content_type=ASSETS[name], charset="utf-8")

    async def state(request: web.Request) -> web.Response:
        return web.json_response(annotation.state())

    async def row(request: web.Request) -> web.Response:
        try:
            return web.json_response(annotation.row(int(request.match_info["position"])))
        except (ValueError, JudgeError) as exc:
            return web.json_response({"error": str(exc)}, status=404)

    async def label(request: web.Request) -> web.Response:
        try:
            body = await request.json()
            position = int(request.match_info["position"])
            claims = body.get("claims") or []
            if not isinstance(claims, list) or any(c not in (True, False, None) for c in claims):
                raise ValueError("claims must be a list of true, false or null")
            label = body.get("label")
            if isinstance(label, bool) or label not in (0, 1, None):
                raise ValueError("label must be 0, 1 or null")
            done = annotation.record(position, label=label, claims=claims)
        except (ValueError, AttributeError) as exc:
            return web.json_response({"error": f"{exc}"}, status=400)
        except JudgeError as exc:
            # The label was not kept (a full disk...): the page says so and keeps the row.
            return web.json_response({"error": f"{exc}"}, status=500)
        return web.json_response(done)

    app.router.add_get("/", page)
    app.router.add_get("/assets/{name}", asset)
    app.router.add_get("/api/state", state)
    app.router.add_get("/api/rows/{position}", row)
    app.router.add_post("/api/rows/{position}", label)
    return app


async def serve(
    annotation: Annotation, token: str, *, port: int, ready: Callable[[str], None]
) -> None:
    """Serve the page on 127.0.0.1 until SIGINT or SIGTERM.

    Args:
        annotation: the rows and the labels file (opened).
        token: the URL's token.
        port: the port; 0 for one the system picks.
        ready: called with the page's URL once it can be opened.
    """
    runner = web.AppRunner(make_app(annotation, token), access_log=None)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    try:
        site = web.TCPSite(runner, "127.0.0.1", port)
        try:
            await site.start()
        except OSError as exc:
            raise JudgeError(
                f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}; give another "
                "--port, or 0 for any free one"
            ) from None
        bound = int(runner.addresses[0][1])
        ready(f"http://127.0.0.1:{bound}/?token={token}")
        await stop.wait()
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)
        await runner.cleanup()
