"""The text that an inline SVG (a report's histogram, compare.html's delta plot) shows."""

from __future__ import annotations

from html.parser import HTMLParser


class SvgTexts(HTMLParser):
    """Collects the text of every <text> element fed to it, in order."""

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


def svg_texts(html: str) -> list[str]:
    """The text of every <text> element of an HTML or SVG text, in order."""
    parser = SvgTexts()
    parser.feed(html)
    return parser.texts
