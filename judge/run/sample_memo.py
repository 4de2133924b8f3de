"""A replay's judgments of whole samples, remembered by the samples' content, so a sample
met again (the same question, answer, contexts, ground truth and extra columns under
another id) takes the scores, evidence and usage of the first without going through its
judges' calls again, and its row's checkpoint line is put together from an earlier row's
rather than encoded again.

Sound only where judging is a function of the sample: a replay (`Cache(mode="replay")`)
answers every request from the cache, which does not change during the run, or fails the
run; so the memo is made for replays alone. A sample is remembered only when every one of
its judgments was a cache hit and no judge failed (a failure's message names the sample's
id); the turns of conversations (which share judgments of earlier turns) and runs with a
metric that is not built in (a user's code may give another score the second time) are
left out.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from judge.llm.usage import COUNTED, UsageLedger
from judge.metrics.registry import Metric
from judge.run.checkpoint import LineTemplate
from judge.run.data import Row
from judge.run.rows import ResultRow
from judge.run.score import SampleResult
from judge.samples import Sample

DEFAULT_BYTES = 16 * 2**20
# What a remembered sample holds, as measured (tracemalloc) for the bench's rows: about
# 8 KiB of scores, evidence, usage and line template, and its texts about four times over
# (the evidence restates claims and questions taken from them; the template holds them).
_RESULT_BYTES = 8192
_TEXT_TIMES = 4

# Strict JSON for the extra columns in a key: a value JSON does not hold (a date, NaN
# aside) makes the sample not remembered, rather than a key two different values share.
_EXTRA_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False)

SampleKey = tuple[Any, ...]

# Where the built-in metrics' code is: a custom metric's (`judged_metric`) calls the user's
# scoring function, which may not give the same score twice.
_BUILT_IN = "judge.metrics.registry"


class SampleMemo:
    """Samples' judgments by content, least recently used dropped past `limit` bytes;
    with `lines`, also the checkpoint line of the first row that met one again, as a
    template for the lines of the rows that meet it later (rows that hold nothing else, as
    a run without retrieval metrics writes them).

    A memo that fills up before any sample is met again stops: the rows are all different
    (a realistic log) or repeat further apart than it holds, and either way it would only
    cost the rows time and the run memory.

    Args:
        usage: the run's usage ledger (the session's): a remembered sample's cache hits
            are counted there again each time it is met, as its judges would have.
        limit: the memory budget in (estimated) bytes.
        lines: whether rows' lines are put together from an earlier row's line.
    """

    def __init__(self, usage: UsageLedger, limit: int = DEFAULT_BYTES, *, lines: bool = False):
        self.usage = usage
        self.limit = limit
        self.lines = lines
        self.used = 0
        self.hits = 0
        self.stopped = False
        self._entries: OrderedDict[SampleKey, _Entry] = OrderedDict()

    @staticmethod
    def for_run(
        metrics: Sequence[Metric], session: Any, retrieval: Sequence[str] = ()
    ) -> SampleMemo | None:
        """A memo for a run of these metrics (judged, and retrieval ones scored from each
        row's own columns) with this session, or None where judging may not be a function
        of the sample (see the module docstring)."""
        cache = getattr(session, "cache", None)
        if cache is None or cache.mode != "replay" or not metrics:
            return None
        if not all(getattr(m.compute, "__module__", None) == _BUILT_IN for m in metrics):
            return None
        return SampleMemo(session.usage, lines=not retrieval)

    def key(self, row: Row) -> SampleKey | None:
        """What the row's judgments depend on, or None when it is not to be remembered."""
        sample = row.sample
        if self.stopped or sample is None or row.error is not None or sample.in_conversation:
            return None
        extra = ""
        if sample.extra:
            try:
                extra = _EXTRA_JSON.encode(sample.extra)
            except (TypeError, ValueError):
                return None
        return (sample.question, sample.answer, sample.contexts, sample.ground_truth, extra)

    def get(self, key: SampleKey, sample: Sample) -> SampleResult | None:
        """The judgments of a sample of this key as `sample`'s (its cache hits counted in
        the run's usage), or None. The containers are shared: the caller must not change
        them."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        for label, count in entry.hits.items():
            self.usage.of(label).cache_hits += count
        self.hits += 1
        entry.met = True
        result = entry.result
        return SampleResult(
            sample,
            result.scores,
            result.reasons,
            result.errors,
            result.evidence,
            result.usage,
            result.higher_is_better,
        )

    def put(self, key: SampleKey, result: SampleResult) -> None:
        """Remember a sample's judgments if it is to be (see the module docstring)."""
        if result.errors:
            return
        hits = _only_hits(result.usage)
        if hits is None:
            return
        question, answer, contexts, truth, extra = key
        texts = len(question) + len(answer or "") + len(truth or "") + len(extra)
        size = _RESULT_BYTES + _TEXT_TIMES * (texts + sum(len(c) for c in contexts))
        if size > self.limit:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.used -= old.size
        self._entries[key] = _Entry(result, hits, size)
        self.used += size
        if self.used > self.limit and not self.hits:
            self.stopped = True  # see the class docstring
            self._entries.clear()
            self.used = 0
        while self.used > self.limit:
            _, dropped = self._entries.popitem(last=False)
            self.used -= dropped.size

    def line(self, row: Row, record: ResultRow, input_hash: str) -> bytes | None:
        """The checkpoint line of a row judged from memory, put together from an earlier
        row's of its sample; None for another row (encode it, then `keep_line`)."""
        entry = self._served(row, record)
        if entry is None or not entry.template:
            return None
        return entry.template.line(row.number, input_hash, record.id)

    def keep_line(
        self, row: Row, record: ResultRow, input_hash: str, line: bytes, fingerprint: str
    ) -> None:
        """Keep the line of the first row that met a remembered sample again as the template
        of the later ones' (a sample met once costs no template)."""
        entry = self._served(row, record)
        if entry is not None and entry.met and entry.template is None:
            template = LineTemplate.of(line, fingerprint, row.number, input_hash, record.id)
            entry.template = template or False  # tried once: a line of another layout

    def _served(self, row: Row, record: ResultRow) -> _Entry | None:
        """The entry whose judgments the record holds (the very containers), if any."""
        if not self.lines:
            return None
        key = self.key(row)
        entry = self._entries.get(key) if key is not None else None
        if entry is None or entry.result.evidence is not record.evidence:
            return None
        return entry

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class _Entry:
    """A remembered sample: its judgments, its cache hits by judge, its estimated size,
    whether a row met it again, and that row's line as a template (None: not yet made;
    False: not to be)."""

    result: SampleResult
    hits: dict[str, int]
    size: int
    met: bool = False
    template: LineTemplate | Literal[False] | None = None


def _only_hits(usage: dict[str, Any]) -> dict[str, int] | None:
    """Cache hits by judge of a sample's usage (`SampleResult.usage`), or None when it
    counted anything else (a request, a retry, tokens): then it was not a pure replay."""
    hits: dict[str, int] = {}
    for label, counts in usage.get("by_judge", {}).items():
        for name in COUNTED:
            if name != "cache_hits" and counts.get(name):
                return None
        hits[label] = counts.get("cache_hits", 0)
    return hits
