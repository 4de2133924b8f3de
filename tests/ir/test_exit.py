"""`judge ir` ends cleanly when a file is malformed: no thread is left holding Python's objects.

pyarrow's CSV reader parses a chunk in blocks on its own threads; when one block is
malformed it raises at once while the other blocks are still being parsed. If those blocks
are views of Python bytes, the thread that finishes last must take the GIL to let go of
them, and at interpreter exit (an error exit follows a malformed chunk quickly) that ends
the process with "terminate called without an active exception" (exit 134).
"""

from __future__ import annotations

import sys
from typing import Any

import judge.ir.trec_columns as columns


def malformed_chunk() -> tuple[bytes, int]:
    """A run chunk of many blocks whose first block is malformed (a line of 4 fields)."""
    lines = [f"q{i // 100} Q0 d{i} {i % 100 + 1} {1.0 / (i + 1)!r} tag\n" for i in range(40_000)]
    lines[20] = "q0 Q0 dX 21\n"
    block = "".join(lines).encode()
    return block, len(block)


def test_a_failed_parse_leaves_no_reference_to_the_chunk_in_pyarrows_threads(
    monkeypatch: Any,
) -> None:
    import pyarrow as pa

    monkeypatch.setattr(columns, "_BLOCK_BYTES", 16 << 10)  # many blocks, many tasks
    block, cut = malformed_chunk()
    alone = sys.getrefcount(block)
    held = 0
    for _ in range(150):
        try:
            columns.parse_chunk(block, cut, b" ", 6, "run")
        except pa.ArrowInvalid:
            pass
        else:
            raise AssertionError("the malformed chunk was parsed")
        # Right after the error: a block still being parsed would still refer to `block`.
        held += sys.getrefcount(block) > alone
    assert held == 0, f"{held} of 150 failed parses left the chunk referenced by pyarrow"
