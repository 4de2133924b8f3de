"""judge: exact, reproducible evaluation of retrieval-augmented generation (RAG) systems.

Importing this package is cheap: it loads neither litellm nor the datasets library. The
LLM-judged API (`judge.score`, `judge.LLM`, ...) is imported on first use.
"""

from __future__ import annotations

from typing import Any

from judge.errors import CoverageWarning, InputFormatError, JudgeError, UnknownMetricError

__version__ = "0.1.0"

# name -> module that defines it, imported on first access (PEP 562)
_LAZY = {
    "score": "judge.run.score",
    "ascore": "judge.run.score",
    "SampleResult": "judge.run.score",
    "LLM": "judge.llm.config",
    "Embeddings": "judge.llm.config",
    "LLMSession": "judge.llm.session",
    "Cache": "judge.llm.cache",
    "evaluate": "judge.run.evaluate",
    "aevaluate": "judge.run.evaluate",
    "EvaluationResult": "judge.run.results",
}

__all__ = [
    "LLM",
    "Cache",
    "CoverageWarning",
    "Embeddings",
    "EvaluationResult",
    "InputFormatError",
    "JudgeError",
    "LLMSession",
    "SampleResult",
    "UnknownMetricError",
    "__version__",
    "aevaluate",
    "ascore",
    "evaluate",
    "score",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'judge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
