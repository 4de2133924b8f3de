"""judge.formatting: what a terminal would act on shown as an escape (terminal_text), and a
count printed with its noun in the right number (counted)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judge.formatting import counted, terminal_text

# C0 but tab and newline, DEL, C1, and the bidi marks, embeddings, overrides and isolates.
UNSAFE = (
    {chr(c) for c in range(0x20) if chr(c) not in "\t\n"}
    | {chr(c) for c in range(0x7F, 0xA0)}
    | set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
)


def test_each_unsafe_character_is_its_escape_and_other_text_stays() -> None:
    assert terminal_text("run2 \u202eevil\x1b]0;x\x07") == "run2 \\u202eevil\\u001b]0;x\\u0007"
    assert terminal_text("naïve 中文 emoji 🙂\tand\nlines") == "naïve 中文 emoji 🙂\tand\nlines"
    assert terminal_text("a\tb\nc", one_line=True) == "a\\u0009b\\u000ac"


@given(st.text())
def test_no_unsafe_character_is_left_and_json_stays_the_same_json(text: str) -> None:
    shown = terminal_text(text)
    assert not UNSAFE & set(shown)
    assert not UNSAFE & set(terminal_text(text, one_line=True)) - {"\t", "\n"}
    assert "\n" not in terminal_text(text, one_line=True)
    document = json.dumps({"name": text, "tags": [text]}, indent=2, ensure_ascii=False)
    assert json.loads(terminal_text(document)) == {"name": text, "tags": [text]}


@pytest.mark.parametrize(
    ("count", "word", "plural", "shown"),
    [
        (0, "row", "", "0 rows"),
        (1, "row", "", "1 row"),
        (2, "row", "", "2 rows"),
        (1, "run query", "run queries", "1 run query"),
        (3, "run query", "run queries", "3 run queries"),
        (1, "entry", "entries", "1 entry"),
    ],
)
def test_one_is_singular_and_every_other_count_plural(count, word, plural, shown):
    assert counted(count, word, plural) == shown


def test_noted_joins_the_names_that_share_a_note():
    from judge.formatting import noted

    assert noted({"a": "x", "b": "y", "c": "x"}) == ["a, c: x.", "b: y."]
    assert noted({}) == []
