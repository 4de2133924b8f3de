"""compare.html's per-sample delta plots say what they show: the largest |Δ| of the panel,
and that every Δ is 0 when none moved."""

from __future__ import annotations

from judge.comparison.html import delta_plot
from tests.helpers.svg import svg_texts


def test_an_all_zero_panel_claims_no_maximum_of_one():
    svg = delta_plot("faithfulness", [0.0, 0.0, 0.0], ["a", "b", "c"])
    shown = " ".join(svg_texts(svg))
    assert "1.000" not in shown and "every Δ is 0" in shown


def test_a_panel_states_its_largest_change_and_its_scale():
    svg = delta_plot("faithfulness", [0.25, -0.5, 0.0, float("nan")], ["a", "b", "c", "d"])
    shown = svg_texts(svg)
    assert "faithfulness: B - A per sample, sorted (max |Δ| 0.500, 3 samples)" in shown
    assert {"+0.500", "0", "-0.500"} <= set(shown)  # the axis: top, zero line, bottom
