"""What tests of the pytest plugin share: the modules the judged test files load, loaded
once in the outer process.

pytester's in-process runs forget the modules each run imported, and numpy (which the
judge loads) cannot be imported twice in one process; modules loaded before a run are
kept, so every run after the first finds them loaded.
"""

from __future__ import annotations

import importlib

JUDGED = (
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
