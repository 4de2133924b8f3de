"""A `python -m judge` that forks instead of starting: the server side of tests/helpers/cli.py.

Run as `python -c <this file's source> FD`: it imports what `judge` commands import (the
command line, the evaluation engine, the openai client: about a second of a fresh
interpreter's start), then serves requests from the Unix socket FD. A request is a JSON
object (argv, env, cwd) with three file descriptors (stdin, stdout, stderr); for each it
forks a child that takes those descriptors as 0, 1 and 2, the environment and the working
directory, and runs `judge` as `-m` would (runpy, `sys.path[0]` the working directory). The
server says when it is ready, then answers each request with the child's pid, and with its
exit code when it ends; or with "fresh" when the request's environment differs from the
server's in what Python reads at start (PYTHON*, the locale): a new interpreter must run it.

It reads no file of the project but `judge` itself, and exits when the socket closes.
"""

import atexit
import json
import os
import runpy
import socket
import struct
import sys
import threading
import time

# What a `judge` command imports on its way to work, not at start: a forked child finds
# them loaded. litellm is not among them: it reads the environment when imported.
import judge.experiments.experiment
import judge.llm.openai_http
import judge.run.evaluate  # noqa: F401  (loaded for the children)
from judge.cli.main import build_parser

build_parser()  # imports every command's module

STARTED_WITH = dict(os.environ)
PARENT = socket.socket(fileno=int(sys.argv[1]))
HEADER = struct.Struct("!I")


def send(message: dict) -> None:
    data = json.dumps(message).encode()
    PARENT.sendall(HEADER.pack(len(data)) + data)


def receive() -> tuple[dict, list[int]] | None:
    """The next request and its descriptors, or None when the socket closed."""
    data, fds, _flags, _address = socket.recv_fds(PARENT, 1 << 20, 3)
    if not data:
        return None
    (size,) = HEADER.unpack(data[: HEADER.size])
    body = data[HEADER.size :]
    while len(body) < size:
        more = PARENT.recv(size - len(body))
        if not more:
            return None
        body += more
    return json.loads(body), fds


def starts_like(env: dict[str, str]) -> bool:
    """Whether a child given `env` starts as a new interpreter given `env` would: the same
    variables Python reads at start (PYTHON*, the locale's) as this server had."""
    names = {n for n in (*env, *STARTED_WITH) if n.startswith("PYTHON")}
    names.update(("LANG", "LC_ALL", "LC_CTYPE"))
    return all(env.get(n) == STARTED_WITH.get(n) for n in names)


def become(request: dict, fds: list[int]) -> None:
    """In the child: take the request's descriptors, environment and folder, then run judge."""
    PARENT.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.path[0] = os.getcwd()  # as `python -m` sets it
    sys.argv = ["judge", *request["argv"]]
    try:
        runpy.run_module("judge", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = exit_code(stop.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    exit_now(code)


def exit_code(value: object) -> int:
    """The exit code the interpreter gives `SystemExit(value)`, printing it as it does."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def exit_now(code: int) -> None:
    """End as the interpreter ends a process, but for tearing down its modules.

    Non-daemon threads are joined, atexit functions run and stdout and stderr are flushed,
    as at any exit; then the process ends without freeing every object of every module the
    server imported, which takes a quarter of a second, longer than most commands run.
    """
    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter calls first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = 120  # as the interpreter exits when it cannot flush
    os._exit(code)


def serve() -> None:
    send({"ready": True})
    while True:
        received = receive()
        if received is None:
            return
        request, fds = received
        if not starts_like(request["env"]):
            for fd in fds:
                os.close(fd)
            send({"fresh": True})
            continue
        pid = os.fork()
        if pid == 0:
            become(request, fds)
        for fd in fds:
            os.close(fd)
        send({"pid": pid})
        _, status = os.waitpid(pid, 0)
        send({"returncode": os.waitstatus_to_exitcode(status)})


serve()
