"""The end of a run (the report's histograms, the summaries' bootstrap) holds no copy of
every row's scores: what it allocates does not grow with the rows."""

from __future__ import annotations

import math
import random
from array import array

import numpy as np
import pytest

from judge.run import rows as rows_module
from judge.run.rows import ResultRow, RowTally, histogram_counts
from tests.helpers.memory import peak_bytes


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
    # a few small chunks, not the rows (chunks of 1 << 16 rows took 1.4 MB)
    assert peak_bytes(lambda: tally.histogram("m")) < 2**19


def test_the_worst_rows_of_many_are_found_in_small_chunks():
    tally = _tally(400_000)
    # chunks of 1 << 16 rows took 5 MB: 3.6 MiB of the peak of a run of 300,000 rows
    assert peak_bytes(lambda: tally.worst(10)) < 2**20


@pytest.mark.parametrize("chunk", [1, 5, 1 << 16])
def test_distinct_values_counted_by_chunks_are_those_of_np_unique(monkeypatch, chunk):
    from judge import stats

    monkeypatch.setattr(stats, "DISTINCT_CHUNK", chunk)
    values = np.random.default_rng(chunk).integers(0, 7, 500) / 3
    distinct, counts = stats._distinct_counts(values, 500)
    whole, whole_counts = np.unique(values, return_counts=True)
    assert distinct.tolist() == whole.tolist() and distinct.dtype == whole.dtype
    assert counts.tolist() == whole_counts.tolist() and counts.dtype == whole_counts.dtype
    assert stats._distinct_counts(values, 6) is None  # 7 distinct values: more than 6


def test_the_summaries_of_many_rows_are_those_of_their_defined_scores():
    from judge.stats import bootstrap_cis

    for tally in (_tally(30_000, seed=1), _tally(30_000, seed=2)):
        values = tally.defined("m")
        (low, high), mean = bootstrap_cis([values])[0], float(values.mean())
        got = tally.summary("m")
        assert (got.mean, got.ci_low, got.ci_high, got.scored) == (mean, low, high, values.size)
    full = _tally(30_000, seed=3)
    full._scores["m"] = array("d", np.nan_to_num(np.frombuffer(full._scores["m"])).tobytes())
    values = full.defined("m")
    got = full.summary("m")
    assert (got.mean, (got.ci_low, got.ci_high)) == (
        float(values.mean()),
        bootstrap_cis([values])[0],
    )


def test_the_summaries_of_many_rows_hold_no_copy_of_their_scores():
    tally = _tally(400_000)
    tally._scores["m"] = array("d", np.nan_to_num(np.frombuffer(tally._scores["m"])).tobytes())
    # 3 MiB of scores: their defined copy and np.unique's sorted copy were 6 MiB more
    assert peak_bytes(lambda: tally.summary("m")) < 2 * 2**20


def test_a_row_file_keeps_the_array_of_offsets_it_is_given(tmp_path):
    from judge.run.checkpoint import RowFile

    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"row": 0}\n{"row": 1}\n')
    offsets = array("q", [0, 11]) * 200_000  # 3 MiB: the run's own, not copied again
    assert peak_bytes(lambda: RowFile(path, offsets)) < 2**16
    assert [r.row for r in RowFile(path, array("q", [11, 0]))] == [1, 0]
    assert [r.row for r in RowFile(path, [11, 0])] == [1, 0]  # any sequence: copied
