"""Finished rows on disk: the append-only checkpoint of a run, the lazy sequence that
reads rows back from a JSON-lines file, and the file of where each row's line starts
(`RowOffsets`), so a run of any size keeps score vectors in memory, never every row with
its evidence nor an offset per row."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import weakref
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np

from judge.errors import JudgeError, OutputError
from judge.json_values import dumps_nan_as_null
from judge.lines import bounded_lines
from judge.run.data import LazySequence
from judge.run.output_folder import temporary_prefix, write_failure
from judge.run.rows import ResultRow

_RESULT_KEY = '"result": '
_ROW_KEY = ', "row": '

# Bytes of one offset in a `RowOffsets` file: a signed 64-bit integer, native byte order.
_OFFSET = array("q").itemsize
# Offsets a `RowOffsets` holds before writing them out, and reads back at once: 64 KiB.
OFFSETS_HELD = 1 << 13


class UnsetOffset(JudgeError, LookupError):
    """A row's offset read before it was set: a defect of judge, never the user's input."""


class RowOffsets(LazySequence[int]):
    """Where each of `size` rows' lines starts, in a temporary file of 8-byte records (row
    i's at byte 8 * i) rather than in memory: 8 MiB a million rows that a run need not hold.

    Rows finish out of order, each offset set once (`self[i] = offset`), stored plus one:
    the file is sparse, and a record never written reads as 0, which would be row 0's
    line (read, it is an `UnsetOffset`, not another row's result); the offsets set
    are held until `OFFSETS_HELD` of them are, then written, each run of consecutive rows
    in one write (rows finish nearly in order, so the runs are long). Reading flushes
    them first. The file is removed when the object is gone (or by a later run over the
    folder, if the process was killed: it is named as a temporary rows file is).

    Args:
        size: the number of rows.
        temporary_dir: where the file goes (default: the system's temporary folder).
    """

    def __init__(self, size: int, *, temporary_dir: str | os.PathLike[str] | None = None):
        handle, name = tempfile.mkstemp(
            prefix=temporary_prefix("rows"), suffix=".offsets", dir=temporary_dir
        )
        self.path = Path(name)
        self._size = size
        self._remove = weakref.finalize(self, _unlink, self.path, os.getpid())
        # the rows and offsets set since the last flush (two arrays: 16 bytes each)
        self._numbers = array("q")
        self._values = array("q")
        try:
            # sparse: nothing is written but offsets; the file is opened only to write and
            # read it, so a process may keep any number of results without running out of
            # file descriptors
            with os.fdopen(handle, "r+b") as records:
                records.truncate(size * _OFFSET)
        except OSError as exc:
            raise write_failure(self.path, exc) from None

    def __len__(self) -> int:
        return self._size

    def discard(self) -> None:
        """Remove the file now (the run failed: no result reads it)."""
        self._remove()

    def __setitem__(self, number: int, offset: int) -> None:
        if not 0 <= number < self._size:
            raise IndexError(f"row {number} of {self._size}")
        self._numbers.append(number)
        self._values.append(offset)
        if len(self._numbers) >= OFFSETS_HELD:
            self.flush()

    def flush(self) -> None:
        """Write the offsets held, each run of consecutive rows at once (a row set twice:
        the later offset)."""
        if not self._numbers:
            return
        numbers = np.frombuffer(self._numbers, dtype=np.int64)
        order = np.argsort(numbers, kind="stable")
        numbers = numbers[order]
        values = np.frombuffer(self._values, dtype=np.int64)[order]
        # where a run of consecutive rows ends
        ends = [*(np.flatnonzero(np.diff(numbers) != 1) + 1).tolist(), numbers.size]
        try:
            with _open_kept(self.path, "r+b") as records:
                start = 0
                for end in ends:
                    records.seek(int(numbers[start]) * _OFFSET)
                    records.write((values[start:end] + 1).tobytes())
                    start = end
        except OSError as exc:
            raise write_failure(self.path, exc) from None
        self._numbers = array("q")
        self._values = array("q")

    def at(self, number: int) -> int:
        """Where row `number`'s line starts."""
        self.flush()
        with _open_kept(self.path) as records:
            records.seek(number * _OFFSET)
            stored = array("q", records.read(_OFFSET))[0]
        if stored == 0:
            raise _unset(number)
        return stored - 1

    def __iter__(self) -> Iterator[int]:
        self.flush()
        with _open_kept(self.path) as records:
            for start in range(0, self._size, OFFSETS_HELD):
                read = records.read(min(OFFSETS_HELD, self._size - start) * _OFFSET)
                chunk = np.frombuffer(read, dtype=np.int64)
                unset = np.flatnonzero(chunk == 0)
                if unset.size:
                    raise _unset(start + int(unset[0]))
                yield from (chunk - 1).tolist()


def _unset(number: int) -> UnsetOffset:
    return UnsetOffset(
        f"row {number}'s place in the rows file was never recorded: a defect of judge; "
        "please report it with the command that was run"
    )


class RowFile(LazySequence[ResultRow]):
    """Result rows read lazily from a JSON-lines file, one line per row at known offsets.

    Each access parses its line again, so iterating twice reads the file twice; the file
    must stay in place (and only grow) while the sequence is used.

    Args:
        path: the JSON-lines file.
        offsets: where each row's line starts, in the order of the sequence (an
            `array("q")` or a `RowOffsets` is kept, not copied: the caller leaves it as
            it is).
        wrapped: lines are checkpoint records (`{"run", "row", "input", "result"}`), not
            bare result rows.
        owner: an object kept alive with the sequence (the temporary file's owner).
        metrics: the run's metrics: each row's scores, reasons and errors are given in
            this order, as a fresh row has them (the files hold sorted keys).
        verbatim: the lines are results.jsonl lines as judge writes them (a shard's
            results, joined by `judge merge`): written out as they are, not encoded again.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        offsets: Sequence[int],
        *,
        wrapped: bool = False,
        owner: object = None,
        metrics: Sequence[str] = (),
        verbatim: bool = False,
    ):
        self.path = Path(path)
        self._verbatim = verbatim
        # An array or file of offsets is kept as it is: a copy was 8 MiB more per million rows.
        kept = isinstance(offsets, RowOffsets) or (
            isinstance(offsets, array) and offsets.typecode == "q"
        )
        self._offsets: Sequence[int] = offsets if kept else array("q", offsets)
        self._wrapped = wrapped
        self._owner = owner
        self._order = {m: i for i, m in enumerate(metrics)}

    def __len__(self) -> int:
        return len(self._offsets)

    def at(self, number: int) -> ResultRow:
        """Row `number`, read from its line."""
        return self._read(self._offsets[number])

    def __iter__(self) -> Iterator[ResultRow]:
        with _open_kept(self.path) as lines:
            for offset in self._offsets:
                lines.seek(offset)
                yield self._parse(lines.readline())

    def json_lines(self) -> Iterator[str]:
        """Each row as its results.jsonl line (`json.dumps(row.to_json(), sort_keys=True)`).

        A checkpoint record holds that very text as the value of its "result" key (see
        `Checkpoint.encode`), so it is cut out rather than parsed and encoded again; a
        verbatim file's lines are that text already; other bare result rows (another
        tool's file, which may be laid out otherwise) are re-encoded.
        """
        if self._verbatim:
            with _open_kept(self.path) as lines:
                for offset in self._offsets:
                    lines.seek(offset)
                    yield lines.readline().decode("utf-8")
            return
        if not self._wrapped:
            for row in self:
                yield row.json_line() + "\n"
            return
        with _open_kept(self.path) as lines:
            for offset in self._offsets:
                lines.seek(offset)
                line = lines.readline().decode("utf-8")
                # {"input": "<hex>", "result": {...}, "row": N, "run": "<hex>"}: the hashes
                # hold no quotes, and the last ', "row": ' is the record's own key.
                start = line.index(_RESULT_KEY) + len(_RESULT_KEY)
                yield line[start : line.rindex(_ROW_KEY)] + "\n"

    def move(self, path: str | os.PathLike[str]) -> None:
        """Move the file to path (a rename: same file system) and read it from there."""
        os.replace(self.path, path)
        self.path = Path(path)

    def renamed(self, path: str | os.PathLike[str]) -> None:
        """The file was renamed to path by someone else: read it from there."""
        self.path = Path(path)

    def _read(self, offset: int) -> ResultRow:
        with _open_kept(self.path) as lines:
            lines.seek(offset)
            return self._parse(lines.readline())

    def _parse(self, line: bytes) -> ResultRow:
        item = json.loads(line)
        row = ResultRow.from_json(item["result"] if self._wrapped else item)
        if self._order:
            last = len(self._order)
            for name in ("scores", "reasons", "errors"):
                values = getattr(row, name)
                ordered = sorted(values, key=lambda m: self._order.get(m, last))
                setattr(row, name, {m: values[m] for m in ordered})
        return row


def scan_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of every line of a file, the last one possibly without its newline;
    a line over the limit of `judge.lines` is an `InputFormatError` naming the file and
    line (a damaged file: judge writes no such line)."""
    offset = 0
    with open(path, "rb") as lines:
        for _, line in bounded_lines(lines, path):
            yield offset, line
            offset += len(line)


class DoneRows:
    """Where a checkpoint's finished rows start, by row number: two arrays, 16 bytes a row
    (a dict keyed by row number and 64-digit input hash held about 250). A row written
    twice (a run resumed, then changed input) is found at its last line.

    Args:
        numbers: the row numbers, in the order of their lines.
        offsets: where each line starts.
    """

    def __init__(self, numbers: array[int], offsets: array[int]) -> None:
        rows = np.frombuffer(numbers, dtype=np.int64) if numbers else np.empty(0, np.int64)
        at = np.frombuffer(offsets, dtype=np.int64) if offsets else np.empty(0, np.int64)
        # the last line of each row number: unique over the reversed lines finds it first
        unique, first = np.unique(rows[::-1], return_index=True)
        self._numbers = unique
        self._offsets = at[::-1][first]

    def __len__(self) -> int:
        return int(self._numbers.size)

    def offset(self, number: int) -> int | None:
        """Where row `number`'s last line starts, or None when it has none."""
        k = int(np.searchsorted(self._numbers, number))
        if k < self._numbers.size and self._numbers[k] == number:
            return int(self._offsets[k])
        return None


class Checkpoint:
    """Finished rows appended as JSON lines; a restarted run with the same arguments reuses them.

    Args:
        path: the JSON-lines file; None for a temporary one, deleted when neither this
            object nor a `RowFile` of its `rows` is left (how a result keeps its rows off
            the heap and independent of the user's checkpoint file).
        fingerprint: the run's fingerprint; lines of other runs are ignored.
        temporary_dir: where a temporary file goes (default: the system's).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        fingerprint: str,
        *,
        temporary_dir: str | os.PathLike[str] | None = None,
    ):
        self.fingerprint = fingerprint
        # A user's checkpoint is written through row by row (see write); a temporary file
        # is only read through `rows`, which flushes it first.
        self._through = path is not None
        if path is None:
            # Named with the process id: a later run over the folder removes the file of
            # a run that was killed (see judge.run.output_folder.remove_debris).
            handle, name = tempfile.mkstemp(
                prefix=temporary_prefix("rows"), suffix=".jsonl", dir=temporary_dir
            )
            os.close(handle)
            self.path = Path(name)
            self._remove: Callable[[], object] | None = weakref.finalize(
                self, _unlink, self.path, os.getpid()
            )
        else:
            self.path = Path(path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._remove = None
        self._out: BinaryIO | None = None

    def load(self) -> DoneRows:
        """Where the rows already done start, by row number (a row's input hash is in its
        line: checked when the row is taken); torn or foreign lines are skipped."""
        numbers, offsets = array("q"), array("q")
        if self.path.exists():
            for offset, line in scan_lines(self.path):
                try:
                    item = json.loads(line)
                except (ValueError, RecursionError):  # not JSON, cut inside a UTF-8 character
                    continue  # the last line of a killed run may be cut short
                if isinstance(item, dict) and item.get("run") == self.fingerprint:
                    number = item.get("row")
                    if isinstance(number, int) and not isinstance(number, bool):
                        numbers.append(number)
                        offsets.append(offset)
        return DoneRows(numbers, offsets)

    def line_at(self, offset: int) -> bytes:
        """The line (with its newline) starting at offset."""
        with open(self.path, "rb") as lines:
            lines.seek(offset)
            line = lines.readline()
        return line if line.endswith(b"\n") else line + b"\n"

    def encode(self, row_number: int, input_hash: str, result: ResultRow) -> bytes:
        """One row's line: this run's fingerprint, the row number, its input hash, the row."""
        record = {
            "run": self.fingerprint,
            "row": row_number,
            "input": input_hash,
            "result": result.json_fields(),
        }
        # Sorted keys, as in results.jsonl: a row read back has the same dict order whether
        # it comes from this file or from a results file (judge merge), so the report is too.
        return dumps_nan_as_null(record).encode("utf-8") + b"\n"

    def write(self, line: bytes) -> int:
        """Append one encoded line; returns where it starts. A checkpoint's line is written
        through to the OS at once, so killing the process loses nothing finished; no fsync
        per row (it cost ~0.5 ms a row), so a power cut may lose the last rows, which the
        cache then answers again without a request. A temporary file's lines are buffered."""
        try:
            if self._out is None:
                self._out = self._open()
            offset = self._out.tell()
            self._out.write(line)
            if self._through:
                self._out.flush()
        except OSError as exc:  # a full disk stops the run: the rows written so far stay
            raise write_failure(self.path, exc) from None
        return offset

    def append(self, row_number: int, input_hash: str, result: ResultRow) -> int:
        """Record one finished row; returns where its line starts."""
        return self.write(self.encode(row_number, input_hash, result))

    def _open(self) -> BinaryIO:
        return open_for_appending(self.path)

    def close(self) -> None:
        """Close the file after writing (rows stay readable through `rows`)."""
        if self._out is not None:
            out, self._out = self._out, None
            try:
                out.close()
            except OSError as exc:  # the buffered lines of a spill file meet a full disk
                raise write_failure(self.path, exc) from None

    def discard(self) -> None:
        """Close a temporary file and remove it now (the run failed: no result reads it);
        a user's checkpoint is kept, closed."""
        out, self._out = self._out, None
        if out is not None:
            with contextlib.suppress(OSError):  # lines buffered for a file going away
                out.close()
        if self._remove is not None:
            self._remove()

    def rows(self, offsets: Sequence[int], metrics: Sequence[str]) -> RowFile:
        """The rows at these offsets, read lazily; keeps a temporary file alive while used."""
        if self._out is not None:
            try:
                self._out.flush()  # rows still being written are readable too
            except OSError as exc:
                raise write_failure(self.path, exc) from None
        return RowFile(self.path, offsets, wrapped=True, owner=self, metrics=metrics)


class LineTemplate:
    """A checkpoint line (`Checkpoint.encode`) as a template for the lines of rows whose
    results equal its row's but for the row's number and id (and input hash): the same
    sample judged again, whose line is put together without encoding the row again.

    The parts are cut from the line at its record's last keys, which sort after every key
    of the evidence and hold no text a user wrote unescaped: the result's `"row"`, then
    its `"id"` before the question.
    """

    def __init__(self, parts: tuple[bytes, bytes, bytes, bytes, bytes]):
        self._parts = parts

    @classmethod
    def of(
        cls, line: bytes, fingerprint: str, row_number: int, input_hash: str, row_id: Any
    ) -> LineTemplate | None:
        """The template of one row's line, or None when the line is not laid out as its
        record's encoding (checked by putting the line together again)."""
        head = b'{"input": ' + _json_bytes(input_hash) + b', "result": '
        tail = f', "row": {row_number}, "run": {dumps_nan_as_null(fingerprint)}}}\n'.encode()
        if not (line.startswith(head) and line.endswith(tail)):
            return None
        result = line[len(head) : -len(tail)]
        number = f', "row": {row_number}, "scores": '.encode()
        at_row = result.rfind(number)
        ident = b', "id": ' + _json_bytes(row_id) + b', "question": '
        at_id = result.rfind(ident, 0, at_row)
        if at_row < 0 or at_id < 0:
            return None
        template = cls(
            (
                b'{"input": ',
                b', "result": ' + result[: at_id + len(b', "id": ')],
                result[at_id + len(ident) - len(b', "question": ') : at_row + len(b', "row": ')],
                result[at_row + len(number) - len(b', "scores": ') :] + b', "row": ',
                f', "run": {dumps_nan_as_null(fingerprint)}}}\n'.encode(),
            )
        )
        return template if template.line(row_number, input_hash, row_id) == line else None

    def line(self, row_number: int, input_hash: str, row_id: Any) -> bytes:
        """The line of the row of this number, input hash and id."""
        start, result, question, scores, run = self._parts
        number = str(row_number).encode("ascii")
        return b"".join(
            (
                start,
                _json_bytes(input_hash),
                result,
                _json_bytes(row_id),
                question,
                number,
                scores,
                number,
                run,
            )
        )


def _open_kept(path: Path, mode: str = "rb") -> IO[bytes]:
    """A file a result reads its rows from (`RowFile`, `RowOffsets`), opened; one removed
    while the result is in use is an `OutputError` saying so and what to do, not a bare
    FileNotFoundError (or a write failure's advice to rerun). The caller closes it."""
    try:
        return open(path, mode)
    except FileNotFoundError:
        raise OutputError(
            f"{path} was removed while a result read its rows from it: keep that folder "
            "until the result is no longer used, or save what you need first (write_jsonl, "
            "write_csv, to_pandas); judge.evaluate's result keeps its rows in files beside "
            "checkpoint=, else in the temporary folder, until the result is gone"
        ) from None


def _json_bytes(value: Any) -> bytes:
    """A value's JSON as a checkpoint line holds it."""
    return dumps_nan_as_null(value).encode("utf-8")


def open_for_appending(path: Path) -> BinaryIO:
    """A JSON-lines file opened for appending; a line cut short by a killed run is ended
    first, so the next line starts a line of its own. The caller closes it."""
    out = open(path, "ab")  # noqa: SIM115 (held open for the run by the caller)
    if out.tell():
        with open(path, "rb") as tail:
            tail.seek(-1, os.SEEK_END)
            if tail.read(1) != b"\n":
                out.write(b"\n")
    return out


def _unlink(path: Path, owner: int) -> None:
    # A forked child has a copy of its parent's results, finalized as it exits (or drops
    # them) while the parent still reads the files: only the process that made one
    # removes it.
    if os.getpid() == owner:
        path.unlink(missing_ok=True)
