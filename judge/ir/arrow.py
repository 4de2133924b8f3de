"""numpy and pyarrow arrays, to and fro, and a vectorised hash of pyarrow strings.

pyarrow's own conversions (`pa.array`, `Array.to_numpy`) import pandas when it is
installed, which `judge ir` must not load; these go through the buffers instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_U = np.uint64
_BASE = _U(0x100000001B3)  # FNV-1's prime as the polynomial base of the string hash


def to_numpy(array: Any, dtype: type, extra: int = 0) -> np.ndarray:
    """A pyarrow array of numbers without nulls as numpy, without a copy (or the offsets
    of a string array, with `extra=1`)."""
    data: np.ndarray = np.frombuffer(array.buffers()[1], dtype=dtype)
    return data[array.offset : array.offset + len(array) + extra]


def to_arrow(values: np.ndarray) -> Any:
    """A numpy array of numbers as a pyarrow array, without a copy."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, values.size, [None, pa.py_buffer(values)])


def strings_to_arrow(strings: list[str]) -> Any:
    """Python strings as a pyarrow string array."""
    import pyarrow as pa

    encoded = [s.encode("utf-8") for s in strings]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    if lengths.sum() >= 2**31:
        raise ValueError("over 2 GB of strings: too many for one pyarrow string array")
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)


# MASKS[i] keeps the first i bytes of a little-endian 64-bit word.
_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(9)], dtype=_U)


def string_hashes(strings: Any) -> np.ndarray:
    """A 64-bit hash of each string of a pyarrow string array (equal strings, equal hashes).

    A polynomial over the string's 8-byte words, so a loop of a few numpy passes per 8
    bytes of the longest string. Not cryptographic: callers confirm equal hashes.
    """
    n = len(strings)
    buffers = strings.buffers()
    offsets = to_numpy(strings, np.int32, extra=1)
    lengths = np.diff(offsets).astype(np.int64)
    hashes: np.ndarray = lengths.astype(_U) * _U(0x9E3779B97F4A7C15)
    size = int(offsets[-1] - offsets[0]) if n else 0
    if size == 0:
        return hashes
    padded = np.zeros(size + 8, dtype=np.uint8)  # the last word may read past the end
    padded[:size] = np.frombuffer(buffers[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    # The 8 bytes starting at each byte, as one little-endian word (unaligned reads).
    words = np.ndarray((size,), dtype="<u8", buffer=padded, strides=(1,))
    starts = (offsets[:-1] - offsets[0]).astype(np.int64)
    for k in range(0, int(lengths.max()), 8):
        left = lengths - k
        word = words[np.minimum(starts + k, size - 1)] & _MASKS[np.clip(left, 0, 8)]
        hashes = np.where(left > 0, hashes * _BASE + word, hashes)
    return hashes


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads every input bit over the whole hash."""
    x = x ^ (x >> _U(30))
    x *= _U(0xBF58476D1CE4E5B9)
    x ^= x >> _U(27)
    x *= _U(0x94D049BB133111EB)
    x ^= x >> _U(31)
    return x


def take(strings: Any, rows: np.ndarray) -> Any:
    """`strings[rows]` of a pyarrow string array, chunked or not, gathered with numpy.

    (pyarrow's `take` imports pyarrow.compute, some 70 ms that `judge ir` need not pay,
    and on a chunked array joins all its chunks first: a copy of the whole column.)
    """
    import pyarrow as pa

    chunks = strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]
    rows = np.asarray(rows, dtype=np.int64)
    bounds = np.cumsum([0, *map(len, chunks)])
    which = np.searchsorted(bounds, rows, side="right") - 1
    lengths = np.empty(rows.size, dtype=np.int64)
    sources = []  # (chunk, the result's rows from it, their first bytes in its data)
    by_chunk = np.argsort(which, kind="stable")
    cuts = np.searchsorted(which[by_chunk], np.arange(len(chunks) + 1))
    for i, chunk in enumerate(chunks):
        at = by_chunk[cuts[i] : cuts[i + 1]]
        if at.size:
            wide_offsets = pa.types.is_large_string(chunk.type)
            offsets = to_numpy(chunk, np.int64 if wide_offsets else np.int32, extra=1)
            local = rows[at] - bounds[i]
            lengths[at] = offsets[local + 1] - offsets[local]
            sources.append((chunk, at, offsets[local].astype(np.int64)))
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if ends.size else 0
    gathered = np.empty(total, dtype=np.uint8)
    for chunk, at, first in sources:
        n, into = lengths[at], ends[at] - lengths[at]
        if not n.sum():
            continue  # (all empty: the chunk may have no data buffer)
        # Byte j of a row's run of bytes: from its first byte plus j, to its place plus j.
        step = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)
        gathered[np.repeat(into, n) + step] = data[np.repeat(first, n) + step]
    wide = total >= 2**31
    offsets_out = np.concatenate(([0], ends)).astype(np.int64 if wide else np.int32)
    buffers = [None, pa.py_buffer(offsets_out), pa.py_buffer(gathered)]
    return pa.Array.from_buffers(pa.large_string() if wide else pa.string(), rows.size, buffers)
