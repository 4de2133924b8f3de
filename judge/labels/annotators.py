"""How far people agree with each other on the rows they all labelled: Cohen's kappa for
two annotators, Fleiss' kappa for more, with the share of agreeing pairs beside it, each
with a 95% bootstrap interval (rows resampled)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from judge.json_values import nan_to_null
from judge.labels import measures
from judge.labels.kinds import Measure
from judge.stats import BOOTSTRAP_RESAMPLES, bootstrap_ci_of


@dataclass(frozen=True)
class AnnotatorAgreement:
    """The agreement of several people's labels.

    Args:
        annotators: who labelled, sorted.
        rows: rows labelled by two annotators or more (with two annotators: by both),
            the rows the measures are computed on.
        measure: `cohen_kappa` (two annotators) or `fleiss_kappa` (more).
        kappa: the kappa, NaN with a note when undefined (too few rows, one category).
        agreement: the share of pairs of annotators who gave a row the same label.
    """

    annotators: list[str]
    rows: int
    measure: str
    kappa: Measure
    agreement: Measure

    def to_dict(self) -> dict[str, Any]:
        """JSON-able data, undefined values as null."""
        return nan_to_null(asdict(self))  # type: ignore[no-any-return]

    def text(self) -> str:
        """One line for the terminal."""
        if len(self.annotators) < 2:
            return "agreement between annotators: needs labels from two annotators or more"
        names = ", ".join(self.annotators)
        kappa = _shown(self.kappa)
        return (
            f"agreement between annotators ({names}) on {self.rows} rows labelled by more "
            f"than one: {self.measure} {kappa}; same label {_shown(self.agreement)}"
        )


def _shown(m: Measure) -> str:
    if math.isnan(m.value):
        return f"undefined ({m.note})" if m.note else "undefined"
    interval = "" if math.isnan(m.ci_low) else f" [{m.ci_low:.3f}, {m.ci_high:.3f}]"
    return f"{m.value:.3f}{interval}"


def annotator_agreement(labels: Mapping[Any, Mapping[str, float]]) -> AnnotatorAgreement:
    """Cohen's kappa (two annotators) or Fleiss' kappa (more) of binary labels.

    Args:
        labels: row -> annotator -> label (0 or 1). Rows labelled by fewer than two
            annotators are left out (with two annotators, rows both labelled are kept).
    """
    annotators = sorted({name for given in labels.values() for name in given})
    shared = [given for given in labels.values() if len(given) >= 2]
    measure = "cohen_kappa" if len(annotators) == 2 else "fleiss_kappa"
    if len(annotators) < 2 or not shared:
        none = Measure(math.nan, math.nan, math.nan, "no row labelled by two annotators")
        return AnnotatorAgreement(annotators, 0, measure, none, none)
    if measure == "cohen_kappa":
        first, second = (np.array([g[a] for g in shared], dtype=np.float64) for a in annotators)

        def statistic(weights: np.ndarray) -> np.ndarray:
            counts = measures.confusion(first, second, weights)
            kappa = measures.classification(counts)[..., 2]
            return np.column_stack([kappa, _divide_rows(counts[:, 0] + counts[:, 3], weights)])

    else:
        categories = sorted({value for given in shared for value in given.values()})
        counts = np.array(
            [[list(given.values()).count(c) for c in categories] for given in shared],
            dtype=np.float64,
        )
        raters = counts.sum(axis=1)
        pairs_agreeing = (counts * (counts - 1)).sum(axis=1) / (raters * (raters - 1))

        def statistic(weights: np.ndarray) -> np.ndarray:
            agreeing = _divide_rows(weights @ pairs_agreeing, weights)
            return np.column_stack([measures.fleiss_kappa(counts, weights), agreeing])

    n = len(shared)
    point = statistic(np.ones((1, n)))[0]
    low, high, left_out = bootstrap_ci_of(statistic, n)
    values = []
    for j in range(2):
        if math.isnan(point[j]):
            why = "every label given is the same" if n else "no rows"
            values.append(Measure(math.nan, math.nan, math.nan, why))
            continue
        note = (
            f"{left_out[j]} of {BOOTSTRAP_RESAMPLES} resamples undefined (left out)"
            if left_out[j]
            else None
        )
        values.append(Measure(float(point[j]), float(low[j]), float(high[j]), note))
    return AnnotatorAgreement(annotators, n, measure, values[0], values[1])


def _divide_rows(total: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """A per-resample sum divided by the rows drawn."""
    return np.asarray(total / weights.sum(axis=1))
