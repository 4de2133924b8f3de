"""`judge annotate`'s page in a real browser: the system's headless Chromium driven by
Playwright (tests/helpers/browser.py), against the command run as a user runs it. Keys
pressed, labels read back from the file, the server killed and started again, and the
labels then read by `judge estimate` and `judge agreement`."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.annotate.labels_file import read_labels_file
from judge.annotate.sample import draw
from judge.run.folder import RunFolder
from judge.testing import FakeLLMServer
from tests.helpers.annotate import (
    HOSTILE_ANSWER,
    HOSTILE_ID,
    HOSTILE_QUESTION,
    judge_flags,
    judged_run,
)
from tests.helpers.browser import chromium, watched_page
from tests.helpers.cli import run as run_cli
from tests.helpers.judging import judge_handler

STARTUP_SECONDS = 60


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judged_run(tmp_path_factory.mktemp("annotate") / "run")


class Server:
    """`judge annotate` in a process of its own, and the URL it printed."""

    def __init__(self, run: Path, labels: Path, *args: str):
        command = [sys.executable, "-m", "judge", "annotate", str(run), "--labels", str(labels)]
        self.process = subprocess.Popen(
            [*command, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.url = self._url()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.stdout.append(line)
            self.lines.put(line)

    def _url(self) -> str:
        while True:
            try:
                line = self.lines.get(timeout=STARTUP_SECONDS)
            except queue.Empty:
                self.process.kill()
                pytest.fail(f"judge annotate printed no URL: {self.process.communicate()}")
            if "label the rows at " in line:
                return line.split("label the rows at ")[1].strip()

    def kill(self) -> None:
        """SIGKILL: no clean-up at all."""
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM, as Ctrl-C or a CI cancel stops it; its exit code and output."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(30)
        self.reader.join(30)  # stdout is the reader's: read to its end
        assert self.process.stderr is not None
        return self.process.returncode, "".join(self.stdout), self.process.stderr.read()


def labels_of(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def settled(page: Any) -> None:
    """Wait until every key pressed is saved and its row shown."""
    page.wait_for_selector("body[data-pending='0']", state="attached")


def press(page: Any, *keys: str) -> None:
    for key in keys:
        page.keyboard.press(key)
    settled(page)


def shown(page: Any) -> tuple[int, str]:
    """The position and id of the row shown."""
    row = page.locator("#row")
    return int(row.get_attribute("data-position")), str(row.get_attribute("data-id"))


def test_keys_label_rows_at_once_and_a_killed_server_resumes(
    browser: Any, run: Path, tmp_path: Path
) -> None:
    labels = tmp_path / "labels.jsonl"
    rows = [row for _, _, row in RunFolder.of(run).rows()]
    order = draw(rows, "faithfulness", order="random", seed=7, sample=5).rows
    ids = [str(rows[i].id) for i in order]
    server = Server(run, labels, "--annotator", "ana", "--sample", "5", "--seed", "7")
    page = watched_page(browser)
    try:
        page.goto(server.url)
        page.wait_for_selector("#row:not([hidden])")
        assert shown(page) == (0, ids[0])
        assert "random seed=7 n=5 of 11" in page.inner_text("#sampled")
        claims = page.locator("#claims li")
        judged = [c.get_attribute("data-mine") for c in claims.all()]
        assert judged == [""] * claims.count()  # nothing of the person's yet
        press(page, "y")
        # On disk before the page moved on: the row's label, with who, when and the draw.
        first = labels_of(labels)[-1]
        assert (first["id"], first["label"], first["annotator"]) == (ids[0], 1, "ana")
        assert first["sample"] == {"method": "random", "seed": 7, "n": 5, "of": 11}
        assert first["time"].endswith("Z") and first["row"] == order[0]
        assert shown(page) == (1, ids[1])
        press(page, "1")  # the first claim's verdict flipped; saved with the row's label
        supported = rows[order[1]].evidence["answer_verdicts"][0]["verdict"] == "supported"
        mark = page.locator("#claims li").first
        assert mark.get_attribute("data-mine") == str(not supported).lower()
        assert len(labels_of(labels)) == 1 and shown(page) == (1, ids[1])
        press(page, "n")
        assert labels_of(labels)[-1]["label"] == 0
        assert labels_of(labels)[-1]["claims"][0] is (not supported)
        assert shown(page) == (2, ids[2])
        press(page, "s")
        assert labels_of(labels)[-1]["label"] is None  # a skip
        assert shown(page) == (3, ids[3])
        assert page.problems == []
    finally:
        page.close()
        server.kill()
    # Killed mid-write of the next label: half a line at the end of the file.
    with open(labels, "a", encoding="utf-8") as handle:
        handle.write('{"annotator": "ana", "claims": [], "id": "r')

    again = Server(run, labels, "--annotator", "ana")  # the file keeps the draw
    page = watched_page(browser)
    try:
        page.goto(again.url)
        page.wait_for_selector("#row:not([hidden])")
        assert shown(page) == (3, ids[3])  # resumed at the first row not done
        assert "cut off mid-write" in page.inner_text("#problems")
        page.problems.clear()
        press(page, "ArrowLeft")
        assert shown(page) == (2, ids[2]) and page.inner_text("#mine") == "skipped (s)"
        press(page, "ArrowLeft")
        assert shown(page) == (1, ids[1]) and page.inner_text("#mine") == "no (n)"
        press(page, "ArrowRight", "ArrowRight")
        assert shown(page) == (3, ids[3])
        press(page, "y")
        assert shown(page) == (4, ids[4])
        press(page, "n")  # the skipped row 2 is not shown again: every row is done
        assert page.locator("#done").is_visible()
        assert "4 labelled, 1 skipped" in page.inner_text("#done-text")
        assert page.problems == []
    finally:
        page.close()
        code, out, err = again.stop()
    assert code == 0, err
    assert "cut off mid-write" in err
    assert "ana: 4 of 5 rows labelled, 1 skipped" in out
    log = read_labels_file(labels)  # the damaged line said and left out
    assert len(log.problems) == 1
    latest = {r["id"]: r for r in log.labels}
    assert [latest[i]["label"] for i in ids] == [1, 0, None, 1, 0]
    # The labels the keys wrote are judge estimate's input as they are: a random draw of
    # the run's 11 rows, the skip and the line cut off said, not refused.
    estimated = run_cli(
        "estimate", run, "--labels", labels, "--label", "label", "--metric", "faithfulness",
        "--format", "json",
    )  # fmt: skip
    assert estimated.returncode == 0, estimated.stderr
    corrected = json.loads(estimated.stdout)
    assert corrected["metric"] == "faithfulness" and corrected["random_sample"] is True
    assert (corrected["n_labelled"], corrected["rows"]) == (4, 11)
    assert corrected["labels_only"]["mean"] == pytest.approx(0.5)  # 1, 0, 1, 0
    assert any("1 rows were skipped" in w for w in corrected["warnings"])
    assert any("cut off when judge annotate was killed" in w for w in corrected["warnings"])

    # A second annotator, through the page's own API; then their agreement.
    bob = Server(run, labels, "--annotator", "bob")
    try:
        for position, value in enumerate([1, 1, 0, 1, 0]):
            post(bob.url, position, {"label": value})
    finally:
        code, out, _ = bob.stop()
    assert "bob: 5 of 5 rows labelled, 0 skipped" in out, out
    assert "agreement between annotators (ana, bob) on 4 rows" in out
    agreement = run_cli("annotate", run, "--labels", labels, "--agreement", "--format", "json")
    assert agreement.returncode == 0, agreement.stderr
    found = json.loads(agreement.stdout)
    assert found["measure"] == "cohen_kappa" and found["rows"] == 4
    assert found["agreement"]["value"] == pytest.approx(3 / 4)  # they differ on row 1

    # Exported, the labels are what judge agreement reads.
    export = tmp_path / "ana.jsonl"
    done = run_cli("annotate", run, "--labels", labels, "--export", export, "--annotator", "ana")
    assert done.returncode == 0, done.stderr
    assert f"wrote 4 labelled rows to {export}" in done.stdout
    exported = labels_of(export)
    assert [r["id"] for r in exported] == [ids[i] for i in (0, 1, 3, 4)]
    assert "not the first 4 of the draw" in done.stderr  # row 2 skipped
    assert exported[0]["labels"] == {"ana": 1, "bob": 1}
    with FakeLLMServer() as fake:
        fake.chat = judge_handler
        measured = run_cli(
            "agreement",
            export,
            "--metric",
            "faithfulness",
            "--label",
            "label",
            "--format",
            "json",
            *judge_flags(fake),
            "--no-cache",
        )
    assert measured.returncode == 0, measured.stderr
    result = json.loads(measured.stdout)
    assert result["overall"]["rows"] == 4 and result["label"] == "label"


def post(url: str, position: int, body: dict[str, Any]) -> dict[str, Any]:
    base, token = url.split("/?token=")
    request = urllib.request.Request(
        f"{base}/api/rows/{position}",
        data=json.dumps(body).encode(),
        headers={"X-Judge-Token": token, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def test_hostile_text_is_shown_as_text_and_the_token_is_required(
    browser: Any, run: Path, tmp_path: Path
) -> None:
    server = Server(run, tmp_path / "labels.jsonl", "--annotator", "ana")
    page = watched_page(browser)
    try:
        page.goto(server.url)
        page.wait_for_selector("#row:not([hidden])")
        for _ in range(11):
            if shown(page)[1] == HOSTILE_ID:
                break
            press(page, "ArrowRight")
        assert shown(page)[1] == HOSTILE_ID
        question = page.inner_text("#question")
        # The markup is text; the escape, the override and the NUL are shown as escapes.
        assert question == (
            HOSTILE_QUESTION.replace("\x1b", "\\u001b")
            .replace("\u202e", "\\u202e")
            .replace("\x00", "\\u0000")
        )
        assert page.inner_text("#answer") == HOSTILE_ANSWER
        assert page.locator("#row script, #row img, #row b").count() == 0
        assert page.evaluate("window.__pwned") is None
        assert page.problems == []
        # Without the token: nothing but a refusal, for the page and for its data.
        base = server.url.split("/?token=")[0]
        for path in ("/", "/api/state", "/api/rows/0", "/?token=wrong"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(base + path, timeout=10)
            assert refused.value.code == 403
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(base + "/?token=wrong", 0, {"label": 1})
        assert refused.value.code == 403
        assert not (tmp_path / "labels.jsonl").exists() or not labels_of(tmp_path / "labels.jsonl")
    finally:
        page.close()
        server.stop()


def test_a_server_is_on_loopback_only(run: Path, tmp_path: Path) -> None:
    server = Server(run, tmp_path / "labels.jsonl", "--annotator", "ana")
    try:
        assert server.url.startswith("http://127.0.0.1:")
        assert len(server.url.split("token=")[1]) >= 32
    finally:
        code, _, err = server.stop()
    assert code == 0, err
    assert os.path.getsize(tmp_path / "labels.jsonl") == 0  # made, nothing labelled
