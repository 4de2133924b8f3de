"""bench/monitor/alerts_sim.py: its simulated scores are what its docstring says, and its
figures come from the detector as the monitor runs it."""

from __future__ import annotations

import argparse

import numpy as np

from bench.monitor.alerts_sim import KINDS, delays, faithfulness, false_alarms, hallucination


def settings(**changes) -> argparse.Namespace:
    values = {"seeds": 3, "windows": 20, "alpha": 0.001, "min_drop": 0.0}
    values |= {"baseline_rows": 1000, "before": 5, "horizon": 50}
    return argparse.Namespace(**(values | changes))


def test_the_simulated_scores_have_the_documented_means():
    rng = np.random.default_rng(0)
    scores = faithfulness(rng, 0.85, 200_000)
    assert abs(scores.mean() - 0.85) < 0.002 and scores.min() >= 0 and scores.max() <= 1
    assert np.median(scores) > 0.9  # most traces near 1, a tail of bad ones
    flags = hallucination(rng, 0.10, 200_000)
    assert set(np.unique(flags)) == {0.0, 1.0} and abs(flags.mean() - 0.10) < 0.002
    assert KINDS["hallucination"][3] is False  # lower is better: a drop is a rise


def test_a_figure_of_each_kind():
    stable = false_alarms("faithfulness", 50, 0.5, settings())
    assert stable["windows"] == 60 and stable["bound_per_1000"] == 500
    assert stable["per_1000"] == 1000 * stable["alerts"] / 60
    found = delays("hallucination", 200, 0.10, settings())
    assert found["streams"] == 3 and found["missed"] == 0 and found["early_alerts"] == 0
    assert 1 <= found["median"] <= found["max"] <= 50
