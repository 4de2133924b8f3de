"""Peak memory of a measured process, counted from its own start.

On Linux a process's `ru_maxrss` (getrusage, wait4) starts at its parent's peak resident
memory: Python starts a child with vfork, the child shares the parent's memory until its
exec, and the kernel carries that memory's high-water mark over the exec into the child's
own figure. A 13 MiB child of a benchmark that once held 500 MiB reports 513 MiB; a
benchmark that holds a cache it derived, or the arrays of the files it made, reports its own
size for every child smaller than itself (measured 2026-12-06: a replay of 10,000 rows at
441 MiB from `bench/speed/replay_100k.py`, 324 MiB started from a shell).

What counts instead:
- `VmHWM` in /proc/self/status, the high-water mark of the memory the process has had
  since its exec: `OWN_PEAK` prints it at the end of a measured Python process.
- A process started by a small one (`launched`: a Python launcher of about 10 MiB that
  starts the command with posix_spawn and reports its wait4 figures): what it reports
  starts from the launcher's size, not the benchmark's. For programs that are not Python
  (trec_eval).
- Python processes a measured one starts (`judge eval --processes` shards): each writes
  its own VmHWM when it exits, into a folder (`recording_peaks`), through a
  `sitecustomize` module put first on their PYTHONPATH.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Python code that gives this process's own peak in KiB (Linux).
OWN_PEAK_KIB = (
    "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1])"
)
# Appended to a measured Python program: prints `PEAK_KIB n` on stderr.
OWN_PEAK = f"print('PEAK_KIB', {OWN_PEAK_KIB}, file=sys.stderr)\n"

_LAUNCHER = (
    "import os, sys, time\n"
    "start = time.perf_counter()\n"
    "pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ)\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "print('LAUNCHED', os.waitstatus_to_exitcode(status), usage.ru_maxrss,\n"
    "      usage.ru_utime + usage.ru_stime, time.perf_counter() - start, file=sys.stderr)\n"
)

_RECORDER = (
    "import atexit, os\n"
    "def _record_peak():\n"
    f"    peak = {OWN_PEAK_KIB}\n"
    "    folder = os.environ['JUDGE_BENCH_PEAKS']\n"
    "    name = f'{os.getppid()}.{os.getpid()}'\n"
    "    with open(os.path.join(folder, name), 'w') as out:\n"
    "        out.write(str(peak))\n"
    "if os.environ.get('JUDGE_BENCH_PEAKS'):\n"
    "    atexit.register(_record_peak)\n"
)


# Runs `judge` (the arguments after this code) and reports on stderr its process id, its
# own peak (`OWN_PEAK`) and its CPU time with its children's: read back by `judge_figures`.
MEASURED_JUDGE = (
    "import os, resource, sys\n"
    "from judge.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "own = resource.getrusage(resource.RUSAGE_SELF)\n"
    "kids = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print('PID', os.getpid(), file=sys.stderr)\n"
    f"{OWN_PEAK}"
    "cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime\n"
    "print('CPU_S', cpu, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@dataclass
class JudgeFigures:
    """What a `MEASURED_JUDGE` process reported: its own peak, the largest peak of the
    processes it started (0: none recorded), both in KiB, and its CPU seconds."""

    own_kib: int
    children_kib: int
    cpu: float


def judge_figures(stderr: str, peaks: dict[tuple[int, int], int]) -> JudgeFigures:
    """The figures a `MEASURED_JUDGE` process printed, with its children's recorded peaks."""
    found = dict(
        line.split() for line in stderr.splitlines() if line[:4] in ("PID ", "PEAK", "CPU_")
    )
    return JudgeFigures(
        int(found["PEAK_KIB"]),
        children_peak_kib(peaks, int(found["PID"])),
        float(found["CPU_S"]),
    )


def status_kib(field: str, pid: int | str = "self") -> int:
    """A figure of /proc/PID/status in KiB (`VmHWM`: the peak since the process started)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def own_peak_kib() -> int:
    """This process's peak resident memory since its start, in KiB."""
    return status_kib("VmHWM")


@dataclass
class Launched:
    """What a launched command did: its exit code, peak memory, CPU time (its own and its
    children's) and wall time (from its start to its end, the launcher's own start aside),
    and its stdout and stderr (the launcher's line taken out)."""

    code: int
    peak_bytes: int
    cpu: float
    seconds: float
    stdout: bytes
    stderr: bytes


def run_launched(command: list[str], **popen: object) -> Launched:
    """Run `command` through the small launcher (see the module docstring)."""
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *command],
        capture_output=True,
        check=False,
        **popen,  # type: ignore[arg-type]
    )
    lines = done.stderr.splitlines(keepends=True)
    report = [line for line in lines if line.startswith(b"LAUNCHED ")]
    if done.returncode != 0 or not report:
        raise RuntimeError(f"the launcher of {command[0]} failed: {done.stderr[-2000:]!r}")
    _, code, kib, cpu, seconds = report[-1].split()
    stderr = b"".join(line for line in lines if line is not report[-1])
    return Launched(int(code), int(kib) * 1024, float(cpu), float(seconds), done.stdout, stderr)


@contextlib.contextmanager
def recording_peaks() -> Iterator[tuple[dict[str, str], Path]]:
    """(an environment, a folder): Python processes started with the environment, and
    theirs, write their own peak (KiB) into the folder when they exit."""
    with tempfile.TemporaryDirectory() as root:
        hook = Path(root) / "hook"
        peaks = Path(root) / "peaks"
        hook.mkdir()
        peaks.mkdir()
        (hook / "sitecustomize.py").write_text(_RECORDER, encoding="utf-8")
        path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
        yield {**os.environ, "PYTHONPATH": path, "JUDGE_BENCH_PEAKS": str(peaks)}, peaks


def recorded_peaks(folder: Path) -> dict[tuple[int, int], int]:
    """The peaks (KiB) written into a `recording_peaks` folder, by (parent's process id,
    process id); the folder is emptied."""
    found = {}
    for entry in folder.iterdir():
        parent, pid = entry.name.split(".")
        found[int(parent), int(pid)] = int(entry.read_text(encoding="utf-8"))
        entry.unlink()
    return found


def children_peak_kib(peaks: dict[tuple[int, int], int], parent: int) -> int:
    """The largest recorded peak (KiB) of the processes `parent` started (0: none)."""
    return max((kib for (ppid, _), kib in peaks.items() if ppid == parent), default=0)
