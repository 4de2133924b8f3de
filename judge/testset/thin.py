"""Cheap rules that keep thin chunks (too short, tables of contents, boilerplate) from
being picked as seeds, before any LLM call. Thin chunks stay in the index: a retriever
may still return them, and pooled judgments may still grade them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from judge.testset.text import normalise, size

MIN_WORDS = 25  # about two sentences: less rarely supports a question worth asking
_TOC_LINE = re.compile(r"(\.{3,}|…{2,}|\s)\s*\d{1,4}\s*$")
_BOILERPLATE = re.compile(
    r"all rights reserved|copyright|©|cookie|privacy policy|terms of (use|service)|"
    r"版权所有|隐私政策|保留所有权利",
    re.IGNORECASE,
)


def thin_reason(text: str) -> str | None:
    """Why a chunk is too thin to ask about, or None when it is fine."""
    words = size(text)
    if words < MIN_WORDS:
        return "too_short"
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) >= 4 and sum(bool(_TOC_LINE.search(line)) for line in lines) / len(lines) >= 0.5:
        return "table_of_contents"
    visible = [c for c in text if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    if visible and letters / len(visible) < 0.5:
        return "mostly_symbols_or_numbers"
    if _BOILERPLATE.search(text) and words < 3 * MIN_WORDS:
        return "boilerplate"
    return None


def repeated_texts(texts: Sequence[str], doc_ids: Sequence[str], min_docs: int = 3) -> set[str]:
    """Normalised texts found in at least `min_docs` documents: headers, footers, notices."""
    docs_of: dict[str, set[str]] = {}
    for text, doc in zip(texts, doc_ids, strict=True):
        docs_of.setdefault(normalise(text), set()).add(doc)
    counts = Counter({t: len(d) for t, d in docs_of.items()})
    return {t for t, c in counts.items() if c >= min_docs}
