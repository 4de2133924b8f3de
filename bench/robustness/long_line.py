"""Memory stays bounded on a file of one endless line: the peak RSS of `judge traces
extract` and `judge eval --dry-run` on a gzip file holding one line of --gib GiB (a few MB
on disk), and of `judge eval --dry-run` on the same line as a plain .jsonl (--plain).

Each line is refused at the line limit (`JUDGE_MAX_LINE_MB`, 64 MiB by default) with
exit 2 naming the file and line; the figure to watch is the peak RSS of each command,
which should not grow with --gib. The files are written streaming into a temporary folder
(removed at the end) and never held in memory.

Run: python -m bench.robustness.long_line [--gib 2] [--plain]
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
from pathlib import Path

from bench.support.peak_memory import run_launched

HEAD = b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "'
CHUNK = (b"the river is long and the answer is in the documents " * 20_000)[: 1 << 20]


def write_line(out, size: int, head: bytes = HEAD) -> None:
    """One line of `size` bytes, no newline, written a MiB at a time."""
    out.write(head)
    left = size - len(head)
    while left > 0:
        piece = CHUNK[: min(left, len(CHUNK))]
        out.write(piece)
        left -= len(piece)


def peak(command: list[str]) -> tuple[int, float, str]:
    """(exit code, peak RSS in MiB, the last line of stderr) of one judge command."""
    # Through a small launcher: see bench/support/peak_memory.py.
    done = run_launched([sys.executable, "-m", "judge", *command])
    error = done.stderr.decode().strip().splitlines()
    return done.code, done.peak_bytes / 2**20, error[-1] if error else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0, help="the line's size in GiB")
    parser.add_argument("--plain", action="store_true", help="also a plain .jsonl of it")
    args = parser.parse_args()
    size = int(args.gib * (1 << 30))
    with tempfile.TemporaryDirectory() as folder:
        packed = Path(folder, "one_line.jsonl.gz")
        with gzip.open(packed, "wb", compresslevel=6) as out:
            write_line(out, size)
        files = [packed]
        if args.plain:  # OTLP/JSON as a trace file, and a judge eval input row
            files.append(Path(folder, "one_line.jsonl"))
            with files[-1].open("wb") as out:
                write_line(out, size)
            files.append(Path(folder, "one_row.jsonl"))
            with files[-1].open("wb") as out:
                write_line(out, size, b'{"question": "')
        print(f"one line of {size:,} bytes; {packed.name} is {packed.stat().st_size:,} bytes")
        for path in files:
            commands = {
                "traces extract": ["traces", "extract", str(path), "-o", f"{folder}/rows.jsonl"],
                "eval --dry-run": ["eval", str(path), "--dry-run", "--metrics", "faithfulness",
                                   "--model", "openai/judge-model", "--out", f"{folder}/out"],
            }  # fmt: skip
            for name, command in commands.items():
                if path.name == "one_row.jsonl" and name == "traces extract":
                    continue
                code, mib, said = peak(command)
                print(f"judge {name} {path.name}: exit {code}, peak RSS {mib:.0f} MiB")
                print(f"  {said.replace(folder + '/', '')[:150]}")


if __name__ == "__main__":
    main()
