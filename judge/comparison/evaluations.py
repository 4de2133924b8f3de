"""A/B comparison of two evaluations over the same samples, with paired significance.

For every metric: both means, the mean paired difference (B - A), its 95% paired
bootstrap interval, a two-sided paired randomisation test, wins / ties / losses, and
Holm-Bonferroni adjusted p-values across the metrics compared. Samples are matched by
id (or, when ids do not match, by identical question); unmatched ones are reported and
left out, and so are pairs where either side is NaN for that metric.

When the rows of both evaluations are turns of conversations (they carry
`conversation_id`), the bootstrap and the randomisation test resample conversations, not
turns: the turns of one chat are not independent (`judge.stats.cluster_bootstrap_cis`).
The pairs are still matched by id; the conversations are those of either side (pairs
whose conversations are joined by either run are one unit).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from judge.errors import InputFormatError
from judge.formatting import MISSING, counted, noted, number, p_text, pairs_used
from judge.json_values import nan_to_null
from judge.metrics.registry import higher_is_better, metric_range
from judge.run.folder import RunFolder
from judge.run.gates import users_metrics
from judge.run.rows import Resampling, ResultRow, RowTally
from judge.stats import (
    EXACT_LIMIT,
    bootstrap_ci,
    holm,
    interval_note,
    permutation_p_value,
    reaches,
    smallest_p_value,
    units_to_reach,
)

Scores = dict[str, dict[str, float]]  # sample key -> metric -> value (NaN: undefined)
ALPHA = 0.05


@dataclass(frozen=True)
class MetricComparison:
    """The paired comparison of one metric (delta = B - A); NaN where nothing was paired."""

    metric: str
    n: int
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float
    wins: int
    ties: int
    losses: int
    higher_is_better: bool = True
    # the conversations its pairs belong to, when conversations were resampled; else None
    conversations: int | None = None
    # why the interval is not a bootstrap one (one pair or conversation, differences all
    # the same: `judge.stats.few_units_interval`); else None
    interval_note: str | None = None

    @property
    def significant(self) -> bool:
        """Whether the change survives Holm's adjustment at the 5% level."""
        return self.p_adjusted < ALPHA  # False for NaN

    @property
    def worse(self) -> bool:
        """Whether B moved in the bad direction (down, or up for hallucination_rate)."""
        return self.delta < 0 if self.higher_is_better else self.delta > 0  # False for NaN


@dataclass
class Comparison:
    """The comparison of B against A: per-metric statistics and per-sample deltas."""

    label_a: str
    label_b: str
    metrics: dict[str, MetricComparison]
    keys: list[str]
    deltas: dict[str, list[float]]
    unmatched_a: list[str] = field(default_factory=list)
    unmatched_b: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    # what the statistics resampled: None (rows) unless the rows are turns of conversations
    resampled: Resampling | None = None
    # the means by turn position (`turn_deltas`), when both sides' rows are turns
    by_turn: list[dict[str, Any]] = field(default_factory=list)

    def diagnosis_b(self) -> list[str]:
        """What B's means suggest to fix first (retrieval first), as report.html says it."""
        from judge.run.diagnose import diagnose

        return diagnose({m: c.mean_b for m, c in self.metrics.items()})

    def regressions(self) -> list[MetricComparison]:
        """Metrics that got significantly worse."""
        return [m for m in self.metrics.values() if m.significant and m.worse]

    def gate_cannot_fail(self, alpha: float, words: GateWording) -> str | None:
        """`cannot_fail` of this comparison's metrics, Holm-adjusted across those tested
        (the ones with a p-value)."""
        tests = sum(not math.isnan(m.p_value) for m in self.metrics.values())
        return cannot_fail([(m.metric, m) for m in self.metrics.values()], alpha, tests, words)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the `--format json` output), NaN as null."""
        data = {
            "a": self.label_a,
            "b": self.label_b,
            "matched": len(self.keys),
            "unmatched_a": self.unmatched_a,
            "unmatched_b": self.unmatched_b,
            "metrics": {
                name: {
                    k: v
                    for k, v in asdict(m).items()
                    if k != "metric" and not (k in ("conversations", "interval_note") and v is None)
                }
                for name, m in self.metrics.items()
            },
            **({"resampled": self.resampled.to_json()} if self.resampled else {}),
            **({"by_turn": self.by_turn} if self.by_turn else {}),
            **self.extra,
            "diagnosis_b": self.diagnosis_b(),
        }
        return nan_to_null(data)  # type: ignore[no-any-return]

    def table(self) -> str:
        """A terminal table: both means, the delta with its interval, p-values, W/T/L."""
        head = (
            f"{'metric':<20} {'A':>7} {'B':>7} {'Δ':>8} {'95% CI of Δ':>18} {'p':>7} "
            f"{'p_holm':>7}  W/T/L"
        )
        lines = [head, "=" * len(head)]
        for m in self.metrics.values():
            arrow = (
                "" if math.isnan(m.delta) else "↑" if m.delta > 0 else "↓" if m.delta < 0 else "="
            )
            star = " *" if m.significant else ""
            ci = MISSING if math.isnan(m.ci_low) else f"[{m.ci_low:+.3f}, {m.ci_high:+.3f}]"
            delta = number(m.delta, sign="+")
            lines.append(
                f"{m.metric:<20} {number(m.mean_a):>7} {number(m.mean_b):>7} {delta:>7}{arrow} "
                f"{ci:>18} {p_text(m.p_value):>7} {p_text(m.p_adjusted):>7}  "
                f"{m.wins}/{m.ties}/{m.losses}{star}"
            )
        lines.append(
            f"\n{pairs_used(len(self.keys), {m.metric: m.n for m in self.metrics.values()})}; "
            "* = significant after Holm-Bonferroni "
            f"(p < {ALPHA}). Unmatched: {len(self.unmatched_a)} in A, "
            f"{len(self.unmatched_b)} in B."
        )
        if self.resampled is not None:
            lines.append(f"CI and p {self.resampled}.")
        lines += noted(
            {m.metric: m.interval_note for m in self.metrics.values() if m.interval_note}
        )
        if self.by_turn:
            lines += ["", *self._turn_table()]
        return "\n".join(lines)

    def _turn_table(self) -> list[str]:
        """Each metric's Δ by turn position, as lines of text."""
        cells = " ".join(f"{'turn ' + str(t['position']):>8}" for t in self.by_turn)
        lines = [
            "Δ by turn position (each conversation's turns in order of `turn`, in B)",
            f"{'metric':<20} {cells}",
            f"{'pairs':<20} " + " ".join(f"{t['pairs']:>8}" for t in self.by_turn),
        ]
        for metric in self.metrics:
            deltas = " ".join(
                f"{number(t['metrics'][metric]['delta'], sign='+'):>8}" for t in self.by_turn
            )
            lines.append(f"{metric:<20} {deltas}")
        return lines


def turn_deltas(
    a: Scores, b: Scores, keys: Sequence[str], positions: Mapping[str, int], metrics: list[str]
) -> list[dict[str, Any]]:
    """Per turn position (`positions`: key -> position from 1, as `RowTally.turn_positions`
    ranks turns), the pairs there and per metric both means and their difference over the
    pairs defined on both sides (`n`; NaN means when none)."""
    last = max((positions.get(k, 0) for k in keys), default=0)
    out = []
    for position in range(1, last + 1):
        here = [k for k in keys if positions.get(k) == position]
        entry: dict[str, Any] = {"position": position, "pairs": len(here), "metrics": {}}
        for metric in metrics:
            pairs = [(a[k].get(metric), b[k].get(metric)) for k in here]
            kept = np.array(
                [
                    (x, y)
                    for x, y in pairs
                    if x is not None and y is not None and not (math.isnan(x) or math.isnan(y))
                ],
                dtype=np.float64,
            ).reshape(-1, 2)
            mean_a, mean_b = kept.mean(axis=0) if kept.size else (math.nan, math.nan)
            entry["metrics"][metric] = {
                "n": int(kept.shape[0]),
                "mean_a": float(mean_a),
                "mean_b": float(mean_b),
                "delta": float(mean_b - mean_a),
            }
        out.append(entry)
    return out


def turn_positions(rows: list[ResultRow], key: str) -> dict[str, int]:
    """Each judged turn's position in its conversation (1, 2, ...), by `key`; {} when no
    row is a turn."""
    tally = RowTally([])
    for row in rows:
        tally.add(row)
    positions = tally.turn_positions()
    if positions is None:
        return {}
    return {
        str(getattr(r, key)): int(p)
        for r, p in zip(rows, positions, strict=True)
        if p > 0 and not r.error
    }


def compare_one(
    metric: str,
    a: list[float | None],
    b: list[float | None],
    *,
    lower: bool = False,
    clusters: Sequence[Hashable] | None = None,
) -> MetricComparison:
    """Statistics of one metric over paired values (NaN or None on either side is left
    out); `lower`: a metric of the runs' own where lower is better (see `lower_is_better`);
    `clusters`: the conversation of each pair, to resample conversations, not pairs."""
    kept = [
        i
        for i, (x, y) in enumerate(zip(a, b, strict=True))
        if x is not None and y is not None and not (math.isnan(x) or math.isnan(y))
    ]
    pairs = [(a[i], b[i]) for i in kept]
    xa = np.array([p[0] for p in pairs], dtype=np.float64)
    xb = np.array([p[1] for p in pairs], dtype=np.float64)
    diff = xb - xa
    groups = None if clusters is None else _numbered([clusters[i] for i in kept])
    scale = None if lower else metric_range(metric)  # a runs' own metric: not known
    bounds = None if scale is None else (scale[0] - scale[1], scale[1] - scale[0])
    low, high = bootstrap_ci(diff, clusters=groups, bounds=bounds)
    better_up = higher_is_better(metric) and not lower
    return MetricComparison(
        metric=metric,
        n=len(pairs),
        mean_a=float(xa.mean()) if pairs else math.nan,
        mean_b=float(xb.mean()) if pairs else math.nan,
        delta=float(diff.mean()) if pairs else math.nan,
        ci_low=low,
        ci_high=high,
        p_value=permutation_p_value(diff, clusters=groups),
        p_adjusted=math.nan,
        wins=int((diff > 0).sum()) if better_up else int((diff < 0).sum()),
        ties=int((diff == 0).sum()),
        losses=int((diff < 0).sum()) if better_up else int((diff > 0).sum()),
        higher_is_better=better_up,
        conversations=None if groups is None else len(set(groups.tolist())),
        interval_note=interval_note(diff, clusters=groups, bounds=bounds, unit="pair"),
    )


@dataclass(frozen=True)
class GateWording:
    """How a regression gate's caller names it and what the user can change, for the
    refusal of a gate that cannot fail (`cannot_fail`): CLI flags or keyword arguments."""

    gate: str  # e.g. "--fail-on-regression", "assert_no_regression"
    fewer: str  # how to run fewer tests: "fewer metrics (--metric)"
    alpha: str | None = None  # how to give a larger alpha, when the caller has one


def units_of(m: MetricComparison) -> tuple[int, str]:
    """The units a metric's randomisation test flips the signs of: (count, name), paired
    questions, or conversations when conversations were resampled."""
    if m.conversations is not None:
        return m.conversations, "conversation"
    return m.n, "paired question"


def cannot_fail(
    compared: Sequence[tuple[str, MetricComparison]],
    alpha: float,
    tests: int,
    words: GateWording,
) -> str | None:
    """Why a regression gate over `compared` ((label, metric comparison) pairs, its p-values
    Holm-adjusted across `tests` tests) cannot fail, or None when every metric could.

    The paired randomisation test on n units (`judge.stats.permutation_p_value`) cannot
    give a p-value below 2 / 2^n (1 / 200,001 past 20 units), and Holm's adjustment
    multiplies the smallest by the number of tests: with too few units no regression,
    however large, is significant, and a gate that could not have failed must not pass
    in silence. The one rule of every regression gate (`judge compare
    --fail-on-regression`, two runs or many, `judge.assert_no_regression`)."""
    short = [(label, *units_of(m)) for label, m in compared]
    short = [(label, n, unit) for label, n, unit in short if not reaches(n, alpha, tests)]
    if not short:
        return None
    needed = units_to_reach(alpha, tests)
    most = max(n for _, n, _ in short)
    (first, first_n, first_unit), *others = short
    listed = f"{first} has {counted(first_n, first_unit)}" + "".join(
        f", {label} {n}" for label, n, _ in others
    )
    smallest = smallest_p_value(most)
    shown = f"2/2^{most} = {smallest:.4g}" if 0 < most <= EXACT_LIMIT else f"{smallest:.4g}"
    family = f" (Holm across {tests} tests: {alpha:g}/{tests})" if tests > 1 else ""
    larger = f", or a larger {words.alpha}" if words.alpha else ""
    if needed is None:
        todo = (
            f"no number of questions is enough at {alpha:g} with {tests} tests: compare "
            f"{words.fewer}{larger}"
        )
    else:
        todo = (
            f"it needs at least {needed} {first_unit}s per metric: compare more "
            f"{'conversations' if first_unit == 'conversation' else 'questions'}, or "
            f"{words.fewer}{larger}"
        )
    return (
        f"{words.gate} cannot fail: {listed}, and on {most} the paired randomisation "
        f"test's smallest p-value is {shown}, not below {alpha:g}{family}, so no "
        f"regression, however large, could fail it; {todo}"
    )


def _numbered(labels: Sequence[Hashable]) -> np.ndarray:
    """Each label's number among the distinct labels, in order of first occurrence."""
    numbers: dict[Hashable, int] = {}
    return np.array([numbers.setdefault(x, len(numbers)) for x in labels], dtype=np.int64)


def compare_scores(
    a: Scores,
    b: Scores,
    metrics: list[str] | None = None,
    *,
    label_a: str = "A",
    label_b: str = "B",
    lower_is_better: Collection[str] = (),
    conversations: Mapping[str, Hashable] | None = None,
) -> Comparison:
    """Compare per-sample scores already matched by key; `lower_is_better` names the
    runs' own metrics where lower is better (built-ins' directions are known);
    `conversations` gives each key's conversation (`paired_conversations`): conversations
    are then resampled, not samples."""
    keys = [k for k in a if k in b]
    if not keys:
        raise InputFormatError(f"{label_a} and {label_b} share no sample: nothing to compare")
    if metrics is None:
        first_a, first_b = next(iter(a.values())), next(iter(b.values()))
        metrics = [m for m in first_a if m in first_b]
    clusters = None if conversations is None else [conversations[k] for k in keys]
    results = {
        m: compare_one(
            m,
            [a[k].get(m) for k in keys],
            [b[k].get(m) for k in keys],
            lower=m in lower_is_better,
            clusters=clusters,
        )
        for m in metrics
    }
    adjusted = holm([r.p_value for r in results.values()])
    results = {m: _with_adjusted(r, p) for (m, r), p in zip(results.items(), adjusted, strict=True)}
    deltas = {m: [_delta(a[k].get(m), b[k].get(m)) for k in keys] for m in metrics}
    return Comparison(
        label_a,
        label_b,
        results,
        keys,
        deltas,
        unmatched_a=[k for k in a if k not in b],
        unmatched_b=[k for k in b if k not in a],
        resampled=None
        if clusters is None
        else Resampling("conversation", len(set(clusters)), len(keys)),
    )


def _with_adjusted(result: MetricComparison, p: float) -> MetricComparison:
    return dataclasses.replace(result, p_adjusted=p)


def _delta(x: float | None, y: float | None) -> float:
    """y - x; NaN when either is undefined."""
    if x is None or y is None:
        return math.nan
    return y - x


def load_results(source: Any) -> tuple[list[ResultRow], str]:
    """Rows of an EvaluationResult, a results.jsonl file, or a directory holding one."""
    if hasattr(source, "rows"):
        return list(source.rows), "result"
    folder = RunFolder.of(source)  # a run's folder: its summary vouches for its rows
    path = folder.results
    if not path.is_file():
        raise InputFormatError(f"{path}: no such results file (judge eval writes results.jsonl)")
    rows = [row for _, _, row in folder.rows()]
    return rows, str(path)


def lower_is_better(source: Any) -> list[str]:
    """The metrics of its own where lower is better that a run recorded (its config's
    `lower_is_better`: the registry knows only the built-ins' directions); [] for a
    results file no summary.json vouches for."""
    config = getattr(source, "config", None)
    if config is None:
        return users_metrics(RunFolder.of(source).lower_is_better())
    found = config.get("lower_is_better") if isinstance(config, Mapping) else None
    return users_metrics(str(m) for m in found or [])


def match_key(
    rows_a: list[ResultRow], rows_b: list[ResultRow], label_a: str = "A", label_b: str = "B"
) -> str:
    """The field that pairs the samples of two evaluations: "id", or "question" when every
    question is unique on both sides and more samples share a question than an id, or ids
    name several judged rows. Neither unique: an InputFormatError naming the run (by its
    label) whose ids repeat, as a pairing by them would keep one row of each such id."""
    by_id_a, by_id_b = keyed_scores(rows_a, "id"), keyed_scores(rows_b, "id")
    by_q_a, by_q_b = keyed_scores(rows_a, "question"), keyed_scores(rows_b, "question")
    shared_ids = len(by_id_a.keys() & by_id_b.keys())
    shared_questions = len(by_q_a.keys() & by_q_b.keys())
    doubled = {label: _repeated(rows) for label, rows in ((label_a, rows_a), (label_b, rows_b))}
    # Ids usually identify samples; when two exports numbered them differently, the
    # question text is the better key.
    # (Unique among the judged rows, the ones paired: an error row's sample is none.)
    if (
        (shared_questions > shared_ids or any(doubled.values()))
        and len(by_q_a) == _judged(rows_a)
        and len(by_q_b) == _judged(rows_b)
    ):
        return "question"
    for label, ids in doubled.items():
        if ids:
            raise InputFormatError(
                f"{label}: ids {', '.join(map(repr, ids[:5]))} name several judged rows, "
                "and questions repeat too: the samples of two runs are paired by id (or "
                "by question when every question is unique); give each sample its own id "
                "(an id column) and evaluate again"
            )
    return "id"


def _judged(rows: list[ResultRow]) -> int:
    """How many rows were judged (not error rows)."""
    return sum(1 for row in rows if not row.error)


def _repeated(rows: list[ResultRow]) -> list[str]:
    """The ids that name several judged rows (not error rows), in order."""
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for row in rows:
        if not row.error:
            ident = str(row.id)
            if ident in seen:
                repeated[ident] = None
            seen.add(ident)
    return list(repeated)


def keyed_scores(rows: list[ResultRow], key: str) -> Scores:
    """The scores of the rows that were judged, by `key` ("id" or "question", `match_key`)."""
    return {str(getattr(r, key)): r.scores for r in rows if not r.error}


def paired_conversations(
    rows_a: list[ResultRow], rows_b: list[ResultRow], key: str
) -> dict[str, int] | None:
    """The conversation of each judged sample (by `key`, as `keyed_scores` keys them),
    numbered: samples whose conversations either run joins are one conversation, and a
    sample that is no turn on either side is one of its own; None unless both runs' rows
    are turns of conversations (then samples are resampled, as always)."""
    if not any(r.conversation_id is not None for r in rows_a) or not any(
        r.conversation_id is not None for r in rows_b
    ):
        return None
    parent: dict[Hashable, Hashable] = {}

    def root(node: Hashable) -> Hashable:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]  # path halving
            node = parent[node]
        return node

    for side, rows in (("a", rows_a), ("b", rows_b)):
        for r in rows:
            if not r.error:
                sample = ("sample", str(getattr(r, key)))
                if r.conversation_id is not None:
                    parent[root(sample)] = root((side, str(r.conversation_id)))
                else:
                    root(sample)
    numbers: dict[Hashable, int] = {}
    return {
        str(node[1]): numbers.setdefault(root(node), len(numbers))
        for node in list(parent)
        if isinstance(node, tuple) and node[0] == "sample"
    }


def compare(a: Any, b: Any, *, metrics: list[str] | None = None) -> Comparison:
    """Compare two evaluations of the same samples (B against A).

    Args:
        a: the baseline: an EvaluationResult, a results.jsonl, or an output directory.
        b: the candidate, in the same forms.
        metrics: metric names to compare; default every metric both have.

    Returns:
        A `Comparison`; `table()` for the terminal, `to_dict()` for JSON.
    """
    rows_a, label_a = load_results(a)
    rows_b, label_b = load_results(b)
    key = match_key(rows_a, rows_b, label_a, label_b)
    scores_a, scores_b = keyed_scores(rows_a, key), keyed_scores(rows_b, key)
    conversations = paired_conversations(rows_a, rows_b, key)
    comparison = compare_scores(
        scores_a,
        scores_b,
        metrics,
        label_a=label_a,
        label_b=label_b,
        lower_is_better={*lower_is_better(a), *lower_is_better(b)},
        conversations=conversations,
    )
    if conversations is not None:  # B's turns give the positions: B is the run judged
        positions = turn_positions(rows_b, key)
        chosen = list(comparison.metrics)
        comparison.by_turn = turn_deltas(scores_a, scores_b, comparison.keys, positions, chosen)
    return comparison


class ToDict(Protocol):
    """A comparison (two runs, or many against a baseline) as its JSON data."""

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON values."""


def write_json(comparison: ToDict, path: str | os.PathLike[str]) -> None:
    """Write a comparison as JSON (comparison.json)."""
    Path(path).write_text(
        json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
