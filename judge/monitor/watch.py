"""`judge monitor --watch DIR`: the files the OpenTelemetry Collector's file exporter writes
there, followed through rotation.

The exporter appends OTLP/JSON lines to its file; rotation renames the file (the name gets
a timestamp) and starts a new one. A file is known by its identity (device and inode), not
its name, so a renamed file is read on from where it was left and a new file from its
start; a file cut shorter than what was read (truncated in place) is read again from its
start. JSON lines are read up to the last complete line (the line being written waits for
the next pass). Other encodings the trace readers take (protobuf, length-prefixed, gzip:
a rotation with `compress`) are read whole, once, when first met.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from judge.errors import InputFormatError
from judge.formatting import terminal_text
from judge.traces.otlp import check_ids, encoding_of, read_requests, spans_of_json
from judge.traces.spans import GZIP_MAGIC, Span, head_bytes

MAX_LINES = 5000  # lines read into one batch (one transaction)


@dataclass
class Chunk:
    """What one pass read of one file: the spans of each request, and where it stopped."""

    identity: str
    path: str
    offset: int
    size: int
    batches: list[list[Span]] = field(default_factory=list)
    rejected: int = 0
    bad_lines: int = 0


def identity_of(stat: os.stat_result) -> str:
    """A file's identity through renames: its device and inode."""
    return f"{stat.st_dev}:{stat.st_ino}"


def files_in(folder: Path) -> list[Path]:
    """The regular files of the folder, oldest first (rotated files before the live one)."""
    found = []
    for entry in os.scandir(folder):
        if entry.is_file() and not entry.name.startswith("."):
            found.append((entry.stat().st_mtime_ns, entry.name, Path(entry.path)))
    return [path for _, _, path in sorted(found)]


def _warn(message: str) -> None:
    print(terminal_text(f"judge: warning: {message}"), file=sys.stderr)


def _valid(span: Span) -> bool:
    """Whether a span's ids are valid ones (`judge.traces.otlp.check_ids`)."""
    try:
        check_ids(span.trace_id, span.span_id)
    except InputFormatError:
        return False
    return True


def read_new(path: Path, read_to: tuple[int, int] | None) -> Iterator[Chunk]:
    """What the file holds past what was read (`read_to`: offset and size then, or None)."""
    try:
        stat = path.stat()
    except FileNotFoundError:  # rotated away between the listing and now
        return
    identity = identity_of(stat)
    offset = 0 if read_to is None else read_to[0]
    if stat.st_size < offset:  # truncated in place: what it holds now is new
        offset = 0
    if stat.st_size == offset:
        return
    head = head_bytes(path)
    if head.startswith(GZIP_MAGIC) or encoding_of(path) not in ("json", None):
        if read_to is not None:
            return  # read whole before
        chunk = Chunk(identity, str(path), stat.st_size, stat.st_size)
        try:
            batches = list(read_requests(path))
        except InputFormatError as exc:
            _warn(f"{exc}: the file is left unread")
            chunk.bad_lines += 1
            batches = []
        for batch in batches:  # ids that are not valid refused, as the JSON lines' are
            kept = [span for span in batch if _valid(span)]
            chunk.rejected += len(batch) - len(kept)
            chunk.batches.append(kept)
        yield chunk
        return
    with open(path, "rb") as handle:
        handle.seek(offset)
        while True:
            start = offset
            chunk = Chunk(identity, str(path), offset, stat.st_size)
            complete = True
            for _ in range(MAX_LINES):
                line = handle.readline()
                if not line.endswith(b"\n"):
                    complete = False  # the end, or a line still being written
                    break
                offset += len(line)
                if not line.strip():
                    continue
                rejected: list[str] = []
                try:
                    chunk.batches.append(spans_of_json(json.loads(line), rejected=rejected))
                except (ValueError, RecursionError, InputFormatError) as exc:
                    _warn(f"{path} at byte {offset - len(line)}: not an OTLP/JSON line ({exc})")
                    chunk.bad_lines += 1
                chunk.rejected += len(rejected)
            if offset == start:
                return
            chunk.offset = offset
            yield chunk
            if not complete:
                return
