"""judge.formatting.counted: a count printed with its noun in the right number."""

from __future__ import annotations

import pytest

from judge.formatting import counted


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
