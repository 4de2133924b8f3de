"""A run's exit code tells the truth, and its output folder holds one whole run.

Unreadable rows and a strict replay's misses fail the run; expected failures (a file in
the way of --out, a read-only or full disk, another run on the folder) exit 2 with one
line; a bug exits 70; outputs are published whole, with a hash that readers check; spill
and temporary files do not outlive the run, and those of killed runs are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from judge.cli.main import EXIT_INTERNAL, EXIT_TERMINATED, main
from judge.comparison.evaluations import compare
from judge.errors import InputFormatError
from judge.testing import heuristic_judge
from tests.helpers.cli import run as run_judge

ROOT = Path(__file__).resolve().parents[2]


def run(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return run_judge(*map(str, args), timeout=120, **kwargs)


def patched(tmp_path: Path, code: str) -> dict[str, str]:
    """An environment whose judge processes first run `code` (a sitecustomize module):
    how a test makes the disk fill up or the process die at a chosen moment."""
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(textwrap.dedent(code), encoding="utf-8")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT)])}


def write_rows(path: Path, n: int, start: int = 0) -> Path:
    rows = [
        {
            "id": f"s{i}",
            "question": f"Who made tool {i}?",
            "answer": f"Ann made tool {i}.",
            "contexts": [f"Tool {i} was made by Ann."],
            "ground_truth": f"Ann made tool {i}.",
        }
        for i in range(start, start + n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def eval_args(data: Path, url: str, tmp: Path, out: Path, *extra: object) -> list[object]:
    return [
        "eval",
        data,
        "--model",
        "openai/judge",
        "--api-base",
        url,
        "--api-key",
        "k",
        "--metrics",
        "faithfulness",
        "--cache",
        tmp / "cache.sqlite",
        "--out",
        out,
        "--no-progress",
        *extra,
    ]


def one_line_error(done: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("judge: error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def debris(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".judge-"))


# --- exit codes -------------------------------------------------------------------------


def test_unreadable_rows_fail_the_run_and_are_listed(tmp_path, fake_llm_server):
    """A CSV whose contexts cells are plain strings makes those rows input errors: that
    run used to print a table of dashes and exit 0. When no row at all can be read, the
    run is refused before any request (exit 2), as --dry-run calls it unusable."""
    fake_llm_server.chat = heuristic_judge
    data = tmp_path / "rows.csv"
    bad = (
        "Who made X?,Ann made X.,Ann made X.\n"
        "Who made Y?,Bob made Y.,\"['Bob made Y.', 'Y is old.']\"\n"
    )
    data.write_text("question,answer,contexts\n" + bad, encoding="utf-8")
    done = run(*eval_args(data, fake_llm_server.base_url, tmp_path, tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert "no row can be read" in done.stderr
    assert "row 0: " in done.stderr and "row 1: " in done.stderr
    assert fake_llm_server.count() == 0
    good = 'Who made Z?,Cy made Z.,"[""Cy made Z.""]"\n'
    data.write_text("question,answer,contexts\n" + bad + good, encoding="utf-8")
    done = run(*eval_args(data, fake_llm_server.base_url, tmp_path, tmp_path / "out"))
    assert done.returncode == 3, done.stderr
    assert "2 of 3 rows could not be read" in done.stderr
    assert "row 0: " in done.stderr and "row 1: " in done.stderr
    assert "FAILED unreadable rows" in done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["unreadable_rows"] == {"rows": 2, "failed": True}
    # Within --max-error-rate they are still named on stderr, and the run passes.
    write_rows(tmp_path / "good.jsonl", 3)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        (tmp_path / "good.jsonl").read_text() + json.dumps({"answer": "no question"}) + "\n"
    )
    done = run(
        *eval_args(mixed, fake_llm_server.base_url, tmp_path, tmp_path / "o2"),
        "--max-error-rate",
        "0.5",
    )
    assert done.returncode == 0, done.stderr
    assert "1 of 4 rows could not be read" in done.stderr and "row 3: " in done.stderr


def test_a_replay_that_misses_fails_whatever_the_error_rate(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    url = fake_llm_server.base_url
    recorded = write_rows(tmp_path / "a.jsonl", 40)
    assert run(*eval_args(recorded, url, tmp_path, tmp_path / "rec")).returncode == 0
    one_more = write_rows(tmp_path / "b.jsonl", 41)  # row 40 was never judged
    before = fake_llm_server.count()
    for rate in ("0.05", "1"):
        done = run(
            *eval_args(one_more, url, tmp_path, tmp_path / f"rep{rate}", "--replay"),
            "--max-error-rate",
            rate,
        )
        assert done.returncode == 3, (rate, done.stderr)
        assert "FAILED replay" in done.stderr and "row 40" in done.stderr
    assert fake_llm_server.count() == before  # a replay sends nothing
    done = run(*eval_args(recorded, url, tmp_path, tmp_path / "full", "--replay"))
    assert done.returncode == 0, done.stderr


def test_out_naming_a_file_is_a_usage_error(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = write_rows(tmp_path / "d.jsonl", 2)
    (tmp_path / "taken").write_text("mine\n")
    line = one_line_error(
        run(*eval_args(data, fake_llm_server.base_url, tmp_path, tmp_path / "taken"))
    )
    assert "is a file, not a folder" in line
    assert (tmp_path / "taken").read_text() == "mine\n"
    assert fake_llm_server.count() == 0


def test_a_bug_exits_70_and_says_how_to_report_it(tmp_path, monkeypatch, capsys):
    import judge.cli.ir as ir_command

    def broken(args: object) -> int:
        raise RuntimeError("something judge did not expect")

    monkeypatch.setattr(ir_command, "run_ir", broken)  # read when the parser is built
    assert main(["ir", str(tmp_path / "q"), str(tmp_path / "r")]) == EXIT_INTERNAL == 70
    err = capsys.readouterr().err
    assert "RuntimeError: something judge did not expect" in err  # the traceback
    assert "this is a bug in judge" in err and "please report it" in err


# --- disks that say no ------------------------------------------------------------------


@contextlib.contextmanager
def small_disk(tmp_path: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of `size` (read-only if asked), where this machine lets the tests mount one
    (root in a sandbox that allows it); else the test is skipped (its injected-error twin
    still runs)."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    options = f"size={size}" + (",ro" if read_only else "")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip()})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_read_only_output_disk_exits_2_with_one_line(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = write_rows(tmp_path / "d.jsonl", 2)
    with small_disk(tmp_path, "1m", read_only=True) as disk:
        done = run(*eval_args(data, fake_llm_server.base_url, tmp_path, disk / "out"))
    line = one_line_error(done)
    assert "Read-only file system" in line and "writable disk" in line
    assert fake_llm_server.count() == 0


def test_a_full_output_disk_stops_the_run_and_keeps_what_was_done(tmp_path, fake_llm_server):
    """The checkpoint fills a 64 KiB disk after a few rows: the run stops at once (exit 2),
    the rows checkpointed stay, and a rerun on a disk with room resumes them."""
    fake_llm_server.chat = heuristic_judge
    data = write_rows(tmp_path / "d.jsonl", 200)
    with small_disk(tmp_path, "64k") as disk:
        done = run(
            *eval_args(data, fake_llm_server.base_url, tmp_path, disk / "out", "--concurrency", 1)
        )
        line = one_line_error(done)
        assert "No space left on device" in line and "free disk space" in line
        sent = fake_llm_server.count()
        assert 0 < sent < 200 * 2  # stopped early, not every row judged and thrown away
        kept = (disk / "out" / ".checkpoint.jsonl").read_bytes()
        assert kept.count(b"\n") >= 1
        assert not (disk / "out" / "results.jsonl").exists()
        assert debris(disk / "out") == []  # the spill file went with the run
        moved = tmp_path / "out"
        moved.mkdir()
        (moved / ".checkpoint.jsonl").write_bytes(kept)
    resumed = run(*eval_args(data, fake_llm_server.base_url, tmp_path, tmp_path / "out"))
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["config"]["resumed_rows"] >= 1 and summary["rows"] == 200


def test_a_full_disk_while_publishing_keeps_the_previous_run(tmp_path, fake_llm_server):
    """ENOSPC injected into the final write: exit 2, one line, the old run untouched and
    no temporary file left."""
    fake_llm_server.chat = heuristic_judge
    url = fake_llm_server.base_url
    out = tmp_path / "out"
    assert run(*eval_args(write_rows(tmp_path / "a.jsonl", 3), url, tmp_path, out)).returncode == 0
    before = {name: (out / name).read_bytes() for name in ("results.jsonl", "summary.json")}
    env = patched(
        tmp_path,
        """
            import errno, os
            import judge.run.results as results

            def full(self, path):
                with open(path, "wb") as out:
                    out.write(b"{}")
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

            results.EvaluationResult.write_jsonl = full
            """,
    )
    done = run(*eval_args(write_rows(tmp_path / "b.jsonl", 5), url, tmp_path, out), env=env)
    line = one_line_error(done)
    assert "results.jsonl: cannot be written (No space left on device)" in line
    assert {name: (out / name).read_bytes() for name in before} == before
    assert debris(out) == []


# --- a kill at the worst moment ---------------------------------------------------------


KILL_AFTER_FIRST_RENAME = """
import os, signal
real = os.replace
def replace(src, dst, *a, **k):
    real(src, dst, *a, **k)
    if str(dst).endswith("results.jsonl"):
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
"""


def test_a_kill_between_the_renames_is_caught_by_every_reader(tmp_path, fake_llm_server):
    """SIGKILL right after the new results.jsonl is in place, before its summary.json:
    the folder holds new rows beside the old summary. judge compare and judge merge refuse
    it; the next run over the folder removes the debris and publishes a whole run."""
    fake_llm_server.chat = heuristic_judge
    url = fake_llm_server.base_url
    out = tmp_path / "out"
    assert run(*eval_args(write_rows(tmp_path / "a.jsonl", 3), url, tmp_path, out)).returncode == 0
    env = patched(tmp_path, KILL_AFTER_FIRST_RENAME)
    newer = write_rows(tmp_path / "b.jsonl", 4, start=10)
    killed = run(*eval_args(newer, url, tmp_path, out), env=env)
    assert killed.returncode == -signal.SIGKILL
    assert (out / "results.jsonl").read_text().count("\n") == 4  # the new rows...
    assert json.loads((out / "summary.json").read_text())["rows"] == 3  # ...the old summary
    assert debris(out)  # the unpublished report and summary
    with pytest.raises(InputFormatError, match=r"not the file its summary\.json was written with"):
        compare(out, out)
    done = run("compare", out, out)
    assert done.returncode == 2 and "not the file its summary.json" in done.stderr
    # The rerun resumes from the checkpoint the killed run kept, and cleans up after it.
    again = run(*eval_args(newer, url, tmp_path, out))
    assert again.returncode == 0, again.stderr
    assert debris(out) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == 4 and summary["config"]["resumed_rows"] == 4
    assert compare(out, out).to_dict()  # whole again


def test_a_kill_while_writing_leaves_the_previous_run_whole(tmp_path, fake_llm_server):
    """SIGKILL in the middle of writing results.jsonl (the file that took the longest):
    the previous run's files are all still there, unchanged and consistent."""
    fake_llm_server.chat = heuristic_judge
    url = fake_llm_server.base_url
    out = tmp_path / "out"
    assert run(*eval_args(write_rows(tmp_path / "a.jsonl", 3), url, tmp_path, out)).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")}
    env = patched(
        tmp_path,
        """
            import os, signal
            import judge.run.results as results

            def half(self, path):
                with open(path, "wb") as out:
                    out.write(b'{"row": 0, "scores": {}')
                    out.flush()
                    os.kill(os.getpid(), signal.SIGKILL)

            results.EvaluationResult.write_jsonl = half
            """,
    )
    killed = run(*eval_args(write_rows(tmp_path / "b.jsonl", 5), url, tmp_path, out), env=env)
    assert killed.returncode == -signal.SIGKILL
    assert {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")} == before
    assert compare(out, out).to_dict()  # the old run reads as a whole run


# --- temporary files and the lock -------------------------------------------------------


def slow_judge(seconds: float):  # type: ignore[no-untyped-def]
    def chat(body):  # type: ignore[no-untyped-def]
        time.sleep(seconds)
        return heuristic_judge(body)

    return chat


def start(args: list[object]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "judge", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(test, seconds: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not test():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_sigterm_removes_the_spill_file_and_a_later_run_removes_a_killed_ones(
    tmp_path, fake_llm_server
):
    fake_llm_server.chat = slow_judge(0.2)
    data = write_rows(tmp_path / "d.jsonl", 30)
    out = tmp_path / "out"
    args = eval_args(data, fake_llm_server.base_url, tmp_path, out, "--concurrency", 2)
    # SIGTERM (what `timeout` and a CI cancel send): exit 143, no spill file left.
    running = start(args)
    wait_for(lambda: (out / ".checkpoint.jsonl").is_file() and debris(out))
    running.send_signal(signal.SIGTERM)
    _, err = running.communicate(timeout=60)
    assert running.returncode == EXIT_TERMINATED == 143, err
    assert "Traceback" not in err
    assert debris(out) == []
    assert (out / ".checkpoint.jsonl").stat().st_size > 0  # kept: a rerun resumes
    # SIGKILL leaves the spill file; the next run over the folder removes it.
    running = start(args)
    wait_for(lambda: bool(debris(out)))
    left = debris(out)
    running.kill()
    running.communicate(timeout=60)
    assert debris(out) == left
    fake_llm_server.chat = heuristic_judge
    done = run(*args)
    assert done.returncode == 0, done.stderr
    assert debris(out) == []


def test_a_second_run_on_the_same_folder_is_refused(tmp_path, fake_llm_server):
    fake_llm_server.chat = slow_judge(0.2)
    data = write_rows(tmp_path / "d.jsonl", 20)
    out = tmp_path / "out"
    first = start(eval_args(data, fake_llm_server.base_url, tmp_path, out, "--concurrency", 1))
    try:
        wait_for(lambda: (out / ".checkpoint.jsonl").is_file())
        second = run(*eval_args(data, fake_llm_server.base_url, tmp_path, out))
        line = one_line_error(second)
        assert f"another judge run (process {first.pid})" in line and "another output" in line
        # The cache is shareable: another folder on the same cache runs at once.
        other = run(
            *eval_args(
                write_rows(tmp_path / "e.jsonl", 1),
                fake_llm_server.base_url,
                tmp_path,
                tmp_path / "o2",
            )
        )
        assert other.returncode == 0, other.stderr
    finally:
        first.kill()
        first.communicate(timeout=60)
    # A killed run's lock goes with its process.
    fake_llm_server.chat = heuristic_judge
    assert run(*eval_args(data, fake_llm_server.base_url, tmp_path, out)).returncode == 0


def test_a_run_that_fails_before_writing_leaves_no_folder(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    done = run(*eval_args(bad, fake_llm_server.base_url, tmp_path, tmp_path / "new" / "out"))
    assert "not JSON" in one_line_error(done)
    assert not (tmp_path / "new" / "out").exists()


def test_debris_of_an_earlier_process_with_the_same_id_is_removed(tmp_path):
    """In a container judge may be process 1 on every run: a killed run's files carry the
    same id as the next run's, and only the token tells them apart."""
    from judge.run.output_folder import OutputFolder, temporary_prefix

    pid = os.getpid()
    earlier = tmp_path / f".judge-rows-{pid}-0badf00d-abc.jsonl"
    older_judge = tmp_path / f".judge-rows-{pid}-k3j2h1.jsonl"  # before tokens
    ours = tmp_path / f"{temporary_prefix('rows')}xyz.jsonl"
    for path in (earlier, older_judge, ours):
        path.write_text("{}\n")
    with OutputFolder(tmp_path):
        pass
    assert ours.exists() and not earlier.exists() and not older_judge.exists()
