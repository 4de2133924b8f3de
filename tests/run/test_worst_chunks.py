"""`RowTally.worst` taken a chunk of rows at a time gives the rows it gave over all at once."""

from __future__ import annotations

import pytest


def _worst_whole(tally, limit):
    """RowTally.worst as it was, over every row at once."""
    import numpy as np

    scores = np.vstack([np.frombuffer(a, dtype=np.float64) for a in tally._scores.values()])
    defined = ~np.isnan(scores)
    count = defined.sum(axis=0)
    mean = np.where(defined, scores, 0.0).sum(axis=0) / np.maximum(count, 1)
    failed = np.frombuffer(tally.row_failed, dtype=np.int8).astype(bool)
    chosen = failed | (defined & (scores < 1.0)).any(axis=0)
    order = np.lexsort((np.arange(mean.size), np.where(failed, 0.0, mean), ~failed))
    return [int(i) for i in order[chosen[order]][:limit]]


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 16])
def test_the_worst_rows_taken_by_chunks_are_those_of_all_rows_at_once(monkeypatch, chunk):
    import math
    import random

    from judge.run import rows as rows_module
    from judge.run.rows import ResultRow, RowTally

    monkeypatch.setattr(rows_module, "WORST_CHUNK", chunk)
    draw = random.Random(chunk)
    tally = RowTally(["a", "b"])
    for number in range(200):  # ties, NaN, all-1 rows and failures
        scores = {m: draw.choice([0.0, 0.5, 1.0, 1.0, math.nan]) for m in ("a", "b")}
        error = "bad" if draw.random() < 0.05 else None
        tally.add(ResultRow(number, number, "q", scores=scores, error=error))
    for limit in (1, 10, 60, 500):
        assert tally.worst(limit) == _worst_whole(tally, limit)
