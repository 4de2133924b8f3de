"""`judge eval --processes N`: the shard processes stop when their parent is gone.

The parent is killed the ways `timeout`, a CI cancel and the OOM killer kill it (SIGTERM,
SIGKILL) while its shards are judging against a slow fake server; then no shard may be left
running, send a request, or write into OUT/.shards.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge.testing import heuristic_judge
from tests.helpers.shards import eval_args, write_data

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals and sessions of POSIX")


def session_members(session: int) -> list[int]:
    """The live (not zombie) processes of a session: the parent and every shard it spawned."""
    if not Path("/proc/self/stat").exists():  # no /proc: ask whether the group has anyone
        try:
            os.killpg(session, 0)
        except ProcessLookupError:
            return []
        return [session]
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces, so split after ")"
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[3]) == session:
            members.append(int(entry.name))
    return members


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def shard_files(out: Path) -> list[tuple[str, int, int]]:
    """(path, size, mtime) of everything under OUT/.shards."""
    root = out / ".shards"
    if not root.exists():
        return []
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    )


def start_judging(tmp_path: Path, server) -> tuple[subprocess.Popen[str], Path]:
    """A `judge eval --processes 2` of many rows against a slow server, in a session of its
    own, once both shards are sending requests."""
    server.chat = heuristic_judge
    server.latency = 0.2  # each request takes a while: the run is far from done when killed
    data = write_data(tmp_path / "d.jsonl", 400)
    out = tmp_path / "out"
    args = eval_args(data, server.base_url, tmp_path / "c.sqlite", out, "--processes", 2)
    parent = subprocess.Popen(
        [sys.executable, "-m", "judge", *map(str, args), "--concurrency", "4"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the shards share its session: found (and cleaned up) by it
    )
    try:
        assert wait_for(lambda: len(session_members(parent.pid)) >= 3, 60), "no shards started"
        # Both shards judging: more requests than one shard's concurrency have arrived.
        assert wait_for(lambda: server.count() > 8, 60), parent.stderr
    except BaseException:
        stop_session(parent.pid)
        raise
    return parent, out


def stop_session(session: int) -> None:
    """Kill whatever is left of a session (so a failing test leaves nothing running)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(session, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_shards_stop_with_their_parent(tmp_path, fake_llm_server, signum):
    parent, out = start_judging(tmp_path, fake_llm_server)
    try:
        parent.send_signal(signum)
        parent.wait(timeout=30)
        # No shard is left: each ended with its parent, not when its rows were done.
        gone = wait_for(lambda: not session_members(parent.pid), 5)
        assert gone, f"shards still running after the parent: {session_members(parent.pid)}"
        time.sleep(1)  # requests sent just before the end have arrived
        requests, files = fake_llm_server.count(), shard_files(out)
        time.sleep(2)
        assert fake_llm_server.count() == requests  # no request after the parent is gone
        assert shard_files(out) == files  # and nothing written into OUT/.shards
    finally:
        stop_session(parent.pid)
    stderr = parent.stderr.read() if parent.stderr else ""
    assert parent.returncode != 0
    if signum == signal.SIGTERM:
        # The parent stops its shards itself, says so and what to do, without a traceback.
        assert "Traceback" not in stderr, stderr
        assert "stopping the shards" in stderr and "rerun the same command to resume" in stderr
        assert parent.returncode == 143  # 128 + SIGTERM, as judge's exit codes document
        # The shards were stopped, not cut off: their spill files went with them.
        assert not [f for f, _, _ in shard_files(out) if ".judge-rows-" in f]


def _watched_child(lifeline, ready) -> None:
    """A child that only watches its parent's pipe (no prctl), then would sleep a minute."""
    from judge.run.processes import exit_when_closed

    exit_when_closed(lifeline)
    ready.send("watching")
    time.sleep(60)


def test_a_shard_notices_its_parents_pipe_close_without_prctl():
    # The portable check, on its own: the pipe from the parent reports EOF once every copy
    # of the parent's end is closed, as when the parent dies, and the child then exits.
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    hear, say = context.Pipe(duplex=False)
    child = context.Process(target=_watched_child, args=(receiver, say), daemon=True)
    child.start()
    receiver.close()
    say.close()
    try:
        assert hear.poll(60) and hear.recv() == "watching"
        time.sleep(0.5)
        assert child.is_alive()  # the pipe is open: it keeps working
        sender.close()
        child.join(timeout=10)
        assert child.exitcode is not None, "the child did not notice its parent's pipe close"
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_a_shard_whose_parent_is_already_gone_stops_at_once(tmp_path):
    # The race prctl leaves: the parent died before the child asked to die with it. The
    # child then has another parent than the one that started it, and must not run a row.
    code = (
        "import sys; from judge.run.processes import die_with_parent; "
        "die_with_parent(int(sys.argv[1])); print('ran on')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "1"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "ran on" not in done.stdout
    mine = subprocess.run(
        [sys.executable, "-c", code, str(os.getpid())], capture_output=True, text=True, timeout=60
    )
    assert mine.returncode == 0 and "ran on" in mine.stdout, mine.stderr
