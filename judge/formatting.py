"""What every report shares: the page style, HTML escaping, how a number is printed and
how a count is (its noun in the right number)."""

from __future__ import annotations

import html
import math
import os
import re
import shlex
from collections.abc import Mapping
from typing import Any

# One stylesheet for report.html and compare.html; CJK font fallbacks for Chinese data.
CSS = """
body{font:14px/1.45 system-ui,"Noto Sans CJK SC","PingFang SC","Microsoft YaHei",sans-serif;
margin:24px auto;max-width:1100px;color:#1b1b1b}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}td.n{text-align:right;
font-variant-numeric:tabular-nums}.plots{display:flex;flex-wrap:wrap;gap:16px}
.plot{border:1px solid #eee;padding:6px}.bad{color:#b00020}.ok{color:#1b5e20}
details{margin:6px 0}summary{cursor:pointer}details.sample{border-left:3px solid #3f6fb5;
padding:2px 0 6px 10px;margin:14px 0}details.sample>summary{font-size:15px;margin-bottom:4px}
code{background:#f6f6f6;padding:0 3px}
.small{color:#666;font-size:12px}
"""

MISSING = "–"  # an undefined value (None or NaN) in a table

# What a terminal acts on instead of showing: C0 controls but tab and newline, DEL, C1
# (ESC starts an escape sequence, OSC retitles the window, CSI 0x9b moves the cursor), and
# the bidi marks, embeddings, overrides and isolates that reorder the text after them.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[{_CONTROLS}]")
_UNSAFE_IN_A_LINE = re.compile(f"[{_CONTROLS}\t\n]")


def terminal_text(text: str, *, one_line: bool = False) -> str:
    """Text for a terminal: each control or bidi character written as its escape \\uXXXX.

    The same escape is JSON's, so JSON text stays JSON of the same values (those characters
    can only be inside its strings). With one_line=True, tabs and newlines are escaped too
    (a table cell, a name).
    """
    pattern = _UNSAFE_IN_A_LINE if one_line else _UNSAFE
    return pattern.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def shell_word(value: Any) -> str:
    """A path or argument of a command shown for the user to run: `terminal_text` of it on
    one line, then quoted as a shell word (a space or `;` in it stays one argument)."""
    return shlex.quote(terminal_text(str(value), one_line=True))


def escape(value: Any) -> str:
    """HTML-escaped text of any value, quotes included (safe in attributes too)."""
    return html.escape(str(value), quote=True)


def number(value: float | None, digits: int = 3, sign: str = "") -> str:
    """A number with fixed decimals (sign="+" always shows the sign); MISSING if undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return f"{value:{sign}.{digits}f}"


def p_text(value: float | None, digits: int = 3) -> str:
    """A p-value for a table: `number` of it, but below 10^-digits `<0.001` (the smallest
    p judge compare gives, 1/200,001, is not 0.000); MISSING if undefined."""
    if value is not None and not math.isnan(value) and value < 10.0**-digits:
        return f"<{10.0**-digits:.{digits}f}"
    return number(value, digits)


def pairs_used(total: int, used: dict[str, int]) -> str:
    """`40 paired samples`, and, when some metrics used fewer pairs (undefined on a side),
    how many each of those used: `40 paired samples (answer_relevancy: 30, the others
    undefined on a side)`."""
    fewer = [f"{metric}: {n}" for metric, n in used.items() if n != total]
    head = counted(total, "paired sample")
    return head + (f" ({', '.join(fewer)}, the others undefined on a side)" if fewer else "")


def noted(notes: Mapping[str, str]) -> list[str]:
    """Notes by name as lines, one a note, names that share one joined: {"a": "x", "b": "x"}
    -> ["a, b: x."] (the intervals' notes under a table)."""
    names: dict[str, list[str]] = {}
    for name, note in notes.items():
        names.setdefault(note, []).append(name)
    return [f"{', '.join(shared)}: {note}." for note, shared in names.items()]


def counted(count: int, word: str, plural: str = "") -> str:
    """A count and its noun in the right number: "1 row", "2 rows" (`plural` for a noun
    that takes more than an "s": "1 run query", "2 run queries")."""
    return f"{count} {word if count == 1 else plural or word + 's'}"


def page(title: str, body: str) -> str:
    """A whole self-contained HTML page: the shared stylesheet, a title and the body."""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>{body}</body></html>\n"
    )


def write_page(text: str, path: str | os.PathLike[str]) -> None:
    """Write an HTML page as UTF-8."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)
