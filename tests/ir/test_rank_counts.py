"""count_above against a direct count, on rows of every layout and with many exact ties."""

from __future__ import annotations

import numpy as np
import pytest

from judge.ir import rank_counts
from judge.ir.rank_counts import count_above


def _layout(
    rng: np.random.Generator, lengths: list[int], gap: str
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of scores (few distinct values: many ties, -0.0 beside 0.0, infinities)."""
    values = np.array([-np.inf, -1.5, -0.0, 0.0, 0.25, 0.5, 2.0, np.inf])
    gaps = {
        "none": [0] * len(lengths),
        "even": [3] * len(lengths),
        "ragged": rng.integers(0, 5, len(lengths)).tolist(),
    }[gap]
    starts, pieces, at = [], [], 0
    for length, skip in zip(lengths, gaps, strict=True):
        pieces.append(np.full(skip, np.nan))  # between rows: never read
        at += skip
        starts.append(at)
        pieces.append(rng.choice(values, length))
        at += length
    return np.concatenate(pieces), np.array(starts, dtype=np.int64)


@pytest.mark.parametrize("gap", ["none", "even", "ragged"])
@pytest.mark.parametrize("ragged_lengths", [False, True])
@pytest.mark.parametrize("block", [1 << 19, 7])
def test_counts_and_ties_match_a_direct_count(
    gap: str, ragged_lengths: bool, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rank_counts, "_BLOCK_ELEMENTS", block)  # 7: many blocks and threads
    rng = np.random.default_rng(len(gap) + 10 * ragged_lengths + block)
    nq = 60
    lengths = rng.integers(1, 12, nq).tolist() if ragged_lengths else [9] * nq
    scores, starts = _layout(rng, lengths, gap)
    run_length = np.array(lengths, dtype=np.int64)
    # Pairs: some retrieved docs of some queries, grouped by query as the callers give them.
    pair_query, pair_score = [], []
    for q in range(nq):
        if q % 7 == 3:
            continue  # a query without pairs
        row = scores[starts[q] : starts[q] + lengths[q]]
        for column in sorted(rng.choice(lengths[q], min(lengths[q], 4), replace=False)):
            pair_query.append(q)
            pair_score.append(row[column])
    queries, values = np.array(pair_query), np.array(pair_score)

    rank, tied = count_above(scores, starts, run_length, queries, values)

    expected_rank, expected_tied = [], []
    for p, (q, s) in enumerate(zip(pair_query, pair_score, strict=True)):
        row = scores[starts[q] : starts[q] + lengths[q]]
        expected_rank.append(1 + int(np.sum(row > s)))
        if np.sum(row == s) > 1:
            expected_tied.append(p)
    assert rank.tolist() == expected_rank
    assert sorted(tied.tolist()) == expected_tied
    assert expected_tied, "the data must have ties for the test to mean anything"


def test_no_pairs() -> None:
    rank, tied = count_above(
        np.array([1.0, 2.0]),
        np.array([0]),
        np.array([2]),
        np.empty(0, dtype=np.int64),
        np.empty(0),
    )
    assert rank.size == 0 and tied.size == 0
