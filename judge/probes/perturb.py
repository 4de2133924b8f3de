"""The probes' perturbations of one sample: pure functions of text, seeded where random.

Each keeps what a faithful judge should care about (the claims, the contexts' content) and
changes what it should not (context order, filler, how the answer is cut into sentences).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

# CJK characters (Chinese, Japanese kana, Korean); a text mostly made of them is "zh" here.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")

# Content-free filler: it restates nothing and adds no claim a context could support.
FILLER = {
    "en": "To summarise, as noted above, this is the answer to the question. In other words, "
    "what has been said above is what matters here.",
    "zh": "总之，如上所述，这就是对这个问题的回答。换句话说，上面所说的就是这里的要点。",
}

# A sentence ends at . ! ? followed by space or the end (not 3.14), or at 。！？ (no space).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")


def language(text: str) -> str:
    """ "zh" when CJK characters outnumber Latin letters in text, else "en"."""
    return "zh" if len(_CJK.findall(text)) > len(_LATIN.findall(text)) else "en"


def pad(answer: str) -> str:
    """The answer followed by content-free filler in its language."""
    return f"{answer.rstrip()}{'' if language(answer) == 'zh' else ' '}{FILLER[language(answer)]}"


def sentences(text: str) -> list[str]:
    """The sentences of text, each with its end mark, in order (blank lines dropped)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def joined(text: str) -> str:
    """The sentences of text joined into one: each end mark but the last becomes a
    semicolon ("A; B; C." or "甲；乙。"), so every claim stays, in one sentence."""
    parts = sentences(text)
    if len(parts) < 2:
        return text.strip()
    head = [re.sub(r"[.!?。！？]+$", "", p) for p in parts[:-1]]
    zh = language(text) == "zh"
    return ("；" if zh else "; ").join([*head, parts[-1]])


def one_per_line(text: str) -> str:
    """The sentences of text, each on its own line."""
    return "\n".join(sentences(text))


RESPLITS = {"joined": joined, "lines": one_per_line}


def permutation(n: int, seed: int, row: int) -> list[int]:
    """A seeded shuffle of range(n), never the identity when n >= 2 (then rotated by one):
    the order probe must move something. Seeded per row, so a row keeps its shuffle
    whatever else is in the data."""
    order = list(range(n))
    random.Random(f"{seed}:{row}").shuffle(order)
    if n >= 2 and order == list(range(n)):
        order = order[1:] + order[:1]
    return order


def reorder(items: Sequence[T], order: Sequence[int]) -> list[T]:
    """items in the new order: position i holds items[order[i]]."""
    return [items[k] for k in order]
