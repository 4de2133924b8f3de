"""Where a run's finished rows are in its spill file is kept on disk (`RowOffsets`), not in
memory: read back as set, whatever order the rows finished in, and removed with the run's
result (or, after a kill, by the next run over the folder)."""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from judge.run import checkpoint as checkpoint_module
from judge.run.checkpoint import RowFile, RowOffsets
from judge.run.output_folder import remove_debris
from tests.helpers.memory import peak_bytes


@pytest.mark.parametrize("held", [1, 5, 1 << 13])
def test_offsets_set_in_any_order_are_read_back_by_row(monkeypatch, tmp_path, held):
    monkeypatch.setattr(checkpoint_module, "OFFSETS_HELD", held)
    size = 1_000
    values = [random.Random(held).randrange(2**40) for _ in range(size)]
    order = list(range(size))
    # mostly in order, as rows finish: shuffled within windows of 40, a few far apart
    for start in range(0, size, 40):
        window = order[start : start + 40]
        random.Random(start).shuffle(window)
        order[start : start + 40] = window
    order[10], order[900] = order[900], order[10]
    offsets = RowOffsets(size, temporary_dir=tmp_path)
    for number in order:
        offsets[number] = values[number]
    assert len(offsets) == size
    assert list(offsets) == values
    assert [offsets[i] for i in (0, 10, 900, 999, -1, -size)] == [
        values[0],
        values[10],
        values[900],
        values[999],
        values[-1],
        values[0],
    ]
    assert offsets[3:7] == values[3:7]
    offsets[5] = 7  # set again: the later offset
    assert offsets[5] == 7 and list(offsets)[4:7] == [values[4], 7, values[6]]
    with pytest.raises(IndexError):
        offsets[size] = 1
    with pytest.raises(IndexError):
        offsets[size]


def test_offsets_of_many_rows_are_not_held_in_memory(tmp_path):
    size = 200_000  # an array of their offsets is 1.6 MB

    def fill() -> None:
        offsets = RowOffsets(size, temporary_dir=tmp_path)
        for number in range(size):
            offsets[number] = number * 100
        assert sum(1 for _ in offsets) == size

    # the offsets held before a write (16 bytes each), flush's sorted copies, a chunk read
    assert peak_bytes(fill) < 2**19


def test_a_row_file_keeps_the_offsets_file_it_is_given(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"row": 0}\n{"row": 1}\n')
    offsets = RowOffsets(200_000, temporary_dir=tmp_path)
    for number in range(200_000):
        offsets[number] = 11 * (number % 2)
    assert peak_bytes(lambda: RowFile(path, offsets)) < 2**16  # not copied into an array
    rows = RowFile(path, offsets)
    assert [rows[0].row, rows[1].row, rows[-1].row] == [0, 1, 1]


def test_a_run_keeps_its_offsets_beside_its_checkpoint_until_its_result_is_gone(tmp_path):
    from judge.run.evaluate import evaluate

    rows = [
        {"question": "q", "retrieved_ids": ["a", "b"], "relevance": {"b": 1}, "id": str(i)}
        for i in range(30)
    ]
    result = evaluate(
        rows, metrics=["mrr"], checkpoint=tmp_path / "ck.jsonl", progress=False, concurrency=4
    )
    files = list(tmp_path.glob(".judge-rows-*.offsets"))
    assert len(files) == 1 and files[0].stat().st_size == 30 * 8
    assert [r.id for r in result.rows] == [str(i) for i in range(30)]
    assert result.rows[7].scores == {"mrr": 0.5}
    del result
    gc.collect()
    assert not list(tmp_path.glob(".judge-rows-*.offsets"))


def test_the_offsets_file_of_a_killed_run_is_removed_by_the_next(tmp_path):
    killed = (
        "import os, sys\n"
        "from judge.run.checkpoint import RowOffsets\n"
        "offsets = RowOffsets(10, temporary_dir=sys.argv[1])\n"
        "offsets[3] = 5\n"
        "offsets.flush()\n"
        "os._exit(0)\n"  # no clean-up, as when killed
    )
    subprocess.run([sys.executable, "-c", killed, str(tmp_path)], check=True)
    left = list(tmp_path.glob(".judge-rows-*.offsets"))
    assert len(left) == 1
    assert remove_debris(tmp_path) == left and not left[0].exists()


def test_results_kept_alive_hold_no_open_file_each(tmp_path):
    def open_files() -> int:
        return len(list(Path("/proc/self/fd").iterdir()))

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("counts open files from /proc")
    before = open_files()
    kept = []
    for _ in range(50):  # a caller may keep many results: ulimit -n is often 1024
        offsets = RowOffsets(3, temporary_dir=tmp_path)
        offsets[1] = 9
        assert offsets[1] == 9
        kept.append(offsets)
    assert open_files() == before


def test_a_result_whose_folder_was_removed_says_so_when_its_rows_are_read(tmp_path):
    import shutil

    from judge.errors import OutputError
    from judge.run.evaluate import evaluate

    rows = [
        {"question": "q", "retrieved_ids": ["a", "b"], "relevance": {"b": 1}, "id": str(i)}
        for i in range(30)
    ]
    folder = tmp_path / "out"
    result = evaluate(rows, metrics=["mrr"], checkpoint=folder / "ck.jsonl", progress=False)
    shutil.rmtree(folder)  # the offsets not yet written out: the first read writes them
    assert len(result.rows) == 30  # kept in memory
    for read in (
        lambda: result.rows[4],  # the offsets file's write, then its read
        lambda: result.rows[5],
        lambda: list(result.rows),  # the rows file's
        lambda: list(result.rows.json_lines()),
        result.to_pandas,
    ):
        with pytest.raises(OutputError, match=r"removed while .* keep that folder") as raised:
            read()
        assert str(folder) in str(raised.value)


def test_a_run_that_fails_removes_its_files_at_once(tmp_path, fake_llm_server):
    import judge
    from judge.errors import LLMConfigError
    from judge.testing import heuristic_judge
    from judge.testing.server import Fault

    fake_llm_server.chat = heuristic_judge
    fake_llm_server.fail_next(Fault.status(401))  # the key refused: the run stops
    llm = judge.LLM("openai/m", api_base=fake_llm_server.base_url, api_key="k", max_retries=0)
    rows = [{"question": f"q{i}?", "answer": "A is b.", "contexts": ["A is b."]} for i in range(9)]
    gc.disable()  # the failure's reference cycles are not collected before the check
    try:
        with pytest.raises(LLMConfigError):
            judge.evaluate(
                rows,
                metrics=["faithfulness"],
                llm=llm,
                checkpoint=tmp_path / "ck.jsonl",
                progress=False,
                concurrency=2,
            )
        # no result holds them: the spill and offsets files (made as the run starts) went
        # with it; the checkpoint, if a row finished, stays
        assert not list(tmp_path.glob(".judge-rows-*"))
        assert {p.name for p in tmp_path.iterdir()} <= {"ck.jsonl"}
    finally:
        gc.enable()


def test_a_python_run_removes_what_a_killed_run_left_beside_its_checkpoint(tmp_path):
    from judge.run.evaluate import evaluate

    killed = (
        "import os, sys\n"
        "from judge.run.checkpoint import Checkpoint, RowOffsets\n"
        "spill = Checkpoint(None, 'f' * 64, temporary_dir=sys.argv[1])\n"
        "offsets = RowOffsets(10, temporary_dir=sys.argv[1])\n"
        "os._exit(0)\n"  # no clean-up, as when killed
    )
    subprocess.run([sys.executable, "-c", killed, str(tmp_path)], check=True)
    assert len(list(tmp_path.glob(".judge-rows-*"))) == 2
    rows = [{"question": "q", "retrieved_ids": ["a"], "relevance": {"a": 1}} for _ in range(3)]
    result = evaluate(rows, metrics=["mrr"], checkpoint=tmp_path / "ck.jsonl", progress=False)
    # the rerun's own two files, not the killed run's
    left = list(tmp_path.glob(".judge-rows-*"))
    assert len(left) == 2 and all(f"-{os.getpid()}-" in p.name for p in left)
    assert [r.scores["mrr"] for r in result.rows] == [1.0, 1.0, 1.0]


def test_an_offset_never_set_is_an_error_not_row_zeros_line(tmp_path):
    """The file is sparse: a record never written reads as 0 bytes, which is where row 0's
    line starts, so a row whose offset was lost would have shown row 0's result."""
    offsets = RowOffsets(3, temporary_dir=tmp_path)
    offsets[0], offsets[2] = 0, 120
    assert offsets.at(0) == 0 and offsets.at(2) == 120
    with pytest.raises(LookupError, match="row 1"):
        offsets.at(1)
    with pytest.raises(LookupError, match="row 1"):
        list(offsets)
    offsets[1] = 57
    assert list(offsets) == [0, 57, 120]


def test_a_checkpoints_finished_rows_are_found_without_a_dict_entry_each(tmp_path):
    """A resume held a dict entry per finished row, keyed by its row number and 64-digit
    input hash (about 250 bytes a row: +21 MiB resuming 87,000 rows of a 100,000-row
    replay); the rows' numbers and offsets take 16 bytes a row (about 60 while they are
    sorted)."""
    from judge.run.checkpoint import Checkpoint

    path = tmp_path / ".checkpoint.jsonl"
    rows = 20_000
    with open(path, "wb") as out:
        for n in range(rows):
            out.write(b'{"input": "%064x", "result": {}, "row": %d, "run": "fp"}\n' % (n, n))
        out.write(b'{"input": "%064x", "result": {}, "row": 7, "run": "other"}\n' % 1)
    store = Checkpoint(path, "fp")
    assert peak_bytes(store.load) < 80 * rows
    done = store.load()
    assert done.offset(0) == 0 and done.offset(rows - 1) is not None
    assert done.offset(rows) is None and len(done) == rows


# A process that ran judge.evaluate without a checkpoint and ended with its result alive,
# its clean-up skipped (as a notebook's kernel killed, or kill -9): what a result reads is
# left in the system's temporary folder.
_ENDED_HOLDING_A_RESULT = (
    "import os, sys\n"
    "from judge.run.evaluate import evaluate\n"
    "rows = [{'question': 'q', 'retrieved_ids': ['a'], 'relevance': {'a': 1}}] * 3\n"
    "result = evaluate(rows, metrics=['mrr'], progress=False)\n"
    "print('ready', flush=True)\n"
    "if sys.argv[1:] == ['wait']:\n"
    "    sys.stdin.readline()\n"
    "os._exit(0)\n"
)


def test_a_run_without_checkpoint_removes_what_ended_processes_left_in_the_shared_temp(
    tmp_path, monkeypatch
):
    import tempfile

    from judge.run.evaluate import evaluate

    shared = tmp_path / "tmp"
    shared.mkdir()
    env = {**os.environ, "TMPDIR": str(shared)}
    subprocess.run([sys.executable, "-c", _ENDED_HOLDING_A_RESULT], env=env, check=True)
    ended = set(shared.glob(".judge-rows-*"))
    assert len(ended) == 2  # its rows and their offsets
    # A process that is still alive, with its result: its files must stay.
    alive = subprocess.Popen(
        [sys.executable, "-c", _ENDED_HOLDING_A_RESULT, "wait"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert alive.stdout is not None and alive.stdout.readline() == "ready\n"
        theirs = set(shared.glob(".judge-rows-*")) - ended
        assert len(theirs) == 2
        # A file of a process this one cannot tell about (no mark: an older judge, another
        # machine on a shared folder): left, since a process id alone says nothing here.
        unmarked = shared / ".judge-rows-1-0badcafe-x.jsonl"
        unmarked.write_text("")
        monkeypatch.setattr(tempfile, "tempdir", str(shared))
        rows = [{"question": "q", "retrieved_ids": ["a"], "relevance": {"a": 1}}]
        result = evaluate(rows, metrics=["mrr"], progress=False)
        assert [r.scores["mrr"] for r in result.rows] == [1.0]
        left = set(shared.glob(".judge-rows-*"))
        assert not ended & left  # the ended process's files are gone
        assert theirs <= left and unmarked in left
    finally:
        assert alive.stdin is not None
        alive.stdin.write("\n")
        alive.stdin.close()
        alive.wait(timeout=30)


def test_a_process_that_exits_leaves_neither_files_nor_its_live_mark_in_the_shared_temp(
    tmp_path,
):
    shared = tmp_path / "tmp"
    shared.mkdir()
    ends = _ENDED_HOLDING_A_RESULT.replace("os._exit(0)", "sys.exit(0)")
    env = {**os.environ, "TMPDIR": str(shared)}
    subprocess.run([sys.executable, "-c", ends], env=env, check=True, capture_output=True)
    assert list(shared.iterdir()) == []


def test_the_sweep_of_the_shared_temp_follows_no_link_anyone_could_have_put_there(tmp_path):
    from judge.run.output_folder import sweep_shared_folder

    shared = tmp_path / "tmp"
    shared.mkdir()
    victim = tmp_path / "notes.txt"  # a file of the user's, outside the temporary folder
    victim.write_text("keep me\n")
    # In /tmp anyone may name a "mark" after a process that seems to have ended: a link
    # to the user's file. Locking it through the link (as an output folder's lock is
    # taken: opened to append, then rewritten with the holder's id) would empty the file.
    (shared / ".judge-live-4242-0badcafe").symlink_to(victim)
    debris = shared / ".judge-rows-4242-0badcafe-a.jsonl"
    debris.write_text("")
    # A dead process's real mark, with a "debris" link to the user's file beside it.
    subprocess.run(
        [sys.executable, "-c", _ENDED_HOLDING_A_RESULT],
        check=True,
        env={**os.environ, "TMPDIR": str(shared)},
        capture_output=True,
    )
    (mark,) = [m for m in shared.glob(".judge-live-*") if not m.is_symlink()]
    owner = mark.name.removeprefix(".judge-live-")
    link = shared / f".judge-rows-{owner}-b.jsonl"
    link.symlink_to(victim)
    removed = sweep_shared_folder(shared)
    assert victim.read_text() == "keep me\n"
    assert debris.exists()  # its "mark" is a link: nothing tells whether it ended
    assert link.is_symlink() and link not in removed  # only regular files are removed
    assert len(removed) == 2 and not mark.exists()  # the ended process's two files
