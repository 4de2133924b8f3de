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
import contextlib
import functools
import json
import os
import select
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

HEADER = struct.Struct("!I")
SERVER_SOURCE = Path(__file__).with_name("cli_zygote.py")
HANDLED = {"env", "cwd", "timeout", "input", "check"}


class Server:
    """One forking server: its process, the socket to it and the environment it started in."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
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
        forked = _forked(_server(), command, env, **{k: v for k, v in kwargs.items() if k != "env"})
    finally:
        _lock.release()
    return forked or subprocess.run(command, capture_output=True, text=True, **kwargs)


def _forked(
    server: Server,
    command: list[str],
    env: dict[str, str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    input: str | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str] | None:
    """The run of `command` in a child of `server`; None if it must run in a new one."""
    stdin_read, stdin_write = os.pipe() if input is not None else (_inherited_stdin(), -1)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    request = {"argv": command[3:], "env": env, "cwd": os.fspath(cwd or os.getcwd())}
    server.send(request, [stdin_read, out_write, err_write])
    for fd in (stdin_read, out_write, err_write):
        os.close(fd)
    answer = server.receive()
    if "pid" not in answer:  # a new interpreter must run it
        for fd in (stdin_write, out_read, err_read):
            if fd != -1:
                os.close(fd)
        return None
    pid = answer["pid"]
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


SHIM = """#!{python} -IS
# `judge` for the shell blocks of the docs: asks the forking server on descriptor
# $JUDGE_TESTS_FORK_FD to run it with this process's stdin, stdout, stderr, environment and
# folder, and exits as the child did; without that server, the real `judge` runs.
import fcntl, json, os, signal, socket, struct, sys

REAL = {real!r}
fd = os.environ.pop("JUDGE_TESTS_FORK_FD", None)
lock = os.environ.pop("JUDGE_TESTS_FORK_LOCK", None)
if fd is None:
    os.execv(REAL, [REAL, *sys.argv[1:]])
HEADER = struct.Struct("!I")
server = socket.socket(fileno=int(fd))


def receive():
    data = b""
    while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack(data[:4])[0]:
        more = server.recv(65536)
        if not more:
            sys.exit("judge: the forking server of the tests closed")
        data += more
    return json.loads(data[HEADER.size:])


with open(lock, "w") as held:
    fcntl.flock(held, fcntl.LOCK_EX)  # one conversation with the server at a time
    request = json.dumps(dict(argv=sys.argv[1:], env=dict(os.environ), cwd=os.getcwd())).encode()
    message = HEADER.pack(len(request)) + request
    sent = socket.send_fds(server, [message[:4096]], [0, 1, 2])
    server.sendall(message[sent:])
    answer = receive()
    if "pid" not in answer:
        os.execv(REAL, [REAL, *sys.argv[1:]])
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda n, _f, pid=answer["pid"]: os.kill(pid, n))
    code = receive()["returncode"]
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


@functools.cache
def _shim_folder() -> Path:
    """A folder of this process's own holding the `judge` of SHIM."""
    folder = Path(tempfile.mkdtemp(prefix="judge-tests-shim-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    real = Path(sys.executable).with_name("judge")
    (folder / "judge").write_text(SHIM.format(python=sys.executable, real=str(real)))
    (folder / "judge").chmod(0o755)
    return folder


@contextlib.contextmanager
def judge_forked_in_shells() -> Iterator[tuple[dict[str, str], list[int]]]:
    """What a shell needs for its `judge` to be forked from a warm server: environment
    entries (PATH first) and the descriptors to pass, while the server is this caller's."""
    if os.environ.get("JUDGE_TESTS_FRESH_CLI") == "1":
        yield {}, []
        return
    folder = _shim_folder()
    with _lock:
        server = _server()
        fd = server.socket.fileno()
        yield (
            {
                "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}",
                "JUDGE_TESTS_FORK_FD": str(fd),
                "JUDGE_TESTS_FORK_LOCK": str(folder / "judge.lock"),
            },
            [fd],
        )
