"""bench/support/peak_memory.py: a measured process's peak memory counts its own memory,
not that of the (bigger) benchmark that started it."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.support.peak_memory import (
    OWN_PEAK,
    children_peak_kib,
    own_peak_kib,
    recorded_peaks,
    recording_peaks,
    run_launched,
)

MIB = 2**20
# A Python process that touches 40 MiB and prints its own peak as OWN_PEAK does.
CHILD = (
    "import sys\n"
    "held = bytearray(40 * 2**20)\n"
    "for i in range(0, len(held), 4096): held[i] = 1\n"
    f"{OWN_PEAK}"
)


def _touched(mib: int) -> bytearray:
    held = bytearray(mib * MIB)
    for i in range(0, len(held), 4096):
        held[i] = 1
    return held


def test_a_child_of_a_big_process_is_measured_at_its_own_size():
    big = _touched(200)  # this process now peaks above 200 MiB
    assert own_peak_kib() * 1024 > 200 * MIB
    # What the benchmarks measured before: wait4's ru_maxrss starts at this process's peak.
    assert _wait4_peak([sys.executable, "-c", CHILD]) > 200 * MIB
    launched = run_launched([sys.executable, "-c", CHILD])
    assert launched.code == 0
    assert 40 * MIB < launched.peak_bytes < 150 * MIB
    own = int(launched.stderr.decode().split("PEAK_KIB")[1].split()[0]) * 1024
    assert 40 * MIB < own < 150 * MIB
    assert launched.seconds > 0 and launched.cpu > 0
    del big


def test_the_processes_a_measured_one_starts_record_their_own_peaks():
    big = _touched(200)
    starts_one = (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {CHILD!r}], check=True)\n"
        "print('PID', __import__('os').getpid())\n"
    )
    with recording_peaks() as (env, folder):
        done = subprocess.run(
            [sys.executable, "-c", starts_one], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        peaks = recorded_peaks(folder)
        assert not list(folder.iterdir())  # emptied
    parent = int(done.stdout.split("PID")[1])
    assert len(peaks) == 2  # the measured process and the one it started
    assert 40 * MIB < children_peak_kib(peaks, parent) * 1024 < 150 * MIB
    assert children_peak_kib(peaks, -1) == 0
    del big


def _wait4_peak(command: list[str]) -> int:

    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(child.pid, 0)
    return usage.ru_maxrss * 1024
