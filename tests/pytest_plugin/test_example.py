"""The README's example test file (examples/test_rag_quality.py) run as docs/guides/pytest.md says:
recorded once, then replayed with nothing sent, held to a pinned baseline run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.pytester import load_judged_modules

load_judged_modules()  # before any pytester run (tests/helpers/pytester.py)

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_the_example_records_then_replays_against_a_pinned_baseline(
    pytester: pytest.Pytester, fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm_server.chat = heuristic_judge
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    for name in ("test_rag_quality.py", "rag_app.py", "questions.jsonl"):
        shutil.copy(EXAMPLES / name, pytester.path / name)
    model = ["--judge-model", "openai/gpt-4o-mini", "--judge-api-base", fake_llm_server.base_url]
    model += ["--judge-cache-as", "example-server", "-p", "no:randomly"]

    # the baseline run: the app's answers judged by judge experiment, pinned
    done = run(
        "experiment",
        pytester.path / "questions.jsonl",
        "--app",
        f"{pytester.path / 'rag_app.py'}:baseline",
        "--model",
        "openai/gpt-4o-mini",
        "--api-base",
        fake_llm_server.base_url,
        "--metrics",
        "faithfulness,context_recall",
        "--cache",
        pytester.path / "baseline-cache.sqlite",
        "--out",
        pytester.path / "baseline",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    run_id = json.loads(run("runs", "list", "--json").stdout)[0]["id"]
    assert run("runs", "baseline", run_id).returncode == 0

    recorded = pytester.runpytest(*model)
    recorded.assert_outcomes(passed=7)
    sent = len(fake_llm_server.requests)
    assert sent > 0

    replayed = pytester.runpytest(*model, "--judge-replay")
    replayed.assert_outcomes(passed=7)
    assert len(fake_llm_server.requests) == sent
    replayed.stdout.fnmatch_lines(["7 judged tests, 12 samples*", "requests 0, *"])
