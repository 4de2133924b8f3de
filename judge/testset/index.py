"""The corpus index: BM25 (`bm25s`) always, dense vectors when an embedding model is given.

It picks multi-hop partners, finds the gold chunk's rank (difficulty) and pools candidate
chunks for relevance grading. Rankings are deterministic: equal scores keep corpus order.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from judge.testset.corpus import Corpus
from judge.testset.text import tokens

DIFFICULTY_DEPTH = 50  # the gold chunk's rank is recorded within this depth


class Index:
    """BM25 over the corpus's chunks, and optionally their embeddings.

    Args:
        corpus: the chunks to index.
        vectors: one embedding per chunk, in corpus order, or None for BM25 only.
    """

    def __init__(self, corpus: Corpus, vectors: Sequence[Sequence[float]] | None = None):
        import bm25s  # imported here: only the test-set builder needs it

        self.corpus = corpus
        self._bm25: Any = bm25s.BM25()
        # An empty token list would break bm25s; "" matches nothing a query holds.
        self._bm25.index([tokens(c.text) or [""] for c in corpus.chunks], show_progress=False)
        self._vectors = None if vectors is None else _unit(np.asarray(vectors, dtype=np.float64))
        self.position = {c.chunk_id: i for i, c in enumerate(corpus.chunks)}  # id -> position

    @property
    def dense(self) -> bool:
        """Whether dense vectors are available."""
        return self._vectors is not None

    def bm25(self, query: str, k: int) -> list[int]:
        """Positions of the top k chunks for a query by BM25 (only chunks with a score > 0)."""
        terms = tokens(query)
        if not terms:
            return []
        scores = np.asarray(self._bm25.get_scores(terms), dtype=np.float64)
        return _top(scores, k, positive=True)

    def nearest(self, vector: Sequence[float], k: int) -> list[int]:
        """Positions of the k chunks nearest a query vector (cosine); [] without vectors."""
        if self._vectors is None:
            return []
        query = _unit(np.asarray([vector], dtype=np.float64))[0]
        return _top(self._vectors @ query, k, positive=False)

    def cosine(self, a: int, b: int) -> float | None:
        """Cosine similarity of two chunks, or None without vectors."""
        if self._vectors is None:
            return None
        return float(self._vectors[a] @ self._vectors[b])


def pool(
    index: Index,
    question: str,
    depth: int,
    vector: Sequence[float] | None = None,
    exclude: Collection[str] = (),
) -> list[int]:
    """Up to `depth` chunk positions to grade for a question: its BM25 and dense results
    taken in turn, without the chunks in `exclude` (the gold ones, graded 2 anyway)."""
    bm25 = index.bm25(question, depth)
    dense = index.nearest(vector, depth) if vector is not None else []
    padded = max(len(bm25), len(dense))
    taken: list[int] = []
    for pair in zip(*(r + [None] * (padded - len(r)) for r in (bm25, dense)), strict=True):
        for position in pair:
            if position is None or position in taken or len(taken) >= depth:
                continue
            if index.corpus.chunks[position].chunk_id not in exclude:
                taken.append(position)
    return taken


def rank_of(ranking: Sequence[int], positions: Sequence[int]) -> int | None:
    """1-based rank of the first of `positions` in a ranking, or None when absent."""
    wanted = set(positions)
    return next((r for r, p in enumerate(ranking, start=1) if p in wanted), None)


def _top(scores: np.ndarray, k: int, *, positive: bool) -> list[int]:
    order = np.lexsort((np.arange(len(scores)), -scores))  # score down, then corpus order
    if positive:
        order = order[scores[order] > 0]
    return [int(i) for i in order[:k]]


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
