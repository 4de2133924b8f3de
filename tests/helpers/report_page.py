"""report.html parsed for the tests: its text per section, each worst sample's text, and
every tag met."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """The page's text per section (after each <h2>), the text of each worst sample's
    <details>, and every tag met."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, str] = {}
        self.samples: list[str] = []
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self._section = ""
        self._in_h2 = False
        self._depth = 0  # <details> nesting inside the worst samples

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]
        if tag == "h2":
            self._in_h2, self._section = True, ""
        elif tag == "details" and self._section == "Worst samples":
            if self._depth == 0:
                self.samples.append("")
            self._depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._in_h2 = False
            self.sections[self._section] = ""
        elif tag == "details" and self._depth:
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self._section += data
            return
        if self._section:
            self.sections[self._section] += data
        if self._depth:
            self.samples[-1] += data


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page
