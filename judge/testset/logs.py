"""Real questions from logs: masking personal data, normalising, clustering near
duplicates with their counts, and sampling clusters by frequency with a floor.

Masking comes first: nothing unmasked is clustered, written or sent to a model.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.errors import InputFormatError
from judge.testset.text import jaccard, normalise, shingles

QUESTION_COLUMNS = ("question", "query", "user_input", "q", "text")
NEAR_DUPLICATE = 0.8
_MASKS = (
    # ASCII classes: a Chinese character before an address or number is not part of it.
    ("EMAIL", re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")),
    # 13-19 digits in groups (a payment card), before phone numbers take a part of one.
    ("CARD", re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")),
    ("PHONE", re.compile(r"(?<![A-Za-z0-9+])\+?\d[\d ()-]{6,}\d(?!\d)")),
)


def mask(text: str) -> tuple[str, list[str]]:
    """The text with emails, card-like numbers and phone numbers replaced by [EMAIL],
    [CARD], [PHONE], and the kinds masked."""
    kinds = []
    for kind, pattern in _MASKS:
        text, count = pattern.subn(f"[{kind}]", text)
        kinds += [kind] * count
    return text, kinds


@dataclass
class Cluster:
    """Log questions that are the same but for case, spacing or a few characters."""

    text: str  # the most frequent member, masked
    count: int = 0
    members: dict[str, int] = field(default_factory=dict)  # masked text -> count
    masked: list[str] = field(default_factory=list)


def read_questions(
    records: Sequence[Mapping[str, Any]], source: str, column: str | None
) -> list[str]:
    """The question of each log row (the column named, or the first known one present)."""
    if not records:
        raise InputFormatError(f"{source}: the log is empty")
    present = list(dict.fromkeys(k for r in records for k in r))
    name = column or next((c for c in QUESTION_COLUMNS if c in present), None)
    if name is None or name not in present:
        raise InputFormatError(
            f"{source}: no question column (looked for {column or ', '.join(QUESTION_COLUMNS)}; "
            f"columns: {', '.join(present)}); map yours with --column question=NAME"
        )
    return [str(r[name]) for r in records if isinstance(r.get(name), str) and r[name].strip()]


def cluster(questions: Sequence[str]) -> list[Cluster]:
    """Clusters of masked questions, exact duplicates first merged by normalised text, then
    near duplicates (character-trigram Jaccard >= 0.8) joined greedily, most frequent
    first; ordered by count (then first appearance)."""
    exact: dict[str, Cluster] = {}
    for raw in questions:
        text, kinds = mask(raw.strip())
        key = normalise(text).rstrip("?？!！.。 ")
        group = exact.setdefault(key, Cluster(text))
        group.count += 1
        group.members[text] = group.members.get(text, 0) + 1
        group.masked += kinds
    ordered = sorted(exact.values(), key=lambda c: -c.count)  # stable: first seen wins ties
    merged: list[tuple[set[str], Cluster]] = []
    for group in ordered:
        grams = shingles(group.text)
        home = next((c for g, c in merged if jaccard(grams, g) >= NEAR_DUPLICATE), None)
        if home is None:
            merged.append((grams, group))
            continue
        home.count += group.count
        for text, count in group.members.items():
            home.members[text] = home.members.get(text, 0) + count
        home.masked += group.masked
    for _, group in merged:
        group.text = max(group.members, key=lambda t: group.members[t])  # first on ties
    return [c for _, c in merged]


def sample(clusters: Sequence[Cluster], n: int, seed: int, floor: float = 1.0) -> list[Cluster]:
    """n clusters without replacement, each drawn with weight count + floor (so frequent
    questions dominate but rare ones keep a chance); seeded."""
    rng = random.Random(seed)
    # Efraimidis-Spirakis: the n largest u ** (1 / weight) are a weighted sample.
    keyed = [
        (math.log(rng.random() or 1e-300) / (c.count + floor), i) for i, c in enumerate(clusters)
    ]
    chosen = sorted(keyed, reverse=True)[:n]
    return [clusters[i] for _, i in chosen]
