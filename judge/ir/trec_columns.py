"""Read big TREC qrels and run files straight into arrays with pyarrow's CSV reader.

The fast path reads only what it can read exactly as the line reader in `judge.ir.trec`
does (trec_eval's split on C white space, lines ended by \n): ASCII files whose fields are
separated by one space or one tab, every line with as many fields as the first. Anything
else (no pyarrow, other white space, a carriage return that does not end a line, a NUL, a
malformed line, a NaN score, a doc listed twice, an unreadable file) returns
None, and the caller reads the file line by line, which accepts the same files and raises
the errors that name the file and line.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from judge.ir.arrow import mix, string_hashes, strings_to_arrow, take, to_numpy
from judge.threads import map_ahead

# Its own, not judge.ir.trec's: judge.ir.trec imports this module (an import circle).
PathLike = str | os.PathLike[str]

Kind = Literal["qrels", "run"]

# Bytes handed to pyarrow at a time: big enough for its threads, small enough that the
# text columns of one chunk are a small part of the arrays kept.
_CHUNK_BYTES = 4 << 20
_BLOCK_BYTES = 1 << 20  # bytes of a chunk per pyarrow parsing task (4 tasks a chunk)
# Chunks parsed at once, each in a thread of its own: one thread's checks and hashes of a
# chunk then run beside pyarrow's parse of the next, where with one the parse waited for
# them (the 5M-line run of bench/speed/ir_files.py: 13% less wall time, one chunk's
# tables more in memory).
PARSERS = 2
_BATCH_LINES = 1 << 16  # lines turned into Python objects at a time by to_dicts
# Bytes left to the line reader: white space to trec_eval (C's isspace()) that the fast
# path does not split on, and NUL, which the line reader refuses. (A lone \r, white space
# too, pyarrow reads as a line end: `_lone_return` finds it.)
_OTHER_BYTES = (b"\x0b", b"\x0c", b"\x00")


@dataclass(frozen=True)
class TrecColumns:
    """The lines of a qrels or run file as arrays, one element per line.

    Attributes:
        query_ids: distinct query ids, in order of first appearance.
        query: index into `query_ids` of each line (int32).
        docs: doc id of each line (a pyarrow string array).
        values: run scores (float64, never NaN) or qrels grades (int64).
        keys: a 64-bit hash of each line's (query, doc), all distinct.
    """

    query_ids: list[str]
    query: np.ndarray
    docs: Any
    values: np.ndarray
    keys: np.ndarray


class Unsuitable(Exception):
    """The fast path cannot read this file exactly; the line reader will."""


def read_columns(path: PathLike, kind: Kind) -> TrecColumns | None:
    """Read a qrels or run file into arrays; None if only the line reader can read it.

    Args:
        path: the file.
        kind: "qrels" (`query_id iteration doc_id grade`) or "run"
            (`query_id Q0 doc_id rank score [tag ...]`).
    """
    try:
        import pyarrow as pa  # optional: the line reader works without it
    except ImportError:
        return None
    try:
        # Only regular files: a pipe can be opened and read once, by the line reader.
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as handle:
            return _read(handle, kind)
    except (OSError, Unsuitable, pa.ArrowException):  # pyarrow's: a malformed line
        return None


class _Columns:
    """Arrays that grow by chunks, sized from the first chunk so they are rarely copied.

    (Joining pieces at the end would hold every column twice, and leave the freed pieces
    as holes in the heap; memory untouched at the end of an array costs nothing.)
    """

    def __init__(self, file_size: int):
        self.file_size, self.n = file_size, 0
        self.arrays: list[np.ndarray] = []
        self.docs: list[Any] = []

    def add(self, cut: int, piece: tuple[np.ndarray, list[Any], np.ndarray, np.ndarray]) -> None:
        query, docs, values, keys = piece
        m = query.size
        if not self.arrays or self.n + m > self.arrays[0].size:
            estimate = int(self.file_size / max(cut, 1) * m * 1.25) + 1024
            capacity = max(estimate, (self.n + m) * 3 // 2)
            self.arrays = [_resized(old, capacity, self.n) for old in self._or_empty(piece)]
        for array, part in zip(self.arrays, (query, values, keys), strict=True):
            array[self.n : self.n + m] = part
        self.docs += docs
        self.n += m

    def _or_empty(self, piece: tuple[Any, ...]) -> list[np.ndarray]:
        if self.arrays:
            return self.arrays
        return [np.empty(0, dtype=part.dtype) for part in (piece[0], piece[2], piece[3])]


def _resized(old: np.ndarray, capacity: int, used: int) -> np.ndarray:
    new = np.empty(capacity, dtype=old.dtype)
    new[:used] = old[:used]
    return new


def _read(handle: Any, kind: Kind) -> TrecColumns:
    import pyarrow as pa

    built = _Columns(os.fstat(handle.fileno()).st_size)
    query_ids: dict[str, int] = {}
    # Chunks are parsed (pyarrow and numpy, mostly without the GIL) in threads while the
    # next is read and the one before is numbered and stored here: they overlap on a second
    # core. Chunks are stored in file order, so queries are numbered as they first appear.
    parsed = map_ahead(
        lambda chunk: (chunk[1], parse_chunk(*chunk, kind)), chunks(handle, kind), PARSERS
    )
    with contextlib.closing(parsed):  # however this ends, the parsing thread is done
        for cut, piece in parsed:  # the parser's Unsuitable is raised here
            if piece is not None:
                _store(built, cut, piece, query_ids)
    if not built.n:
        return _empty(kind)
    query, values, keys = (array[: built.n] for array in built.arrays)
    ordered = np.sort(keys)
    if np.any(ordered[1:] == ordered[:-1]):  # a doc twice for a query (or a hash collision)
        raise Unsuitable
    del ordered
    docs = pa.chunked_array(built.docs, pa.string())
    return TrecColumns(list(query_ids), query, docs, values, keys)


def chunks(handle: Any, kind: Kind) -> Iterator[tuple[bytes, int, bytes, int]]:
    """(block, where its last whole line ends, separator, fields) of each chunk of the
    file, in order; nothing when the first chunk's layout is not one the fast path reads."""
    layout: tuple[bytes, int] | None = None
    size = _CHUNK_BYTES
    while True:
        block = handle.read(size)
        end = len(block) < size
        cut = len(block) if end else block.rfind(b"\n") + 1
        if cut == 0 and not end:  # a line longer than a chunk: read it whole
            handle.seek(-len(block), os.SEEK_CUR)
            size *= 2
            continue
        # The partial line at the end is read again with the next chunk.
        handle.seek(cut - len(block), os.SEEK_CUR)
        if layout is None:
            layout = _layout(block, kind)
        if layout is not None and cut:  # (pyarrow refuses empty input)
            yield block, cut, *layout
        if end:
            return


def _store(built: _Columns, cut: int, piece: _Piece, query_ids: dict[str, int]) -> None:
    """Number a parsed chunk's queries (in order of first appearance) and add its lines."""
    distinct, local, docs, scores, keys = piece
    ids = [query_ids.setdefault(q, len(query_ids)) for q in distinct]
    built.add(cut, (np.asarray(ids, dtype=np.int32)[local], docs, scores, keys))


def _empty(kind: Kind) -> TrecColumns:
    import pyarrow as pa

    values = np.empty(0, dtype=np.float64 if kind == "run" else np.int64)
    empty = np.empty(0, dtype=np.int32)
    keys = np.empty(0, dtype=np.uint64)
    return TrecColumns([], empty, pa.chunked_array([], pa.string()), values, keys)


def _layout(chunk: bytes, kind: Kind) -> tuple[bytes, int] | None:
    """(separator, number of fields) from the first non-blank line; None if all blank."""
    start = 0
    while start < len(chunk):
        end = chunk.find(b"\n", start)
        end = len(chunk) if end < 0 else end + 1
        line = chunk[start:end]
        if line.strip():
            separator = b"\t" if b"\t" in line else b" "
            fields = line.count(separator) + 1
            if fields < 5 if kind == "run" else fields != 4:
                raise Unsuitable
            return separator, fields
        start = end
    return None


# A parsed chunk: (its distinct query ids, each line's index among them, doc chunks,
# values, keys).
_Piece = tuple[list[str], np.ndarray, list[Any], np.ndarray, np.ndarray]

# Grades of at most this many digits fit in 64 bits.
_GRADE_DIGITS = 18


def parse_chunk(block: bytes, cut: int, separator: bytes, fields: int, kind: Kind) -> _Piece | None:
    """The lines `block[:cut]`, parsed (see `_Piece`); None if blank. Touches no shared
    state: it runs in a thread beside the caller."""
    import pyarrow as pa
    import pyarrow.csv as csv

    other = b" " if separator == b"\t" else b"\t"
    # (The bytes past `cut` are checked too: they are the start of the next chunk.)
    if not block.isascii() or any(c in block for c in (other, *_OTHER_BYTES)):
        raise Unsuitable
    if _lone_return(block, cut):
        raise Unsuitable
    if b"#" in block and (block[:1] == b"#" or b"\n#" in block):
        raise Unsuitable  # a comment line: the line reader skips it, as trec_eval does
    if _empty_field(block, cut, separator):
        raise Unsuitable
    value = "f4" if kind == "run" else "f3"
    # Only the columns used are converted (pyarrow still counts every line's fields);
    # queries dictionary-encoded, so their distinct ids come with the parse.
    types = {
        "f0": pa.dictionary(pa.int32(), pa.string()),
        "f2": pa.string(),
        value: pa.float64() if kind == "run" else pa.string(),
    }
    table = csv.read_csv(
        _arrow_copy(block, cut),
        read_options=csv.ReadOptions(
            column_names=[f"f{i}" for i in range(fields)], block_size=_BLOCK_BYTES
        ),
        parse_options=csv.ParseOptions(
            delimiter=separator.decode(), quote_char=False, double_quote=False, escape_char=False
        ),
        convert_options=csv.ConvertOptions(
            column_types=types,
            include_columns=list(types),
            null_values=[],
            strings_can_be_null=False,
            check_utf8=False,  # ASCII, checked above
        ),
        memory_pool=_memory_pool(),
    )
    if table.num_rows == 0:
        return None
    values = table.column(value).chunks
    if kind == "run":
        scores = np.concatenate([to_numpy(chunk, np.float64) for chunk in values])
        if np.isnan(scores).any():
            raise Unsuitable
    else:
        scores = np.concatenate([_grades(chunk) for chunk in values])
    distinct, local = _queries(table.column("f0").chunks)
    query_hash = mix(string_hashes(strings_to_arrow(distinct)))[local]
    docs = table.column("f2").chunks
    doc_hash = np.concatenate([string_hashes(chunk) for chunk in docs])
    return distinct, local, docs, scores, mix(doc_hash ^ query_hash)


def _lone_return(block: bytes, cut: int) -> bool:
    """Whether `block[:cut]` holds a \\r not followed by \\n (chunks end after a \\n, so no
    pair is cut in two); three scans of the chunk only when it holds a \\r at all."""
    return b"\r" in block and block.count(b"\r", 0, cut) != block.count(b"\r\n", 0, cut)


def _empty_field(block: bytes, cut: int, separator: bytes) -> bool:
    """Whether a line of `block[:cut]` has an empty field: separators side by side, or at
    either end of a line, where str.split() would see fewer fields than pyarrow."""
    text = np.frombuffer(block, dtype=np.uint8, count=cut)
    sep = separator[0]
    if text[0] == sep or text[-1] == sep:
        return True
    # Pairs of bytes both at most a space (ASCII, no other whitespace: separators, line
    # ends and control characters) are rare; only those are looked at. A slice at a time,
    # into two small arrays the thread keeps: new arrays the size of the chunk, for each
    # chunk, took three times as long.
    low, both = _scratch()
    for start in range(0, cut - 1, _SCAN_BYTES):
        part = text[start : start + _SCAN_BYTES + 1]  # (one byte more: the pair across)
        n = part.size
        np.less_equal(part, 32, out=low[:n])
        np.logical_and(low[1:n], low[: n - 1], out=both[: n - 1])
        if not both[: n - 1].any():
            continue
        pairs = np.flatnonzero(both[: n - 1])
        left, right = part[pairs], part[pairs + 1]
        left_ends, right_ends = (left == 10) | (left == 13), (right == 10) | (right == 13)
        if np.any(((left == sep) & ((right == sep) | right_ends)) | (left_ends & (right == sep))):
            return True
    return False


_SCAN_BYTES = 1 << 20
_SCRATCH = threading.local()


def _scratch() -> tuple[np.ndarray, np.ndarray]:
    """Two boolean arrays of `_SCAN_BYTES + 1`, this thread's own, reused chunk after chunk."""
    arrays: tuple[np.ndarray, np.ndarray] | None = getattr(_SCRATCH, "arrays", None)
    if arrays is None:
        size = _SCAN_BYTES + 1
        arrays = _SCRATCH.arrays = (np.empty(size, dtype=bool), np.empty(size, dtype=bool))
    return arrays


def _queries(chunks: list[Any]) -> tuple[list[str], np.ndarray]:
    """The distinct query ids of dictionary-encoded chunks, in order of first appearance
    in the dictionaries, and each line's index among them."""
    distinct: dict[str, int] = {}
    local = []
    for chunk in chunks:
        ids = [distinct.setdefault(q, len(distinct)) for q in chunk.dictionary.to_pylist()]
        local.append(np.asarray(ids, dtype=np.int32)[to_numpy(chunk.indices, np.int32)])
    return list(distinct), np.concatenate(local)


def _grades(strings: Any) -> np.ndarray:
    """Grades as int64: plain decimal integers only (int() reads signs, underscores and
    other digits differently from pyarrow), of at most 18 digits (they fit in 64 bits)."""
    if not len(strings):
        return np.empty(0, dtype=np.int64)
    offsets = to_numpy(strings, np.int32, extra=1)
    text = np.frombuffer(strings.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    starts = (offsets[:-1] - offsets[0]).astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)  # at least 1: no empty field gets here
    digits = text - np.uint8(48)  # (bytes below "0" wrap round to above 9)
    negative = text[starts] == b"-"[0]
    wrong = digits > 9
    wrong[starts[negative]] = False
    count = lengths - negative
    if wrong.any() or count.min() < 1 or count.max() > _GRADE_DIGITS:
        raise Unsuitable
    first = starts + negative
    grades = np.zeros(offsets.size - 1, dtype=np.int64)
    for k in range(int(count.max())):
        more = count > k
        grades[more] = grades[more] * 10 + digits[first[more] + k]
    return np.where(negative, -grades, grades)


def _memory_pool() -> Any:
    """The C library's allocator for the tables of each chunk: pyarrow's default
    (mimalloc) keeps the pages of the freed tables, some 30 MiB more at the peak of a
    5M-line run; malloc gives them back, in the same time."""
    import pyarrow as pa

    return pa.system_memory_pool()


def _arrow_copy(block: bytes, cut: int) -> Any:
    """`block[:cut]` in memory of pyarrow's own: a copy (0.4 ms for 4 MB) into a buffer
    the thread keeps from chunk to chunk (a new one each time was 1.1 ms, its pages new).

    When a block of a chunk is malformed, pyarrow's reader raises while its threads still
    parse the other blocks. Were those views of Python bytes, the last thread to finish
    would take the GIL to release them; after an error exit has begun that aborts the
    process ("terminate called without an active exception", exit 134). pyarrow's memory
    is released without the GIL. (The tables pyarrow returns copy what they hold, so the
    next chunk may overwrite the buffer; after an error no chunk is parsed again, and
    the blocks still parsed only read it.)
    """
    import pyarrow as pa

    kept = getattr(_SCRATCH, "buffer", None)
    if kept is None or kept.size < cut:
        kept = _SCRATCH.buffer = pa.allocate_buffer(cut, memory_pool=_memory_pool())
    np.frombuffer(kept, dtype=np.uint8, count=cut)[:] = np.frombuffer(block, np.uint8, count=cut)
    return kept.slice(0, cut)


def query_groups(columns: TrecColumns) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Lines grouped by query: (permutation or None if already grouped, starts, lengths).

    Groups come in order of first appearance, lines in file order within a group.
    """
    query, n = columns.query, columns.query.size
    if n == 0:
        return None, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    order = None
    bounds = np.flatnonzero(query[1:] != query[:-1]) + 1
    if bounds.size + 1 != len(columns.query_ids):  # some query's lines are apart: sort
        order = np.argsort(query, kind="stable")
        query = query[order]
        bounds = np.flatnonzero(query[1:] != query[:-1]) + 1
    starts = np.concatenate(([0], bounds)).astype(np.int64)
    return order, starts, np.diff(np.append(starts, n))


def to_dicts(columns: TrecColumns) -> dict[str, dict[str, Any]]:
    """`{query_id: {doc_id: value}}` in file order, as the line reader builds it."""
    order, starts, lengths = query_groups(columns)
    query = columns.query if order is None else columns.query[order]
    ids = [columns.query_ids[q] for q in query[starts].tolist()]
    ends = (starts + lengths).tolist()
    result: dict[str, dict[str, Any]] = {}
    first = 0
    # Some 64k lines at a time, so no list of every doc id is held beside the dicts.
    while first < len(ids):
        last = max(first + 1, int(np.searchsorted(starts, starts[first] + _BATCH_LINES)))
        lo, hi = int(starts[first]), ends[last - 1]
        if order is None:
            docs = columns.docs.slice(lo, hi - lo).to_pylist()
            values = columns.values[lo:hi].tolist()
        else:
            docs = take(columns.docs, order[lo:hi]).to_pylist()
            values = columns.values[order[lo:hi]].tolist()
        for query_id, start, end in zip(
            ids[first:last], starts[first:last].tolist(), ends[first:last], strict=True
        ):
            result[query_id] = dict(
                zip(docs[start - lo : end - lo], values[start - lo : end - lo], strict=True)
            )
        first = last
    return result
