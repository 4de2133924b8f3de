"""Benchmark-only virtualenvs under bench/: made on first use, then reused while they probe right.

Tools that must not become judge's dependencies (RAGAS, torch and an embedding model) live
in their own virtualenv; the benchmark scripts start them as child processes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent  # bench/: the venvs live at its top
RAGAS_VENV = BENCH / ".ragas-venv"
EMBED_VENV = BENCH / ".embed-venv"
DEEPEVAL_VENV = BENCH / ".deepeval-venv"


def ensure_venv(venv: Path, pins: list[str], probe: str, expect: str) -> Path:
    """The venv's python, after installing `pins` unless `probe` already prints `expect`.

    Args:
        venv: the virtualenv's directory (gitignored).
        pins: pip requirements, versions pinned.
        probe: Python code run by the venv's python; its stdout must equal `expect`.
        expect: what a ready venv prints.
    """
    python = venv / "bin" / "python"
    command = [str(python), "-c", probe]
    if python.exists():
        found = subprocess.run(command, capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip() == expect:
            print(f"{venv.name}: reusing {venv} ({expect})")
            return python
    start = time.perf_counter()
    print(f"{venv.name}: installing {' '.join(pins)} (a few minutes) ...", flush=True)
    if not python.exists():
        base = shutil.which("python3") or sys.executable
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins]
    done = subprocess.run(pip, capture_output=True, text=True)
    found = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or found.stdout.strip() != expect:
        sys.exit(f"install into {venv} failed:\n{done.stderr[-3000:]}{found.stderr[-2000:]}")
    print(f"{venv.name}: installed in {time.perf_counter() - start:.0f} s")
    return python
