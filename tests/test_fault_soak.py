"""The fault soak of bench/robustness/fault_soak.py as a test: small always, big opt-in."""

from __future__ import annotations

import pytest

from bench.robustness.fault_soak import soak


def test_small_soak_loses_nothing_and_redoes_nothing():
    figures = soak(40, concurrency=16)
    assert figures["rows"] == 40
    faults = figures["faults"]
    assert sum(faults.values()) > 10  # the faults really happened
    assert figures["retries"] > 0 and figures["reasks"] > 0
    assert figures["rerun_rows_fully_scored"] == 40


@pytest.mark.slow
def test_soak_of_1000_samples():
    figures = soak(1000, concurrency=32)
    assert figures["rows"] == 1000 and figures["rerun_rows_fully_scored"] == 1000
