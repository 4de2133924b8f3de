"""Rank judged docs while a TREC run file is read, keeping none of the run's lines.

A run file grouped by query (every query's lines together, as systems write them) is
read a chunk at a time; each chunk's lines are matched against the judgments, checked
for docs listed twice, and each judged doc found is ranked among its query's lines (the
docs scored higher counted, score ties with other docs noted), then the lines are
dropped: what stays is, per judged doc found, its score and rank and, for the few whose
score another doc of their query shares, the ids of those docs. A query's lines that run
on into the next chunk wait for it, so every check sees whole queries.

Anything else (a run not grouped by query, a file the fast reader leaves to the line
reader, a hash collision) returns None: the caller reads the file as before, with the
same values and the line reader's errors.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from judge.ir.arrow import mix, take
from judge.ir.rank_counts import count_above
from judge.ir.ranking import Pairs, RankedJudgments, ranked_judgments
from judge.ir.trec import PathLike
from judge.ir.trec_columns import (
    PARSERS,
    TrecColumns,
    Unsuitable,
    chunks,
    parse_chunk,
)
from judge.threads import map_ahead

_BITS = 22  # bits of the bitmap that lets few run lines through to the exact key search


@dataclass
class _Judged:
    """The judgments, grouped by query in sorted query order, and what finds them."""

    qids: list[str]
    position: dict[str, int]
    query: np.ndarray  # judged query index of each judged doc
    keys: np.ndarray  # (query, doc) hash of each judged doc
    docs: Any  # doc ids (pyarrow)
    grades: np.ndarray
    by_key: np.ndarray = field(init=False)  # judged docs in key order
    ordered: np.ndarray = field(init=False)  # their keys, sorted
    bitmap: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.by_key = np.argsort(self.keys)
        self.ordered = self.keys[self.by_key]
        self.bitmap = np.zeros(1 << _BITS, dtype=bool)
        self.bitmap[self.ordered >> np.uint64(64 - _BITS)] = True

    def match(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions in `keys` of judged docs' keys, and which judged doc each is."""
        maybe = np.flatnonzero(self.bitmap[keys >> np.uint64(64 - _BITS)])
        if not self.ordered.size or not maybe.size:
            return maybe[:0], maybe[:0]
        # The keys searched in ascending order: each search starts where the last one
        # ended, so it reads memory near it (in random order, a cache miss a step).
        maybe = maybe[np.argsort(keys[maybe])]
        wanted = keys[maybe]
        at = np.minimum(np.searchsorted(self.ordered, wanted), self.ordered.size - 1)
        hit = self.ordered[at] == wanted
        # (Positions back in ascending order, as the caller's segments need.)
        rows, judged = maybe[hit], self.by_key[at[hit]]
        order = np.argsort(rows)
        return rows[order], judged[order]


def judged_from(qrels: TrecColumns) -> _Judged:
    """The judgments of a qrels file read into columns, ready to be matched."""
    qids = sorted(qrels.query_ids)
    position = {q: i for i, q in enumerate(qids)}
    judged_of = np.array([position[q] for q in qrels.query_ids], dtype=np.int64)[qrels.query]
    order = np.argsort(judged_of, kind="stable")
    return _Judged(
        qids=qids,
        position=position,
        query=judged_of[order],
        keys=qrels.keys[order],
        docs=take(qrels.docs, order),
        grades=qrels.values[order].astype(np.float64),
    )


@dataclass
class _Lines:
    """Lines of the run not yet checked: the last query of a chunk, then the next chunk."""

    query: np.ndarray  # run query index of each line (order of first appearance)
    docs: list[Any]  # pyarrow string arrays, one after another
    scores: np.ndarray
    keys: np.ndarray

    def then(self, other: _Lines) -> _Lines:
        if not self.query.size:
            return other
        return _Lines(
            np.concatenate((self.query, other.query)),
            self.docs + other.docs,
            np.concatenate((self.scores, other.scores)),
            np.concatenate((self.keys, other.keys)),
        )

    def split(self, at: int) -> tuple[_Lines, _Lines]:
        """The lines before `at` and from `at` on."""
        docs = _slice_docs(self.docs, at)
        return (
            _Lines(self.query[:at], docs[0], self.scores[:at], self.keys[:at]),
            _Lines(self.query[at:], docs[1], self.scores[at:], self.keys[at:]),
        )


def _slice_docs(docs: list[Any], at: int) -> tuple[list[Any], list[Any]]:
    before, after, seen = [], [], 0
    for array in docs:
        n = len(array)
        if seen + n <= at:
            before.append(array)
        elif seen >= at:
            after.append(array)
        else:
            before.append(array.slice(0, at - seen))
            after.append(array.slice(at - seen))
        seen += n
    return before, after


class _Stream:
    """What is kept of the run as its chunks are checked: per judged doc found, its rank."""

    def __init__(self, judged: _Judged, least_grade: int):
        self.judged, self.least_grade = judged, least_grade
        self.run_qids: list[str] = []
        self.run_index: dict[str, int] = {}
        self.to_judged: list[int] = []  # judged query index of each run query, or -1
        self.lengths: list[tuple[int, int]] = []  # (run query, lines) of each query checked
        # Per chunk, for each judged doc found that is ranked: which judged doc it is, its
        # score, its rank ignoring ties, and whether another doc of its query shares its score.
        self.found: list[np.ndarray] = []
        self.scores: list[np.ndarray] = []
        self.ranks: list[np.ndarray] = []
        self.tied: list[np.ndarray] = []
        # judged query -> score -> sorted ids of the docs that share a judged doc's score
        self.ties: dict[int, dict[float, list[str]]] = {}
        self.pending = _Lines(
            np.empty(0, np.int64), [], np.empty(0, np.float64), np.empty(0, np.uint64)
        )

    def add(self, piece: Any, last: bool) -> None:
        """Take a parsed chunk; check every query it completes."""
        if piece is not None:
            distinct, local, docs, scores, keys = piece
            ids = [self._number(q) for q in distinct]
            lines = _Lines(np.asarray(ids, dtype=np.int64)[local], docs, scores, keys)
            self.pending = self.pending.then(lines)
        lines = self.pending
        if not lines.query.size:
            return
        new = np.ones(lines.query.size, dtype=bool)
        np.not_equal(lines.query[1:], lines.query[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        queries = lines.query[starts]
        # Grouped: each query's lines together, so the queries are numbered 0, 1, 2, ...
        # in the order their lines come (a query seen again was numbered before).
        first = self.lengths[-1][0] + 1 if self.lengths else 0
        if not np.array_equal(queries, np.arange(first, first + queries.size)):
            raise Unsuitable
        if last:
            done, self.pending = lines, self.pending.split(lines.query.size)[1]
        else:  # the last query may go on in the next chunk
            done, self.pending = lines.split(int(starts[-1]))
            starts, queries = starts[:-1], queries[:-1]
        if done.query.size:
            self._check(done, starts, queries)

    def _number(self, query: str) -> int:
        index = self.run_index.get(query)
        if index is None:
            index = self.run_index[query] = len(self.run_qids)
            self.run_qids.append(query)
            self.to_judged.append(self.judged.position.get(query, -1))
        return index

    def _check(self, lines: _Lines, starts: np.ndarray, queries: np.ndarray) -> None:
        """Check whole queries' lines and rank the judged docs among them; the lines are
        dropped after (only the ids of docs tied with a judged doc are kept)."""
        ordered = np.sort(lines.keys)
        if (ordered[1:] == ordered[:-1]).any():  # a doc twice for a query (or a collision)
            raise Unsuitable
        del ordered
        lengths = np.diff(np.append(starts, lines.query.size))
        self.lengths += zip(queries.tolist(), lengths.tolist(), strict=True)
        rows, judged = self.judged.match(lines.keys)
        if not rows.size:
            return
        to_judged = np.asarray(self.to_judged, dtype=np.int64)
        # Equal hashes, then equal query and doc ids (else the caller reads the slow way).
        run_docs = take(_chunked(lines.docs), rows)
        if not (
            np.array_equal(to_judged[lines.query[rows]], self.judged.query[judged])
            and run_docs.equals(take(self.judged.docs, judged))
        ):
            raise Unsuitable
        ranked = self.judged.grades[judged] >= self.least_grade
        rows, judged = rows[ranked], judged[ranked]
        if not rows.size:
            return
        # (rows ascend, so their queries' positions in this chunk do not decrease)
        segment = np.searchsorted(starts, rows, side="right") - 1
        scores = lines.scores[rows]
        # (A chunk's rows are few: threads would cost more than they save.)
        rank, tied = count_above(lines.scores, starts, lengths, segment, scores, threads=False)
        is_tied = np.zeros(rows.size, dtype=bool)
        is_tied[tied] = True
        self.found.append(judged)
        self.scores.append(scores)
        self.ranks.append(rank)
        self.tied.append(is_tied)
        self._keep_ties(lines, starts, rows[tied], to_judged)

    def _keep_ties(
        self, lines: _Lines, starts: np.ndarray, rows: np.ndarray, to_judged: np.ndarray
    ) -> None:
        """The ids of the docs that share the score of a tied judged doc (at `rows`)."""
        if not rows.size:
            return
        # Only the lines of the queries with a tie are searched: a few in a chunk.
        segments = np.searchsorted(starts, rows, side="right") - 1  # (rows ascend)
        wanted = segments[np.diff(segments, prepend=-1) != 0]
        ends = np.append(starts[1:], lines.query.size)
        lengths = ends[wanted] - starts[wanted]
        near = np.repeat(starts[wanted] - np.cumsum(lengths) + lengths, lengths)
        near += np.arange(near.size)
        keys = np.sort(_score_keys(lines, rows))
        near_keys = _score_keys(lines, near)
        at = np.minimum(np.searchsorted(keys, near_keys), keys.size - 1)
        shared = near[keys[at] == near_keys]
        docs = take(_chunked(lines.docs), shared).to_pylist()
        groups: dict[tuple[int, float], list[str]] = {}
        for query, score, doc in zip(
            lines.query[shared].tolist(), lines.scores[shared].tolist(), docs, strict=True
        ):
            groups.setdefault((query, score), []).append(doc)
        for (query, score), group in groups.items():
            if len(group) > 1:
                group.sort()
                self.ties.setdefault(int(to_judged[query]), {})[score] = group

    def ranked(self) -> tuple[RankedJudgments, tuple[str, ...]]:
        """The ranked judgments over every judged query, and the run's unjudged queries."""
        judged = self.judged
        run_length = np.zeros(len(judged.qids), dtype=np.int64)
        if self.lengths:
            lengths = np.array(self.lengths, dtype=np.int64)
            target = np.asarray(self.to_judged, dtype=np.int64)[lengths[:, 0]]
            keep = target >= 0
            run_length[target[keep]] = lengths[keep, 1]
        index, scores, rank, tied = (
            np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
            for parts, dtype in (
                (self.found, np.int64),
                (self.scores, np.float64),
                (self.ranks, np.int64),
                (self.tied, bool),
            )
        )
        # Judged docs are grouped by query in sorted order: pairs by judged doc, by query.
        order = np.argsort(index, kind="stable")
        index = index[order]
        pairs = Pairs(
            index=index,
            query=judged.query[index],
            score=scores[order],
            rank=rank[order],
            tied=np.flatnonzero(tied[order]),
        )
        ranked = ranked_judgments(
            judged.qids,
            judged.query,
            judged.grades,
            run_length,
            pairs,
            _KeptTies(self.ties, judged.docs),
            self.least_grade,
        )
        unjudged = tuple(sorted(q for q in self.run_qids if q not in judged.position))
        return ranked, unjudged


def _score_keys(lines: _Lines, at: np.ndarray) -> np.ndarray:
    """A hash of the (query, score) of the lines `at`."""
    # (+ 0.0 makes -0.0 into 0.0: equal scores, so the same key.)
    return mix((lines.scores[at] + 0.0).view(np.uint64) ^ mix(lines.query[at].astype(np.uint64)))


def _chunked(docs: list[Any]) -> Any:
    import pyarrow as pa

    return pa.chunked_array(docs, pa.string())


class _KeptTies:
    """The doc ids kept for ties while the run was read."""

    def __init__(self, ties: dict[int, dict[float, list[str]]], judged_docs: Any):
        self.ties, self.judged_docs = ties, judged_docs

    def tied(self, query: int, scores: set[float]) -> dict[float, list[str]]:
        kept = self.ties[query]
        return {score: kept[score] for score in scores}

    def judged(self, index: int) -> str:
        doc: str = self.judged_docs[index].as_py()
        return doc


def rank_run_file(
    qrels: TrecColumns, path: PathLike, least_grade: int = 1
) -> tuple[RankedJudgments, tuple[str, ...]] | None:
    """Rank the judged docs of a run file read a chunk at a time; None when the caller
    must read it whole (not a regular file, not grouped by query, not for the fast reader).

    Args:
        qrels: the judgments, as columns.
        path: the run file.
        least_grade: rank the judged docs graded this or more (1, or 0 for bpref).
    """
    try:
        import pyarrow as pa
    except ImportError:
        return None
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as handle:
            stream = _Stream(judged_from(qrels), least_grade)
            parsed = map_ahead(
                lambda chunk: parse_chunk(*chunk, "run"), chunks(handle, "run"), workers=PARSERS
            )
            with contextlib.closing(parsed):
                for piece in parsed:
                    stream.add(piece, last=False)
            stream.add(None, last=True)
        return stream.ranked()
    except (OSError, Unsuitable, pa.ArrowException):
        return None
