"""compare.html's per-sample delta plots say what they show: the largest |Δ| of the panel,
and that every Δ is 0 when none moved."""

from __future__ import annotations

from html.parser import HTMLParser

from judge.comparison.html import delta_plot


class Texts(HTMLParser):
    """The text of every <text> element of an SVG."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self._inside = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "text":
            self._inside = True
            self.texts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "text":
            self._inside = False

    def handle_data(self, data: str) -> None:
        if self._inside:
            self.texts[-1] += data


def texts(svg: str) -> list[str]:
    parser = Texts()
    parser.feed(svg)
    return parser.texts


def test_an_all_zero_panel_claims_no_maximum_of_one():
    svg = delta_plot("faithfulness", [0.0, 0.0, 0.0], ["a", "b", "c"])
    shown = " ".join(texts(svg))
    assert "1.000" not in shown and "every Δ is 0" in shown


def test_a_panel_states_its_largest_change_and_its_scale():
    svg = delta_plot("faithfulness", [0.25, -0.5, 0.0, float("nan")], ["a", "b", "c", "d"])
    shown = texts(svg)
    assert "faithfulness: B - A per sample, sorted (max |Δ| 0.500, 3 samples)" in shown
    assert {"+0.500", "0", "-0.500"} <= set(shown)  # the axis: top, zero line, bottom
