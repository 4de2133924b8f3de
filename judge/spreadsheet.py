"""Text cells of the CSV files judge writes, made safe to open in a spreadsheet.

A cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is taken for a
formula by spreadsheet programs (OWASP's "CSV injection": `=HYPERLINK(...)` in a question
becomes a link, worse formulas run). Such a text cell is written with a single quote in
front, which spreadsheets show as text; so is a text that starts with a quote already, so
that removing one leading quote (`cell_text`) always gives the text back. Numbers are
never changed: a score of -0.5 stays a number.
"""

from __future__ import annotations

from typing import Any

QUOTE = "'"
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", QUOTE)


def safe_cell(value: Any) -> Any:
    """value, with a quote in front when it is text a spreadsheet could take for a formula
    (or text that starts with a quote); anything but a string as it is."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return QUOTE + value
    return value


def cell_text(cell: str) -> str:
    """The text a `safe_cell` was made from: one leading quote removed."""
    return cell[1:] if cell.startswith(QUOTE) else cell
