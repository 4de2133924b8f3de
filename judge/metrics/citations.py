"""Finding citations like [1] or [2, 3] in an answer: which statement cites which context."""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARKER = re.compile(r"\[(\d+(?:\s*[,，]\s*\d+)*)\]")
# A sentence ends at . ! ? (or their full-width forms) followed by space, a marker or the end; the
# markers that follow the punctuation ("... in 1991. [2]") still belong to that sentence.
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.!?,;:。！？，；：])")
_SENTENCE = re.compile(r".+?(?:[.!?](?=\s|$|\[)|[。！？]|$)(?:\s*\[[\d,， ]+\])*", re.S)


@dataclass(frozen=True)
class Citation:
    """One statement of the answer and one context it cites (0-based; None if out of range)."""

    statement: str
    context: int | None
    marker: int  # the number as written, 1-based


def find_citations(answer: str, n_contexts: int) -> list[Citation]:
    """Every (statement, cited context) pair, in order; [n] refers to the n-th context."""
    found = []
    for match in _SENTENCE.finditer(answer):
        sentence = match.group(0).strip()
        markers = [int(n) for group in _MARKER.findall(sentence) for n in re.split(r"[,，]", group)]
        if not markers:
            continue
        statement = _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(_MARKER.sub("", sentence).split()))
        for marker in dict.fromkeys(markers):
            context = marker - 1 if 1 <= marker <= n_contexts else None
            found.append(Citation(statement, context, marker))
    return found
