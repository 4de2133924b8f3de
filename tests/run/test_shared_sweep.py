"""Attacks on the sweep of the shared temporary folder (judge.run.output_folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from judge.run import output_folder
from judge.run.output_folder import remove_debris, sweep_shared_folder, temporary_prefix

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no sweep on Windows")

_SWEEP = (
    "import sys\n"
    "from pathlib import Path\n"
    "from judge.run.output_folder import sweep_shared_folder\n"
    "print(len(sweep_shared_folder(Path(sys.argv[1]))))\n"
)

# Holds a lock on the mark given, as a live judge process does (with this kernel's boot
# id in it), until stdin closes.
_HOLDER = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "boot = '/proc/sys/kernel/random/boot_id'\n"
    "os.write(fd, (open(boot).read() if os.path.exists(boot) else '\\n').encode())\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
)


def test_a_fifo_named_as_a_mark_does_not_hang_the_sweep(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    # Anyone may put a FIFO in /tmp named as a mark: opening it to read waits for a writer.
    os.mkfifo(shared / ".judge-live-4242-0badcafe")
    (shared / ".judge-rows-4242-0badcafe-a.jsonl").write_text("")
    done = subprocess.run(
        [sys.executable, "-c", _SWEEP, str(shared)], capture_output=True, text=True, timeout=10
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "0\n"  # nothing tells whether 4242 ended: its file is left
    assert (shared / ".judge-rows-4242-0badcafe-a.jsonl").exists()


def test_a_mark_is_never_seen_before_it_is_locked(tmp_path, monkeypatch):
    shared = tmp_path / "tmp"
    shared.mkdir()
    # This process's files from before its mark (a run with a checkpoint in this folder).
    mine = shared / f"{temporary_prefix('rows')}a.jsonl"
    mine.write_text("a row a result still reads\n")
    real = output_folder.fcntl
    swept = []

    def flock(fd: int, operation: int) -> None:
        # Another process sweeps just as this one has made its mark, before locking it.
        if not swept:
            swept.append(
                subprocess.run(
                    [sys.executable, "-c", _SWEEP, str(shared)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
        real.flock(fd, operation)

    monkeypatch.setattr(
        output_folder,
        "fcntl",
        types.SimpleNamespace(flock=flock, LOCK_EX=real.LOCK_EX, LOCK_NB=real.LOCK_NB),
    )
    sweep_shared_folder(shared)
    assert swept == ["0\n"]
    assert mine.read_text() == "a row a result still reads\n"
    # and the mark is in place, held: a later sweep leaves this process's files
    monkeypatch.setattr(output_folder, "fcntl", real)
    assert (shared / f".judge-live-{os.getpid()}-{mine.name.split('-')[3]}").exists()
    later = subprocess.run(
        [sys.executable, "-c", _SWEEP, str(shared)], capture_output=True, text=True, check=True
    )
    assert later.stdout == "0\n" and mine.exists()


def test_a_checkpoint_in_the_shared_temp_leaves_the_files_of_a_live_marked_process(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    # A process of another container (its id means nothing here) holding a result: its
    # mark is held. A run whose checkpoint is in this folder must not remove its files.
    pid = 4194000
    while pid > 1 and output_folder.process_alive(pid):
        pid -= 1
    mark = shared / f".judge-live-{pid}-0badcafe"
    theirs = shared / f".judge-rows-{pid}-0badcafe-a.jsonl"
    theirs.write_text("")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(mark)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        assert remove_debris(shared) == []
        assert theirs.exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    # once it has ended, its files go
    assert set(remove_debris(shared)) == {theirs}


def test_a_process_leaves_no_pending_mark_behind(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    code = (
        "import json\n"
        + _SWEEP
        + "print(json.dumps(sorted(p.name for p in Path(sys.argv[1]).iterdir())))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(shared)], check=True, capture_output=True, text=True
    )
    (mark,) = json.loads(done.stdout.splitlines()[1])  # while it lived: its mark alone
    assert mark.startswith(".judge-live-")
    assert list(shared.iterdir()) == []  # and nothing once it exited


_FORKS_HOLDING_A_RESULT = (
    "import os, sys\n"
    "from judge.run.evaluate import evaluate\n"
    "rows = [{'question': 'q', 'retrieved_ids': ['a'], 'relevance': {'a': 1}}] * 3\n"
    "result = evaluate(rows, metrics=['mrr'], progress=False)\n"
    "child = os.fork()\n"
    "if child == 0:\n"
    "    del result\n"  # a child dropping its copy, then exiting as a script does
    "    sys.exit(0)\n"
    "os.waitpid(child, 0)\n"
    "print([r.scores['mrr'] for r in result.rows])\n"
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_exiting_leaves_its_parents_result_readable(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _FORKS_HOLDING_A_RESULT],
        env={**os.environ, "TMPDIR": str(shared)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[1.0, 1.0, 1.0]\n"
    assert list(shared.iterdir()) == []  # the parent removed them when it exited


_FORK_KILLED_HOLDING_A_RESULT = (
    "import os, signal, sys\n"
    "from judge.run.evaluate import evaluate\n"
    "rows = [{'question': 'q', 'retrieved_ids': ['a'], 'relevance': {'a': 1}}] * 3\n"
    "result = evaluate(rows, metrics=['mrr'], progress=False)\n"
    "child = os.fork()\n"
    "if child == 0:\n"
    "    again = evaluate(rows, metrics=['mrr'], progress=False)\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "os.waitpid(child, 0)\n"
    "print(child, flush=True)\n"
    "sys.stdin.readline()\n"
    "print([r.scores['mrr'] for r in result.rows])\n"
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_the_files_of_a_killed_forked_child_are_swept_and_its_parents_kept(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c", _FORK_KILLED_HOLDING_A_RESULT],
        env={**os.environ, "TMPDIR": str(shared)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None and parent.stdin is not None
    child = int(parent.stdout.readline())
    childs = set(shared.glob(f".judge-rows-{child}-*"))
    assert len(childs) == 2  # its result's rows and offsets, left by kill -9
    sweep = subprocess.run(
        [sys.executable, "-c", _SWEEP, str(shared)], capture_output=True, text=True, check=True
    )
    parent.stdin.write("\n")
    parent.stdin.close()
    assert parent.stdout.readline() == "[1.0, 1.0, 1.0]\n"  # the parent's are kept
    assert parent.wait(timeout=30) == 0
    assert sweep.stdout == "2\n" and not childs & set(shared.iterdir())


_HOLDS_A_CHECKPOINTED_RESULT = (
    "import os, sys, tempfile\n"
    "from judge.run.evaluate import evaluate\n"
    "rows = [{'question': 'q', 'retrieved_ids': ['a'], 'relevance': {'a': 1}}] * 3\n"
    "checkpoint = os.path.join(tempfile.gettempdir(), 'theirs.jsonl')\n"
    "result = evaluate(rows, metrics=['mrr'], progress=False, checkpoint=checkpoint)\n"
    "os.remove(checkpoint)\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "print([r.scores['mrr'] for r in result.rows], flush=True)\n"
)


def test_a_checkpoint_in_the_shared_temp_marks_its_process_alive(tmp_path, monkeypatch):
    import tempfile

    from judge.run.evaluate import evaluate

    shared = tmp_path / "tmp"
    shared.mkdir()
    # A process of another container keeps a result whose files are beside its
    # checkpoint, in the temporary folder both share.
    theirs = subprocess.Popen(
        [sys.executable, "-c", _HOLDS_A_CHECKPOINTED_RESULT],
        env={**os.environ, "TMPDIR": str(shared)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert theirs.stdout is not None and theirs.stdout.readline() == "ready\n"
        # This process runs with a checkpoint there too; its process ids name none of
        # the other container's processes.
        monkeypatch.setattr(output_folder, "process_alive", lambda pid: False)
        monkeypatch.setattr(tempfile, "tempdir", str(shared))
        rows = [{"question": "q", "retrieved_ids": ["a"], "relevance": {"a": 1}}]
        mine = evaluate(rows, metrics=["mrr"], progress=False, checkpoint=shared / "mine.jsonl")
        assert [r.scores["mrr"] for r in mine.rows] == [1.0]
        assert theirs.stdin is not None
        theirs.stdin.write("\n")
        theirs.stdin.flush()
        assert theirs.stdout.readline() == "[1.0, 1.0, 1.0]\n"
    finally:
        assert theirs.stdin is not None
        theirs.stdin.close()
        theirs.wait(timeout=30)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to chown")
def test_debris_removal_touches_only_this_users_files(tmp_path):
    # Run as root (a container's user), with a checkpoint in the shared /tmp: the files
    # of another user's process there are not this run's to remove, whatever its id says.
    pid = 4194000
    while pid > 1 and output_folder.process_alive(pid):
        pid -= 1
    theirs = tmp_path / f".judge-rows-{pid}-0badcafe-a.jsonl"
    theirs.write_text("")
    os.chown(theirs, 65534, 65534)
    ended = tmp_path / f".judge-rows-{pid}-0badcafe-b.jsonl"
    ended.write_text("")
    assert remove_debris(tmp_path) == [ended]
    assert theirs.exists()


def test_debris_named_after_an_impossible_process_id_does_not_crash_the_run(tmp_path):
    # Anyone may name a file so in /tmp (or a shared output folder): no process has the id.
    impossible = tmp_path / ".judge-rows-99999999999999999999-0badcafe-a.jsonl"
    impossible.write_text("")
    assert remove_debris(tmp_path) == [impossible]
    assert sweep_shared_folder(tmp_path) == []


def test_a_mark_made_under_another_kernel_is_never_taken_for_an_ended_process(tmp_path):
    # A temporary folder shared between machines (NFS): another machine's locks are not
    # seen here, so its live processes' marks look free. A mark says which kernel made it
    # (Linux's boot id); only this kernel's marks are judged by their lock.
    shared = tmp_path / "tmp"
    shared.mkdir()
    mark = shared / ".judge-live-4242-0badcafe"
    mark.write_text("00000000-0000-0000-0000-000000000000\n")  # another machine's kernel
    debris = shared / ".judge-rows-4242-0badcafe-a.jsonl"
    debris.write_text("")
    assert sweep_shared_folder(shared) == []
    assert debris.exists() and mark.exists()
    assert remove_debris(shared) == [] and debris.exists()
    # The same files under this kernel's boot id: an ended process's, removed.
    boot = "/proc/sys/kernel/random/boot_id"
    if not os.path.exists(boot):
        pytest.skip("no boot id to compare")
    with open(boot) as f:
        mark.write_text(f.read())
    again = subprocess.run(
        [sys.executable, "-c", _SWEEP, str(shared)], capture_output=True, text=True, check=True
    )
    assert again.stdout.strip() == "1" and not debris.exists() and not mark.exists()


def test_the_sweep_opens_only_the_marks_it_lists(tmp_path, monkeypatch):
    # Anyone can fill /tmp with names of judge's files and no mark: nothing tells whether
    # their processes ended, so they are left, without a look at a mark for each (a run
    # paid 1.2 s for 100,000 of them).
    shared = tmp_path / "tmp"
    shared.mkdir()
    for n in range(200):
        (shared / f".judge-rows-{5000 + n}-{n:08x}-a.jsonl").write_text("")
    (shared / "other").write_text("")
    ended = shared / ".judge-rows-4242-0badcafe-a.jsonl"
    ended.write_text("")
    boot = "/proc/sys/kernel/random/boot_id"
    with open(boot) if os.path.exists(boot) else open(os.devnull) as kernel:
        (shared / ".judge-live-4242-0badcafe").write_text(kernel.read())
    looked = []
    real = output_folder._ended_mark
    monkeypatch.setattr(
        output_folder, "_ended_mark", lambda path: looked.append(path) or real(path)
    )
    removed = sweep_shared_folder(shared)
    assert looked == [shared / ".judge-live-4242-0badcafe"]
    assert removed == ([ended] if os.path.exists(boot) else [])
    assert len(list(shared.glob(".judge-rows-5*"))) == 200  # (left: nothing tells)


_CHILD_WITH_AN_ENDED_CHILDS_ID = (
    "import os, sys\n"
    "from judge.run.evaluate import evaluate\n"
    "from judge.run.output_folder import temporary_prefix\n"
    "token = temporary_prefix('rows').split('-')[3]\n"
    "boot = '/proc/sys/kernel/random/boot_id'\n"
    "child = os.fork()\n"
    "if child == 0:\n"
    "    # What an earlier child with this id, killed, left: its mark and a file.\n"
    "    folder, pid = sys.argv[1], os.getpid()\n"
    "    with open(f'{folder}/.judge-live-{pid}-{token}', 'w') as mark:\n"
    "        mark.write(open(boot).read() if os.path.exists(boot) else '')\n"
    "    open(f'{folder}/.judge-rows-{pid}-{token}-x.jsonl', 'w').close()\n"
    "    print(token != temporary_prefix('rows').split('-')[3], flush=True)\n"
    "    rows = [{'question': 'q', 'retrieved_ids': ['a'], 'relevance': {'a': 1}}]\n"
    "    evaluate(rows, metrics=['mrr'], progress=False)\n"
    "    sys.exit(0)\n"
    "os.waitpid(child, 0)\n"
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_has_a_token_of_its_own(tmp_path):
    # Children shared their parent's token: one given the id of an earlier child that was
    # killed took its mark and files for its own, and they were never swept.
    shared = tmp_path / "tmp"
    shared.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD_WITH_AN_ENDED_CHILDS_ID, str(shared)],
        env={**os.environ, "TMPDIR": str(shared)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"  # another token than its parent's
    assert list(shared.iterdir()) == []  # the ended child's mark and file swept
