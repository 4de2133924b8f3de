"""`judge.lines.universal_lines`: the lines of bytes as Python's text mode splits them (on
LF, CRLF and CR alone), whatever the pieces a line is read in, each held to the limit."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

import judge.lines as lines
from judge.errors import InputFormatError

# Line ends, bytes other splitters take for line ends, and text.
BYTES = st.lists(
    st.sampled_from([b"a", b"bc", b"\r", b"\n", b"\r\n", b"\x0b", b"\x0c", b"\x1c", b"\xc2\x85"]),
    max_size=30,
).map(b"".join)


def _ends_cut(line: bytes) -> bytes:
    return line.removesuffix(b"\n").removesuffix(b"\r")


@given(data=BYTES, piece=st.sampled_from([1, 2, 3, 7, 1 << 20]))
def test_lines_are_those_of_text_mode_in_any_pieces(data: bytes, piece: int) -> None:
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=None)
    expected = [line.removesuffix("\n") for line in text]  # universal newlines
    original = lines._PIECE
    lines._PIECE = piece
    try:
        got = list(lines.universal_lines(io.BytesIO(data), "f", limit=1 << 20))
    finally:
        lines._PIECE = original
    assert b"".join(line for _, line in got) == data  # every byte, each line with its end
    assert [number for number, _ in got] == list(range(1, len(got) + 1))
    assert [_ends_cut(line).decode() for _, line in got] == expected


@pytest.mark.parametrize(
    ("data", "count", "refused"),
    [
        (b"abc\nabcd\n", 2, None),
        (b"abc\r\nabcd\r\n", 2, None),  # the line end is not counted
        (b"abcd\rabcd", 2, None),
        (b"abc\rabcde\rab", None, 2),
        (b"ab\n\nabcdefgh", None, 3),
    ],
)
def test_the_limit_holds_each_line(data: bytes, count: int | None, refused: int | None) -> None:
    read = lines.universal_lines(io.BytesIO(data), "f", limit=4)
    if refused is None:
        assert len(list(read)) == count
        return
    with pytest.raises(InputFormatError, match=f"f:{refused}: the line is longer than 4 bytes"):
        list(read)
