"""What tests of the pytest plugin share: the modules the judged test files load, loaded
once in the outer process; the fake server as they judge with it, the plugin's options
pointing at it, and a judged test that passes.

pytester's in-process runs forget the modules each run imported, and numpy (which the
judge loads) and pandas cannot be imported twice in one process; modules loaded before a run are
kept, so every run after the first finds them loaded.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from judge.testing import FakeLLMServer, heuristic_judge

JUDGED = (
    # judge.run.data reads a CSV test set with pandas, imported on first use: a second
    # import (pandas 3) leaves two string dtypes and read_csv(dtype=str) refuses its own.
    "pandas",
    "judge.comparison.evaluations",
    "judge.llm.transport",
    "judge.pytest_plugin.assertions",
    "judge.pytest_plugin.parametrize",
    "judge.pytest_plugin.rag_judge",
    "judge.pytest_plugin.regression",
    "judge.pytest_plugin.report",
    "judge.run.evaluate",
    "judge.run.score",
    "judge.runs.store",
)


def load_judged_modules() -> None:
    """Import what a test file judged through the plugin imports."""
    for name in JUDGED:
        importlib.import_module(name)


# A judged test file's test the heuristic judge finds faithful (its one claim is in the
# context).
FAITHFUL = """
def test_faithful(rag_judge):
    result = rag_judge.score(
        "Where is the Eiffel Tower?",
        "The Eiffel Tower is in Paris.",
        ["The Eiffel Tower is a tower in Paris, France."],
        metrics=["faithfulness"],
    )
    judge.assert_scores(result, faithfulness=0.8)
"""


def judging(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    """The fake server judging as the heuristic judge does, with the API key the plugin's
    openai/ model asks for."""
    server.chat = heuristic_judge
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return server


def judge_args(server: FakeLLMServer, cache: Path) -> list[str]:
    """The plugin's options that judge through the fake server, with a cache of their own,
    in the order the tests are written (no random order)."""
    return [
        "--judge-model",
        "openai/judge-model",
        "--judge-api-base",
        server.base_url,
        "--judge-cache",
        str(cache),
        "-p",
        "no:randomly",
    ]
