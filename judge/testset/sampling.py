"""The question mix and the seed chunks: how many of each type, and from which chunks.

Seeds are drawn with a seeded RNG, stratified by document: documents take turns, so no
file dominates, and the cost grows with the questions asked for, not with the corpus.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping

from judge.errors import JudgeError
from judge.testset.corpus import Chunk
from judge.testset.items import QUESTION_TYPES, QuestionType

DEFAULT_MIX: dict[QuestionType, float] = {
    "single_hop": 0.3,
    "paraphrased": 0.15,
    "multi_hop": 0.2,
    "negation": 0.1,
    "calculation": 0.1,
    "unanswerable": 0.15,
}
# A mix as given: "single_hop=0.5,multi_hop=0.5", shares by type name, or parse_mix's own
# result; None for DEFAULT_MIX.
MixLike = str | Mapping[str, float] | Mapping[QuestionType, float] | None
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


class MixError(JudgeError):
    """A --mix that names an unknown type, has a bad share or does not sum to 1."""


def parse_mix(text: MixLike) -> dict[QuestionType, float]:
    """Shares by question type from `single_hop=0.5,multi_hop=0.5` (or a mapping)."""
    if text is None:
        return dict(DEFAULT_MIX)
    if isinstance(text, str):
        pairs: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = part.partition("=")
            try:
                pairs[name.strip()] = float(value) if sep else float("nan")
            except ValueError:
                raise MixError(f"--mix {part!r}: write TYPE=SHARE, e.g. single_hop=0.5") from None
    else:
        pairs = {str(name): share for name, share in text.items()}
    mix: dict[str, float] = {}
    for name, share in pairs.items():
        if name not in QUESTION_TYPES:
            raise MixError(
                f"--mix: unknown question type {name!r}; the types are {', '.join(QUESTION_TYPES)}"
            )
        if not 0 <= share <= 1:
            raise MixError(f"--mix {name}: the share must be from 0 to 1, got {share}")
        mix[name] = share
    total = sum(mix.values())
    if abs(total - 1) > 1e-6:
        raise MixError(f"--mix: the shares sum to {total:g}, not 1")
    return {t: mix[t] for t in QUESTION_TYPES if mix.get(t, 0) > 0}


def allocate(n: int, mix: Mapping[QuestionType, float]) -> dict[QuestionType, int]:
    """Questions per type summing to n: floors, then the largest remainders (type order on ties)."""
    exact = {t: n * share for t, share in mix.items()}
    counts = {t: int(v) for t, v in exact.items()}
    left = n - sum(counts.values())
    for t in sorted(exact, key=lambda t: (-(exact[t] - counts[t]), QUESTION_TYPES.index(t)))[:left]:
        counts[t] += 1
    return counts


def numbers_in(text: str) -> int:
    """How many numbers a text holds (a calculation needs at least two)."""
    return len(_NUMBER.findall(text))


def stratified_order(chunks: list[Chunk], seed: int) -> list[Chunk]:
    """Chunks in the order seeds are taken: documents take turns (in a shuffled order),
    each document's chunks shuffled."""
    rng = random.Random(seed)
    by_doc: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    docs = sorted(by_doc)
    rng.shuffle(docs)
    for doc in docs:
        rng.shuffle(by_doc[doc])
    order: list[Chunk] = []
    depth = 0
    while len(order) < len(chunks):
        order += [by_doc[d][depth] for d in docs if depth < len(by_doc[d])]
        depth += 1
    return order


class SeedPool:
    """Hands out seed chunks in stratified order, each chunk once, honouring type needs."""

    def __init__(self, chunks: list[Chunk], seed: int):
        self._order = stratified_order(chunks, seed)
        self._used: set[str] = set()

    def take(self, qtype: QuestionType, count: int) -> list[Chunk]:
        """Up to `count` unused seeds fit for the type (fewer when the corpus runs out)."""
        picked: list[Chunk] = []
        for chunk in self._order:
            if len(picked) == count:
                break
            if chunk.chunk_id in self._used:
                continue
            if qtype == "calculation" and numbers_in(chunk.text) < 2:
                continue
            picked.append(chunk)
            self._used.add(chunk.chunk_id)
        return picked
