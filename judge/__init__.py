"""judge: exact, reproducible evaluation of retrieval-augmented generation (RAG) systems.

Importing this package is cheap: it loads neither litellm nor the datasets library.
"""

from __future__ import annotations

from judge.errors import CoverageWarning, InputFormatError, JudgeError, UnknownMetricError

__version__ = "0.1.0"

__all__ = [
    "CoverageWarning",
    "InputFormatError",
    "JudgeError",
    "UnknownMetricError",
    "__version__",
]
