"""The system's headless Chromium (installed by scripts/install-chromium), driven by
Playwright, for the tests of the pages judge makes (`judge view`, `judge annotate`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("JUDGE_CHROMIUM", "/usr/bin/chromium")
# The machine may have no internet: without these Chromium tries to reach Google's servers.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium from the system's packages; the test fails (not skips) without it:
    a browser test that silently skips in CI tests nothing."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: run scripts/install-chromium (Debian's chromium "
            "package), or point JUDGE_CHROMIUM at a Chromium binary"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is missing: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def watched_page(browser: Any, **options: Any) -> Any:
    """A new page that keeps every console error or warning, page error and failed request
    in `page.problems`."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, **options)
    page.problems = []
    page.on(
        "console",
        lambda m: (
            page.problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))
    page.on("requestfailed", lambda r: page.problems.append(f"request failed: {r.url}"))
    return page
