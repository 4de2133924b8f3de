"""judge in pytest: the `rag_judge` fixture and its options (`plugin`, registered as the
`pytest11` entry point), assertions on judged scores (`assertions`), conversations judged
turn by turn (`conversation`), the regression gate against a baseline run (`regression`),
test cases from a test set (`parametrize`) and the `--judge-report` folder (`report`).

Importing this package loads nothing: the names below are imported on first use.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "assert_scores": "judge.pytest_plugin.assertions",
    "assert_evaluation": "judge.pytest_plugin.assertions",
    "at_least": "judge.pytest_plugin.assertions",
    "at_most": "judge.pytest_plugin.assertions",
    "ScoreAssertionError": "judge.pytest_plugin.assertions",
    "assert_no_regression": "judge.pytest_plugin.regression",
    "cases": "judge.pytest_plugin.parametrize",
    "ConversationResult": "judge.pytest_plugin.conversation",
    "RagJudge": "judge.pytest_plugin.rag_judge",
    "ReplayMiss": "judge.pytest_plugin.rag_judge",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
