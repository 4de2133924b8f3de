"""A metric's judged mean corrected by people's labels, as a run's outputs carry it:
summary.json's `label_corrected`, the report's line, and the interval the gates hold the
metric to (`Gates.verdict`).

The labels are read and the correction computed above this layer (`judge.labels.estimate
.Labels`, which owns the labels file); a run's writer takes anything with its `correct`
method (`Corrector`), so `judge eval --labels` and `EvaluationResult.write(labels=...)`
write the same files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from judge.run.gates import Gates
from judge.run.result_view import ResultView

# how the gates' verdict names the interval a corrected metric is held to
CORRECTED_INTERVAL = "label-corrected (PPI) interval"


@dataclass(frozen=True)
class CorrectedMean:
    """One metric's mean corrected by people's labels (prediction-powered inference).

    Attributes:
        metric: the metric corrected.
        interval: the corrected interval (low, high) on the metric's own scale, which its
            gates are checked on: a floor by its lower end, a cap by its upper end.
        line: the report's line ("faithfulness corrected by 40 labels: ...").
        record: summary.json's `label_corrected` entry.
        warnings: what makes the interval doubtful (labels not a random sample, ...).
    """

    metric: str
    interval: tuple[float, float]
    line: str
    record: dict[str, Any]
    warnings: tuple[str, ...] = ()


class Corrector(Protocol):
    """What corrects a finished run's mean with labels (`judge.labels.estimate.Labels`)."""

    def correct(self, result: ResultView, gates: Gates) -> CorrectedMean:
        """The corrected mean of the run; `gates` may name the metric the labels are of."""
        ...
