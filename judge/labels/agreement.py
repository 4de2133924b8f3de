"""`judge.agreement`: score labelled rows with one metric, then measure how far the judge
agrees with the people's labels, overall and by group."""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from judge.aio import sync_twin
from judge.errors import InputFormatError, UnknownMetricError
from judge.formatting import MISSING, number
from judge.json_values import nan_to_null
from judge.labels import kinds
from judge.labels.check import Kind, Labels, read_labels
from judge.labels.disagreements import worst
from judge.labels.kinds import Measure
from judge.llm.config import LLM
from judge.llm.session import LLMSession
from judge.metrics.registry import Metric
from judge.metrics.resolve import MetricLike, named_metric
from judge.run.data import read_records
from judge.run.evaluate import aevaluate
from judge.run.options import RunOptions, Unpack
from judge.run.results import EvaluationResult
from judge.run.rows import ResultRow

# The measures a group's line shows in the text table (every measure is in the JSON).
HEADLINE = {
    "binary": ("auroc", "balanced_accuracy@0.5", "kappa@0.5"),
    "graded": kinds.GRADED,
    "pairwise": kinds.PAIRWISE,
}


@dataclass(frozen=True)
class Agreement:
    """The agreement on one set of rows: how many, which were not scored and why, measures.

    Args:
        rows: labelled rows.
        scored: rows the metric scored (for pairwise, `counts` has the pairs compared).
        unscored: reason -> rows the metric left NaN (`no_claims`, `judge_error`, ...);
            they are left out of the measures, and of their pairs.
        counts: binary: positive, negative; graded: distinct labels and scores; pairwise:
            pairs, compared (both rows scored), wins, ties, losses.
        measures: name -> `Measure` (value, 95% bootstrap interval, note).
    """

    rows: int
    scored: int
    unscored: dict[str, int]
    counts: dict[str, int]
    measures: dict[str, Measure]


def _assess(labels: Labels, oriented: np.ndarray, reasons: list[str], rows: list[int]) -> Agreement:
    """The agreement of the given rows (their pairs, for pairwise labels)."""
    scored = [i for i in rows if not math.isnan(oriented[i])]
    unscored = Counter(reasons[i] for i in rows if math.isnan(oriented[i]))
    if labels.kind == "pairwise":
        chosen = set(rows)
        pairs = [p for p in labels.pairs if p.preferred in chosen]
        both = [p for p in pairs if not np.isnan(oriented[[p.preferred, p.other]]).any()]
        measures, counts = kinds.pairwise(
            oriented[[p.preferred for p in both]], oriented[[p.other for p in both]]
        )
        counts = {"pairs": len(pairs), "compared": len(both), **counts}
    else:
        measure = kinds.binary if labels.kind == "binary" else kinds.graded
        measures, counts = measure(oriented[scored], labels.values[scored])
    return Agreement(len(rows), len(scored), dict(sorted(unscored.items())), counts, measures)


class AgreementResult:
    """How far a metric agrees with people's labels, overall and by `by` group.

    Attributes:
        metric, kind, label, by: what was compared.
        overall: the `Agreement` of every row.
        groups: group value -> its `Agreement` (empty without `by`).
        disagreements: the worst disagreements, worst first, with the judge's evidence.
        evaluation: the `EvaluationResult` of the metric on every row.
        config: source, orientation, model and the rest of the run's settings.
    """

    def __init__(
        self,
        labels: Labels,
        metric: str,
        overall: Agreement,
        groups: dict[str, Agreement],
        disagreements: list[dict[str, Any]],
        evaluation: EvaluationResult,
        config: dict[str, Any],
    ):
        self.metric, self.kind, self.label = metric, labels.kind, labels.column
        self.by: str | None = config.get("by")
        self.overall, self.groups = overall, groups
        self.disagreements, self.evaluation, self.config = disagreements, evaluation, config

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-able data, undefined values as null."""
        return nan_to_null(  # type: ignore[no-any-return]
            {
                "metric": self.metric,
                "kind": self.kind,
                "label": self.label,
                "by": self.by,
                "overall": asdict(self.overall),
                "groups": {g: asdict(a) for g, a in self.groups.items()},
                "disagreements": self.disagreements,
                "usage": self.evaluation.usage,
                "config": self.config,
            }
        )

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write `to_dict()` as agreement.json."""
        Path(path).write_text(
            json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )

    def table(self) -> str:
        """The measures and the breakdown as text for the terminal."""
        o = self.overall
        lines = [
            f"{self.metric} vs {self.kind} labels {self.label!r}: {o.rows} rows, {o.scored} "
            f"scored; {', '.join(f'{k} {v}' for k, v in o.counts.items())}",
            f"not scored: {', '.join(f'{k} {v}' for k, v in o.unscored.items()) or 'none'}",
            "",
            f"{'measure':<24} {'value':>7} {'95% CI':>17}  note",
        ]
        for name, m in o.measures.items():
            lines.append(f"{name:<24} {number(m.value):>7} {_interval(m):>17}  {m.note or ''}")
        if self.groups:
            shown = HEADLINE[self.kind]
            width = {m: max(len(m), 22) for m in shown}  # a value and its interval: 22 wide
            lines += ["", f"by {self.by}:"]
            head = f"{'group':<16} {'rows':>5} {'scored':>6}  "
            lines.append((head + "  ".join(f"{m:<{width[m]}}" for m in shown)).rstrip())
            for group, a in self.groups.items():
                cells = (
                    f"{number(a.measures[m].value) + ' ' + _interval(a.measures[m]):<{width[m]}}"
                    for m in shown
                )
                line = f"{group[:16]:<16} {a.rows:>5} {a.scored:>6}  " + "  ".join(cells)
                lines.append(line.rstrip())
        return "\n".join(lines).rstrip()


def _interval(m: Measure) -> str:
    if math.isnan(m.ci_low):
        return MISSING
    return f"[{m.ci_low:.3f}, {m.ci_high:.3f}]"


def _higher_is_better(metric: MetricLike) -> bool:
    """Whether higher scores of the metric mean more faithful/relevant."""
    if isinstance(metric, Metric):
        return metric.higher_is_better
    try:
        return named_metric(metric).higher_is_better  # a built-in or a plugin's
    except UnknownMetricError:
        return True  # a retrieval metric: evaluate has already refused unknown names


def _reason(row: ResultRow, metric: str) -> str:
    return row.reasons.get(metric, "row_error" if row.error else "missing")


async def aagreement(
    data: Any,
    *,
    metric: MetricLike,
    label: str,
    kind: Kind | None = None,
    by: str | None = None,
    pair: str | None = None,
    llm: LLM | LLMSession | None = None,
    disagreements: int = 10,
    **options: Unpack[RunOptions],
) -> AgreementResult:
    """Score labelled rows with a metric and measure its agreement with the labels
    (`agreement` from sync code, `aagreement` awaited).

    The labels are checked before any request: a missing column, a binary label other than
    0/1 or a pair without exactly one preferred row is an `InputFormatError`. Scores come
    from `judge.evaluate`, so with a cache a second run makes no request.

    Args:
        data: what `judge.evaluate` takes (a path, a list of dicts, a DataFrame, a Dataset),
            with a label column beside the sample's columns.
        metric: the metric to check, a name or a `Metric`. A lower-is-better metric
            (hallucination_rate) is compared as 1 - score.
        label: the column of people's labels.
        kind: "binary" (1 = faithful/relevant, 0 = not), "graded" (numbers, higher =
            better) or "pairwise" (in each pair of rows sharing a `pair` id, 1 marks the
            preferred row and 0 the other); default pairwise with `pair`, else binary.
        by: a column to break the measures down by (language, source...).
        pair: the pair-id column, for pairwise labels.
        llm: the judge model, as in `judge.evaluate`.
        disagreements: how many of the worst disagreements to keep, with their evidence.
        **options: embeddings, cache, column_map, concurrency, progress,
            progress_interval, as in `judge.evaluate`.

    Returns:
        An `AgreementResult`: measures with 95% bootstrap intervals (rows resampled, or
        pairs for pairwise), rows not scored counted by reason, a breakdown by `by`.
    """
    records, source = read_records(data)
    if not records:
        raise InputFormatError(f"{source}: no rows to compare")
    labels = read_labels(
        records, kind=kind or ("pairwise" if pair else "binary"), label=label, by=by, pair=pair
    )
    evaluation = await aevaluate(records, metrics=[metric], llm=llm, **options)
    name, up = evaluation.metrics[0], _higher_is_better(metric)
    raw = np.array([r.scores.get(name, math.nan) for r in evaluation.rows], dtype=np.float64)
    oriented = raw if up else 1.0 - raw
    reasons = [_reason(r, name) for r in evaluation.rows]
    everything = list(range(len(records)))
    groups = {}
    if labels.groups is not None:
        for group in sorted(set(labels.groups)):
            members = [i for i in everything if labels.groups[i] == group]
            groups[group] = _assess(labels, oriented, reasons, members)
    config = {
        **evaluation.config,
        "source": source,
        "label": label,
        "kind": labels.kind,
        "by": by,
        "pair": pair,
        "orientation": "score" if up else "1 - score (lower is better)",
    }
    return AgreementResult(
        labels,
        name,
        _assess(labels, oriented, reasons, everything),
        groups,
        worst(labels, evaluation.rows, name, oriented, disagreements),
        evaluation,
        config,
    )


agreement = sync_twin(aagreement)
