"""Word overlap of a claim with the text it should come from: a check that needs no model.

A claims call can return claims of the wrong text (a prompt example's, or the other text's
when several are split together). A claim drawn from its text shares most of its content
words with it (or with the question, which resolves its pronouns); a copied one does not.
"""

from __future__ import annotations

import functools
import re

# CJK characters carry a word's meaning each and are not space-separated, so they are tokens.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")

# Below this share of its content words found in its text, a claim is not drawn from it.
MIN_SHARE = 0.5


@functools.lru_cache(maxsize=4096)
def content_tokens(text: str) -> frozenset[str]:
    """The words that carry content: numbers, words of 4+ letters, CJK characters.

    Kept for the last few thousand texts: a sample's question and contexts are compared
    with each of its claims and grades, and a replayed run asks again for every row.
    """
    return frozenset(
        t
        for t in _TOKEN.findall(text.lower())
        if len(t) >= 4 or any(c.isdigit() for c in t) or _CJK_CHAR.match(t)
    )


def share_in(claim: str, source: str) -> float:
    """Share of the claim's content words that occur in source (1.0 when it has none)."""
    words = content_tokens(claim)
    if not words:
        return 1.0
    return len(words & content_tokens(source)) / len(words)


def drawn_from(claim: str, text: str, question: str = "") -> bool:
    """Whether the claim comes from text: most of its content words are in the text or in
    the question (claims name what a pronoun refers to from the question)."""
    return share_in(claim, f"{text}\n{question}") >= MIN_SHARE


def _cjk(text: str) -> bool:
    return _CJK_CHAR.search(text) is not None


def shares_content(text: str, other: str) -> bool:
    """Whether text has a content word in common with other; True when one is written in
    CJK characters and the other not, where words cannot be compared."""
    if _cjk(text) != _cjk(other):
        return True
    return not content_tokens(text).isdisjoint(content_tokens(other))
