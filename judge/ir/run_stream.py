"""Rank judged docs while a TREC run file is read, keeping only the run's scores.

A run file grouped by query (every query's lines together, as systems write them) is
read a chunk at a time; each chunk's lines are matched against the judgments, checked
for docs listed twice and for score ties with judged docs, then dropped: what stays is
one float per line (the scores that ranks are counted in) and, for the few judged docs
whose score another doc of their query shares, the ids of those docs. A query's lines
that run on into the next chunk wait for it, so every check sees whole queries.

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
from judge.ir.ranking import RankedJudgments, RunArrays, rank_arrays
from judge.ir.trec import PathLike
from judge.ir.trec_columns import (
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
        at = np.minimum(np.searchsorted(self.ordered, keys[maybe]), self.ordered.size - 1)
        hit = self.ordered[at] == keys[maybe]
        return maybe[hit], self.by_key[at[hit]]


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


class _Scores:
    """A float array that grows by chunks, sized from the first so it is rarely copied."""

    def __init__(self, file_size: int):
        self.file_size, self.n = file_size, 0
        self.array = np.empty(0, dtype=np.float64)

    def add(self, values: np.ndarray, read: int) -> None:
        m = values.size
        if self.n + m > self.array.size:
            estimate = int(self.file_size / max(read, 1) * (self.n + m) * 1.05) + 1024
            grown = np.empty(max(estimate, (self.n + m) * 5 // 4), dtype=np.float64)
            grown[: self.n] = self.array[: self.n]
            self.array = grown
        self.array[self.n : self.n + m] = values
        self.n += m


class _Stream:
    """What is kept of the run as its chunks are checked, in file order."""

    def __init__(self, judged: _Judged, file_size: int, least_grade: int):
        self.judged, self.least_grade = judged, least_grade
        self.run_qids: list[str] = []
        self.run_index: dict[str, int] = {}
        self.to_judged: list[int] = []  # judged query index of each run query, or -1
        self.scores = _Scores(file_size)
        self.segments: list[tuple[int, int, int]] = []  # (run query, first line, lines)
        self.rows: list[np.ndarray] = []  # run line of each judged doc found...
        self.found: list[np.ndarray] = []  # ...and which judged doc it is
        # judged query -> score -> sorted ids of the docs that share a judged doc's score
        self.ties: dict[int, dict[float, list[str]]] = {}
        self.pending = _Lines(
            np.empty(0, np.int64), [], np.empty(0, np.float64), np.empty(0, np.uint64)
        )

    def add(self, piece: Any, read: int, last: bool) -> None:
        """Take a parsed chunk; check every query it completes."""
        if piece is not None:
            distinct, local, docs, scores, keys = piece
            ids = [self._number(q) for q in distinct.to_pylist()]
            lines = _Lines(np.asarray(ids, dtype=np.int64)[local], docs, scores, keys)
            self.pending = self.pending.then(lines)
        lines = self.pending
        if not lines.query.size:
            return
        starts = np.flatnonzero(np.diff(lines.query, prepend=-1))
        queries = lines.query[starts]
        # Grouped: each query's lines together, so the queries are numbered 0, 1, 2, ...
        # in the order their lines come (a query seen again was numbered before).
        first = self.segments[-1][0] + 1 if self.segments else 0
        if not np.array_equal(queries, np.arange(first, first + queries.size)):
            raise Unsuitable
        if last:
            done, self.pending = lines, self.pending.split(lines.query.size)[1]
        else:  # the last query may go on in the next chunk
            done, self.pending = lines.split(int(starts[-1]))
            starts, queries = starts[:-1], queries[:-1]
        if done.query.size:
            self._check(done, starts, queries, read)

    def _number(self, query: str) -> int:
        index = self.run_index.get(query)
        if index is None:
            index = self.run_index[query] = len(self.run_qids)
            self.run_qids.append(query)
            self.to_judged.append(self.judged.position.get(query, -1))
        return index

    def _check(self, lines: _Lines, starts: np.ndarray, queries: np.ndarray, read: int) -> None:
        """Check whole queries' lines, keep their scores, matches and ties."""
        if np.any(np.diff(np.sort(lines.keys)) == 0):  # a doc twice for a query (or a collision)
            raise Unsuitable
        offset = self.scores.n
        lengths = np.diff(np.append(starts, lines.query.size))
        self.segments += zip(
            queries.tolist(), (starts + offset).tolist(), lengths.tolist(), strict=True
        )
        self.scores.add(lines.scores, read)
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
        self.rows.append(rows + offset)
        self.found.append(judged)
        ranked = self.judged.grades[judged] >= self.least_grade
        self._keep_ties(lines, rows[ranked], to_judged)

    def _keep_ties(self, lines: _Lines, ranked: np.ndarray, to_judged: np.ndarray) -> None:
        """The ids of the docs that share the score of a judged doc found that is ranked."""
        if not ranked.size:
            return
        # (+ 0.0 makes -0.0 into 0.0: equal scores, so the same key.)
        score_bits = (lines.scores + 0.0).view(np.uint64)
        key = mix(score_bits ^ mix(lines.query.astype(np.uint64)))
        # (Binary searches in the few ranked keys: np.isin would sort every line's key.)
        wanted = np.sort(key[ranked])
        at = np.minimum(np.searchsorted(wanted, key), wanted.size - 1)
        candidates = np.flatnonzero(wanted[at] == key)
        values, counts = np.unique(key[candidates], return_counts=True)
        shared = candidates[np.isin(key[candidates], values[counts > 1])]
        if not shared.size:
            return
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
        nq = len(judged.qids)
        run_start, run_length = np.zeros(nq, dtype=np.int64), np.zeros(nq, dtype=np.int64)
        if self.segments:
            segments = np.array(self.segments, dtype=np.int64)
            target = np.asarray(self.to_judged, dtype=np.int64)[segments[:, 0]]
            keep = target >= 0
            run_start[target[keep]] = segments[keep, 1]
            run_length[target[keep]] = segments[keep, 2]
        scores = self.scores.array[: self.scores.n]
        found = np.full(judged.query.size, np.nan)
        if self.rows:
            found[np.concatenate(self.found)] = scores[np.concatenate(self.rows)]
        arrays = RunArrays(
            qids=judged.qids,
            scores=scores,
            run_start=run_start,
            run_length=run_length,
            judged_query=judged.query,
            grades=judged.grades,
            found=found,
            doc_ids=_KeptTies(self.ties, judged.docs),
        )
        unjudged = tuple(sorted(q for q in self.run_qids if q not in judged.position))
        return rank_arrays(arrays, self.least_grade), unjudged


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
            size = os.fstat(handle.fileno()).st_size
            stream = _Stream(judged_from(qrels), size, least_grade)
            parsed = map_ahead(
                lambda chunk: (chunk[1], parse_chunk(*chunk, "run")), chunks(handle, "run")
            )
            read = 0  # bytes of the lines parsed so far (the reader is a chunk ahead)
            with contextlib.closing(parsed):
                for cut, piece in parsed:
                    read += cut
                    stream.add(piece, read, last=False)
            stream.add(None, read, last=True)
        return stream.ranked()
    except (OSError, Unsuitable, pa.ArrowException):
        return None
