"""`python -m judge` for tests, a fork away: the client of tests/helpers/cli_zygote.py.

Hundreds of tests run `judge` as a user does, each a new interpreter that spends about a
second importing the command line and the openai client before doing a few milliseconds of
work: a third of the suite's CPU. `run_judge` asks a server that imported them once to fork
a child instead. The child is a process of its own as before (its own exit code, signals,
environment, working directory, and stdin/stdout/stderr pipes read to their end, so a
grandchild that keeps a pipe open is waited for as `subprocess.run` waits for it).

What a fork cannot change falls back to a new interpreter: an environment that differs in
what Python reads at start (`PYTHON*`, the locale), arguments `subprocess.run` takes that
are not handled here, a call while another thread holds the server, and every call when
JUDGE_TESTS_FRESH_CLI=1. Two servers take turns, so two runs compared byte for byte run
under different hash seeds, as two fresh interpreters would.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HEADER = struct.Struct("!I")
SERVER_SOURCE = Path(__file__).with_name("cli_zygote.py")
HANDLED = {"env", "cwd", "timeout", "input", "check"}
STARTUP_NAMES = ("LANG", "LC_ALL", "LC_CTYPE")


class Server:
    """One forking server: its process, the socket to it and the environment it started in."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self.environ = dict(os.environ)
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER_SOURCE.read_text(), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
        )
        theirs.close()
        self.socket = ours
        self.ready = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, block: bool) -> bool:
        """Whether the server has imported what it preloads (waiting for it if `block`)."""
        if not self.ready and (block or select.select([self.socket], [], [], 0)[0]):
            self.ready = self.receive()["ready"]
        return self.ready

    def starts_like(self, env: dict[str, str]) -> bool:
        """Whether a child with `env` would start as a new interpreter given `env` would."""
        names = {n for n in (*env, *self.environ) if n.startswith("PYTHON")}
        names.update(STARTUP_NAMES)
        return all(env.get(n) == self.environ.get(n) for n in names)

    def send(self, request: dict[str, Any], fds: list[int]) -> None:
        data = json.dumps(request).encode()
        message = HEADER.pack(len(data)) + data
        sent = socket.send_fds(self.socket, [message[:4096]], fds)
        self.socket.sendall(message[sent:])

    def receive(self) -> dict[str, Any]:
        header = self._exactly(HEADER.size)
        return json.loads(self._exactly(HEADER.unpack(header)[0]))

    def _exactly(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            more = self.socket.recv(size - len(data))
            if not more:
                raise RuntimeError(
                    "the forking judge server of tests/helpers/cli_fork.py died; "
                    "run with JUDGE_TESTS_FRESH_CLI=1 to see the failure without it"
                )
            data += more
        return data

    def close(self) -> None:
        self.socket.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_servers: list[Server] = []
_turn = 0
_lock = threading.Lock()


def start() -> None:
    """Start the servers (they import in the background), unless they run already.

    The second starts once the first is ready: two imports at once would slow the tests
    that run meanwhile twice as much.
    """
    if os.environ.get("JUDGE_TESTS_FRESH_CLI") == "1":
        return
    if not _servers:
        atexit.register(_close_all)
        _servers.append(Server())
    if len(_servers) == 1 and _servers[0].wait_ready(block=False):
        _servers.append(Server())
    for number, server in enumerate(_servers):
        if not server.alive():
            server.close()
            _servers[number] = Server()


def _server() -> Server:
    """The next ready server in turn (the first one, waited for, when none is ready yet)."""
    global _turn
    start()
    for _ in _servers:
        _turn = (_turn + 1) % len(_servers)
        if _servers[_turn].wait_ready(block=False):
            return _servers[_turn]
    _servers[0].wait_ready(block=True)
    return _servers[0]


def _close_all() -> None:
    for server in _servers:
        server.close()


def run_judge(
    args: Sequence[str], fresh: bool = False, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, "-m", "judge", *args], capture_output=True, text=True, ...)`.

    `fresh=True` starts a new interpreter, for a test of what a process has imported.
    """
    command = [sys.executable, "-m", "judge", *args]
    env = dict(kwargs["env"] if kwargs.get("env") is not None else os.environ)
    fresh = (
        fresh
        or os.environ.get("JUDGE_TESTS_FRESH_CLI") == "1"
        or set(kwargs) - HANDLED
        or not _lock.acquire(blocking=False)
    )
    if fresh:
        return subprocess.run(command, capture_output=True, text=True, **kwargs)
    try:
        server = _server()
        if not server.starts_like(env):
            return subprocess.run(command, capture_output=True, text=True, **kwargs)
        kwargs.pop("env", None)
        return _forked(server, command, env, **kwargs)
    finally:
        _lock.release()


def _forked(
    server: Server,
    command: list[str],
    env: dict[str, str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    input: str | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    stdin_read, stdin_write = os.pipe() if input is not None else (_inherited_stdin(), -1)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    request = {"argv": command[3:], "env": env, "cwd": os.fspath(cwd or os.getcwd())}
    server.send(request, [stdin_read, out_write, err_write])
    for fd in (stdin_read, out_write, err_write):
        os.close(fd)
    pid = server.receive()["pid"]
    deadline = None if timeout is None else time.monotonic() + timeout
    outputs: dict[int, bytearray] = {out_read: bytearray(), err_read: bytearray()}
    pending = (input or "").encode()
    with selectors.DefaultSelector() as selector:
        selector.register(out_read, selectors.EVENT_READ)
        selector.register(err_read, selectors.EVENT_READ)
        if stdin_write != -1:
            os.set_blocking(stdin_write, False)
            selector.register(stdin_write, selectors.EVENT_WRITE)
        while selector.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                os.kill(pid, signal.SIGKILL)
                server.receive()
                for fd in list(selector.get_map()):
                    selector.unregister(fd)
                    os.close(fd)
                raise subprocess.TimeoutExpired(
                    command, timeout, bytes(outputs[out_read]), bytes(outputs[err_read])
                )
            for key, _events in selector.select(left):
                fd = key.fd
                if fd == stdin_write:
                    try:
                        written = os.write(fd, pending[:65536]) if pending else 0
                    except BrokenPipeError:
                        written, pending = 0, b""
                    pending = pending[written:]
                    if not pending:
                        selector.unregister(fd)
                        os.close(fd)
                    continue
                chunk = os.read(fd, 65536)
                if chunk:
                    outputs[fd] += chunk
                else:
                    selector.unregister(fd)
                    os.close(fd)
    returncode = server.receive()["returncode"]
    done = subprocess.CompletedProcess(
        command, returncode, _text(outputs[out_read]), _text(outputs[err_read])
    )
    if check:
        done.check_returncode()
    return done


def _inherited_stdin() -> int:
    """A copy of this process's stdin, which `subprocess.run` would pass on."""
    try:
        return os.dup(0)
    except OSError:
        return os.open(os.devnull, os.O_RDONLY)


def _text(data: bytearray) -> str:
    """Bytes decoded as `subprocess.run(text=True)` decodes them (universal newlines)."""
    import io

    return io.TextIOWrapper(io.BytesIO(bytes(data)), newline=None).read()
