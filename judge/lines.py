"""Lines of files read with a size limit: a file of one endless line (a damaged export, a
gzip file that unpacks to gigabytes without a newline) is an error naming the file, the
line and the limit, never all of memory.

The limit is `JUDGE_MAX_LINE_MB` (an environment variable, in MiB; default 64): a line
(a JSON-lines record, an OTLP/JSON request, a protobuf message) longer than it is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import IO

from judge.errors import InputFormatError, JudgeError

LIMIT_VARIABLE = "JUDGE_MAX_LINE_MB"
DEFAULT_LIMIT_MB = 64
_MB = 1 << 20


def max_line_bytes() -> int:
    """The longest line (or record) judge reads, in bytes: `JUDGE_MAX_LINE_MB` MiB."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_LIMIT_MB * _MB
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):  # also nan
        raise JudgeError(
            f"{LIMIT_VARIABLE}={text!r}: give the longest line judge reads, in MiB "
            f"(a positive number; default {DEFAULT_LIMIT_MB})"
        )
    return max(1, int(value * _MB))


def shown_limit(limit: int) -> str:
    """A limit in bytes as text: MiB when it is a whole number of them."""
    return f"{limit // _MB} MiB" if limit % _MB == 0 else f"{limit} bytes"


def too_long(
    path: str | os.PathLike[str],
    limit: int,
    *,
    line: int | None = None,
    what: str = "line",
    which: str | None = None,
) -> InputFormatError:
    """The error of a line (or record: `what`, `which` one of them) longer than the limit."""
    return InputFormatError(
        f"{which or 'the ' + what} is longer than {shown_limit(limit)}, the limit of one "
        f"{what}: a damaged file, or a file of another kind; if the {what} is right, raise the "
        f"limit with the environment variable {LIMIT_VARIABLE} (in MiB, e.g. "
        f"{LIMIT_VARIABLE}={4 * max(limit // _MB, 1)})",
        path=os.fspath(path),
        line=line,
    )


def not_a_file(path: str | os.PathLike[str], what: str = "file") -> str:
    """Why `path` cannot be read as a `what`: what is there instead, or that nothing is."""
    if os.path.isdir(path):
        return f"{os.fspath(path)} is a folder, not a {what}"
    if os.path.exists(path):  # a named pipe, a socket, a device: read more than once here
        return (
            f"{os.fspath(path)} is not a regular file (a named pipe, socket or device): save "
            f"its content to a {what} and give that"
        )
    return f"{os.fspath(path)}: no such {what}"


def bounded_lines(
    handle: IO[bytes], path: str | os.PathLike[str], limit: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """(number from 1, line with its newline) of every line of a binary file, split on
    b"\\n" only; a line longer than `limit` bytes (default: `max_line_bytes()`) raises
    `InputFormatError` naming the file and line, having read at most `limit + 1` bytes
    of it."""
    limit = max_line_bytes() if limit is None else limit
    number = 0
    while line := handle.readline(limit + 1):
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            raise too_long(path, limit, line=number)
        yield number, line


# The most bytes read at once while looking for a line's end: a line longer than that is
# read in pieces, so a file of lines ended by "\r" alone costs this much memory, not the
# limit's worth.
_PIECE = 1 << 20


def universal_lines(
    handle: IO[bytes], path: str | os.PathLike[str], limit: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """(number from 1, line with its line end) of every line of a binary file, split as
    Python's text mode splits them (universal newlines): on b"\\n", b"\\r\\n" and a
    b"\\r" alone (an old Mac file), never on the other characters `str.splitlines` takes
    for line ends. A line longer than `limit` bytes without its line end (default:
    `max_line_bytes()`) raises `InputFormatError` naming the file and line.

    Splitting bytes, not text, gives the lines of the decoded text: "\\r" and "\\n" are
    never part of a UTF-8 sequence.
    """
    limit = max_line_bytes() if limit is None else limit
    number = 0
    parts: list[bytes] = []  # the line being read, as read so far
    size = 0
    while data := handle.readline(_PIECE):
        if not parts and data[-1:] == b"\n" and len(data) <= limit + 1:
            cr = data.find(b"\r")
            if cr < 0 or cr == len(data) - 2:  # one whole line, ended by "\n" or "\r\n"
                number += 1
                yield number, data
                continue
        for piece in data.splitlines(keepends=True):
            if parts and parts[-1][-1:] == b"\r":  # an end "\r": "\r\n" if "\n" follows
                if piece[:1] == b"\n":
                    parts.append(b"\n")
                    piece = piece[1:]
                number += 1
                yield number, b"".join(parts)
                parts, size = [], 0
                if not piece:
                    continue
            parts.append(piece)
            size += len(piece)
            ended = piece[-1:] in (b"\n", b"\r")
            if size - ended - piece.endswith(b"\r\n") > limit:
                raise too_long(path, limit, line=number + 1)
            if piece[-1:] == b"\n":
                number += 1
                yield number, b"".join(parts)
                parts, size = [], 0
    if parts:
        yield number + 1, b"".join(parts)


def read_bounded(
    handle: IO[bytes], path: str | os.PathLike[str], what: str, limit: int | None = None
) -> bytes:
    """The rest of a binary file as one record (a protobuf request), refused when it is
    longer than `limit` bytes (default: `max_line_bytes()`)."""
    limit = max_line_bytes() if limit is None else limit
    data = handle.read(limit + 1)
    if len(data) > limit:
        raise too_long(path, limit, what=what)
    return data
