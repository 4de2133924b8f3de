"""What the writers of a run's files read of its result.

`judge.run.results.EvaluationResult` implements `ResultView`; the modules that write a run's
folder and report (`outputs`, `report_html`) take the protocol, so `results`, which calls
them from `EvaluationResult.write`, is the only module that names the class and no import
circle runs through the type hints.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from judge.run.config import RunConfig
from judge.run.rows import MetricSummary, ResultRow, RowTally


class ResultView(Protocol):
    """A finished run's rows, summaries and configuration, read-only."""

    @property
    def rows(self) -> Sequence[ResultRow]:
        """The rows in input order."""
        ...

    @property
    def metrics(self) -> list[str]:
        """Every metric's name, in the run's order."""
        ...

    @property
    def config(self) -> RunConfig:
        """The run's configuration, as summary.json records it."""
        ...

    @property
    def usage(self) -> dict[str, Any]:
        """Tokens, calls and cost of the run's judges."""
        ...

    @property
    def summary(self) -> Mapping[str, MetricSummary]:
        """Metric -> its summary."""
        ...

    @property
    def tally(self) -> RowTally:
        """What the summaries and counts were computed from."""
        ...

    @property
    def rows_with_errors(self) -> int:
        """Rows that could not be evaluated or had a judge fail."""
        ...

    @property
    def judged_rows(self) -> int:
        """Rows whose judges ran."""
        ...

    @property
    def rows_with_judge_errors(self) -> int:
        """Judged rows in which at least one judge failed."""
        ...

    @property
    def judge_error_rate(self) -> float:
        """Share of the judged rows in which a judge failed."""
        ...

    def scores(self, metric: str) -> list[float]:
        """The metric's defined scores, in row order."""
        ...

    def worst(self, limit: int = 10) -> list[ResultRow]:
        """The worst rows, at most `limit`."""
        ...

    def summary_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-able data."""
        ...

    def write_jsonl(self, path: str | os.PathLike[str]) -> str:
        """Write results.jsonl to `path`; returns its sha256."""
        ...
