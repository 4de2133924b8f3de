"""The one exception hierarchy of judge: every error says what was wrong and what to do."""

from __future__ import annotations


class JudgeError(Exception):
    """Base class of every error judge raises on purpose."""


class UnknownMetricError(JudgeError, ValueError):
    """A metric name that judge does not know."""


class InputFormatError(JudgeError, ValueError):
    """Input data (a file, a dict, a column) that does not have the expected shape."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)


class CoverageWarning(UserWarning):
    """Queries or samples scored 0 or left out because judgments or results are missing."""
