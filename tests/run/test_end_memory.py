"""The end of a run (the report's histograms, the summaries' bootstrap) holds no copy of
every row's scores: what it allocates does not grow with the rows."""

from __future__ import annotations

import math
import random
import tracemalloc
from array import array

import numpy as np
import pytest

from judge.run import rows as rows_module
from judge.run.rows import ResultRow, RowTally, histogram_counts


def _tally(rows: int, metric: str = "m", seed: int = 0) -> RowTally:
    """A tally of `rows` rows of one metric, its scores of 11 values and NaN, filled at once."""
    draw = np.random.default_rng(seed)
    scores = draw.integers(0, 11, rows) / 10
    scores[draw.random(rows) < 0.1] = math.nan
    tally = RowTally([metric])
    tally._scores[metric] = array("d", scores.tobytes())
    tally.row_failed = array("b", bytes(rows))
    tally.rows = rows
    return tally


def _peak(call) -> int:
    """The bytes `call()` allocated at its peak, beyond what was held before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_a_histogram_counted_by_chunks_is_that_of_every_value_at_once(monkeypatch, chunk):
    monkeypatch.setattr(rows_module, "WORST_CHUNK", chunk)
    draw = random.Random(chunk)
    tally = RowTally(["m"])
    for number in range(300):  # the edges, outside [0, 1], NaN
        value = draw.choice([0.0, 0.1, 0.55, 0.999, 1.0, 1.7, -0.2, math.nan])
        tally.add(ResultRow(number, scores={"m": value}))
    values = tally.defined("m")
    whole = np.bincount(np.clip(values * 10, 0, 9).astype(np.int64), minlength=10)
    assert tally.histogram("m").tolist() == whole.tolist()
    assert (
        histogram_counts(values, 5).tolist()
        == np.bincount(np.clip(values * 5, 0, 4).astype(np.int64), minlength=5).tolist()
    )


def test_the_report_histogram_of_many_rows_holds_no_copy_of_their_scores():
    tally = _tally(400_000)  # 3 MiB of scores: a copy of them, scaled, cast, was 9 MiB
    assert _peak(lambda: tally.histogram("m")) < 2 * 2**20  # a few chunks, not the rows
