"""`judge annotate`'s page in headless Chromium, attacked from the keyboard: a key held
down (the keyboard repeats it) must not label the rows after the one shown."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.annotate import judged_run
from tests.helpers.browser import chromium, watched_page


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judged_run(tmp_path_factory.mktemp("annotate") / "run")


@pytest.fixture
def served(run: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`judge annotate` in a process of its own: the URL it printed and its labels file."""
    labels = tmp_path / "labels.jsonl"
    command = [sys.executable, "-m", "judge", "annotate", str(run), "--labels", str(labels)]
    process = subprocess.Popen(
        [*command, "--annotator", "ana"], stdout=subprocess.PIPE, text=True, encoding="utf-8"
    )
    try:
        assert process.stdout is not None
        url = ""
        for line in process.stdout:
            if "label the rows at " in line:
                url = line.split("label the rows at ")[1].strip()
                break
        assert url, "judge annotate printed no URL"
        yield url, labels
    finally:
        process.terminate()
        process.wait(30)


def labels_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def test_a_key_held_down_labels_one_row_not_every_row_it_repeats_over(
    browser: Any, served: tuple[str, Path]
) -> None:
    url, labels = served
    page = watched_page(browser)
    try:
        page.goto(url)
        page.wait_for_selector("#row:not([hidden])")
        first = page.locator("#row").get_attribute("data-id")
        # Held down: the keyboard sends keydown again and again, each with repeat set.
        for _ in range(5):
            page.keyboard.down("y")
        page.keyboard.up("y")
        page.wait_for_selector("body[data-pending='0']", state="attached")
        given = labels_of(labels)
        assert [(r["id"], r["label"]) for r in given] == [(first, 1)]
        assert page.locator("#row").get_attribute("data-position") == "1"
        assert page.problems == []
    finally:
        page.close()
