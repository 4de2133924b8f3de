"""Many evaluations against one baseline: a runs x metrics table, paired tests of each run
against the baseline with Holm's correction across every (run, metric) pair together, and
per question what got worse and what got better, with the judge's evidence.

Each run is paired with the baseline as `judge.compare` pairs two evaluations (by id, or
by identical question when the ids do not match; `match_key`), over the questions both
have. The means of the runs table are over each run's own rows, so a run that answered
fewer questions is not hidden behind the baseline's.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.comparison.evaluations import (
    ALPHA,
    Comparison,
    MetricComparison,
    compare_scores,
    keyed_scores,
    load_results,
    lower_is_better,
    match_key,
    paired_conversations,
)
from judge.errors import InputFormatError, JudgeError
from judge.formatting import MISSING, number, p_text, pairs_used
from judge.json_values import nan_to_null
from judge.metrics.registry import higher_is_better
from judge.run.folder import RunFolder
from judge.run.rows import MetricSummary, Resampling, ResultRow, RowTally
from judge.stats import holm

# A per-question change smaller than this is float noise, not a change.
EPSILON = 1e-9


@dataclass(frozen=True)
class RunSummary:
    """One evaluation's own means: per metric the mean and its 95% bootstrap interval over
    every row of that evaluation (not only the rows it shares with the baseline)."""

    label: str
    source: str
    rows: int
    metrics: dict[str, MetricSummary]
    # the intervals' resampling when the rows are turns of conversations; else None (rows)
    resampled: Resampling | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON values; NaN stays NaN (`ManyComparison.to_dict` makes it null)."""
        from judge.run.diagnose import diagnose

        return {
            "label": self.label,
            "source": self.source,
            "rows": self.rows,
            "metrics": {
                m: {"mean": s.mean, "ci_low": s.ci_low, "ci_high": s.ci_high, "scored": s.scored}
                for m, s in self.metrics.items()
            },
            **({"resampled": self.resampled.to_json()} if self.resampled else {}),
            "diagnosis": diagnose({m: s.mean for m, s in self.metrics.items()}),
        }


@dataclass(frozen=True)
class MetricChange:
    """One metric of one question: the baseline's and the run's score, delta = run - baseline."""

    metric: str
    baseline: float
    run: float
    higher_is_better: bool = True

    @property
    def delta(self) -> float:
        """run - baseline."""
        return self.run - self.baseline

    @property
    def gain(self) -> float:
        """The delta in the good direction: negative when the run got worse."""
        return self.delta if self.higher_is_better else -self.delta

    def to_dict(self) -> dict[str, Any]:
        """JSON values."""
        return {
            "metric": self.metric,
            "baseline": self.baseline,
            "run": self.run,
            "delta": self.delta,
        }


@dataclass(frozen=True)
class QuestionDiff:
    """One question of a run against the baseline: the metrics that got worse (largest drop
    first) and better (largest gain first), and both rows (answers, evidence, contexts)."""

    key: str
    baseline: ResultRow
    run: ResultRow
    worse: list[MetricChange]
    better: list[MetricChange]

    @property
    def drop(self) -> float:
        """The largest drop among its metrics (a positive number; 0 when none dropped)."""
        return -self.worse[0].gain if self.worse else 0.0

    @property
    def rise(self) -> float:
        """The largest gain among its metrics (0 when none rose)."""
        return self.better[0].gain if self.better else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON values: the changes and, per side, what the judge saw and said."""
        return {
            "key": self.key,
            "id": self.run.id,
            "question": self.run.question,
            "worse": [c.to_dict() for c in self.worse],
            "better": [c.to_dict() for c in self.better],
            "baseline": _side(self.baseline),
            "run": _side(self.run),
        }


def _side(row: ResultRow) -> dict[str, Any]:
    """What a per-question diff shows of one side: the answer and the judge's evidence."""
    return {
        "id": row.id,
        "answer": row.answer,
        "contexts": row.contexts,
        "scores": row.scores,
        "reasons": row.reasons,
        "errors": row.errors,
        "evidence": row.evidence,
    }


@dataclass
class RunVersusBaseline:
    """One run against the baseline: the paired statistics (p_adjusted by Holm across all
    runs and metrics of the `ManyComparison`) and the questions that moved."""

    label: str
    matched_by: str
    comparison: Comparison
    worse: list[QuestionDiff]
    better: list[QuestionDiff]

    def regressions(self) -> list[MetricComparison]:
        """Metrics on which this run is significantly worse than the baseline."""
        return self.comparison.regressions()

    def improvements(self) -> list[MetricComparison]:
        """Metrics on which this run is significantly better than the baseline."""
        return [
            m
            for m in self.comparison.metrics.values()
            if m.significant and not m.worse and m.delta != 0
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON values."""
        c = self.comparison
        return {
            "run": self.label,
            "matched_by": self.matched_by,
            "matched": len(c.keys),
            "unmatched_baseline": c.unmatched_a,
            "unmatched_run": c.unmatched_b,
            "metrics": {
                name: {k: v for k, v in dataclasses.asdict(m).items() if k != "metric"}
                for name, m in c.metrics.items()
            },
            "regressions": [m.metric for m in self.regressions()],
            "improvements": [m.metric for m in self.improvements()],
            "worse": [q.to_dict() for q in self.worse],
            "better": [q.to_dict() for q in self.better],
        }


@dataclass
class ManyComparison:
    """Runs against one baseline: `runs` (the baseline first) with their own means, and per
    other run its paired comparison and per-question changes (`versus`)."""

    baseline: str
    metrics: list[str]
    runs: list[RunSummary]
    versus: list[RunVersusBaseline]
    tests: int = 0  # (run, metric) pairs with a p-value: the m of Holm's adjustment

    @property
    def holm_note(self) -> str:
        """How the p-values were adjusted, as the outputs say it."""
        return (
            f"Holm-Bonferroni across all {self.tests} (run, metric) tests together; "
            f"significant at adjusted p < {ALPHA}"
        )

    def regressions(self) -> list[tuple[str, MetricComparison]]:
        """(run, metric) pairs significantly worse than the baseline after Holm."""
        return [(v.label, m) for v in self.versus for m in v.regressions()]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (comparison.json, `--format json`), NaN as null."""
        data = {
            "baseline": self.baseline,
            "metrics": self.metrics,
            "alpha": ALPHA,
            "adjustment": self.holm_note,
            "runs": [r.to_dict() | {"baseline": r.label == self.baseline} for r in self.runs],
            "versus_baseline": [v.to_dict() for v in self.versus],
        }
        return nan_to_null(data)  # type: ignore[no-any-return]

    def table(self, questions: int = 3) -> str:
        """The terminal view: the runs x metrics table, then each run against the baseline
        (paired statistics and its `questions` largest drops and gains)."""
        cell = 21
        names = [r.label + (" (baseline)" if r.label == self.baseline else "") for r in self.runs]
        wide = max(len(n) for n in [*names, "run"])
        head = f"{'run':<{wide}} {'rows':>5}  " + " ".join(
            f"{m[:cell]:>{cell}}" for m in self.metrics
        )
        by_conversation = [r.label for r in self.runs if r.resampled is not None]
        lines = [
            "mean [95% CI] over each run's own rows"
            + (
                "; conversations resampled for " + ", ".join(by_conversation)
                if by_conversation
                else ""
            ),
            head,
            "=" * len(head),
        ]
        for name, r in zip(names, self.runs, strict=True):
            cells = " ".join(f"{_interval(r.metrics[m]):>{cell}}" for m in self.metrics)
            lines.append(f"{name:<{wide}} {r.rows:>5}  {cells}")
        for v in self.versus:
            c = v.comparison
            used = pairs_used(len(c.keys), {m.metric: m.n for m in c.metrics.values()})
            lines += [
                "",
                f"{v.label} vs {self.baseline}: {used} (by {v.matched_by}); "
                f"unmatched {len(c.unmatched_a)} in the baseline, {len(c.unmatched_b)} in the run",
                f"  {'metric':<20} {'base':>7} {'run':>7} {'Δ':>8} {'95% CI of Δ':>18} "
                f"{'p':>7} {'p_holm':>7}  W/T/L",
            ]
            for m in c.metrics.values():
                ci = MISSING if math.isnan(m.ci_low) else f"[{m.ci_low:+.3f}, {m.ci_high:+.3f}]"
                star = " *" if m.significant else ""
                lines.append(
                    f"  {m.metric:<20} {number(m.mean_a):>7} {number(m.mean_b):>7} "
                    f"{number(m.delta, sign='+'):>8} {ci:>18} {p_text(m.p_value):>7} "
                    f"{p_text(m.p_adjusted):>7}  {m.wins}/{m.ties}/{m.losses}{star}"
                )
            if c.resampled is not None:
                lines.append(f"  CI and p {c.resampled}")
            lines.append(f"  worse on {len(v.worse)} questions, better on {len(v.better)}")
            drops = [_headline(q, q.worse) for q in v.worse[:questions]]
            gains = [_headline(q, q.better) for q in v.better[:questions]]
            for title, shown in (("largest drops", drops), ("largest gains", gains)):
                if shown:
                    lines.append(f"  {title}: " + "; ".join(shown))
        lines.append(f"\n* = {self.holm_note}.")
        return "\n".join(lines)


def _interval(s: MetricSummary) -> str:
    if math.isnan(s.mean):
        return MISSING
    return f"{s.mean:.3f} [{number(s.ci_low)}, {number(s.ci_high)}]"


def _headline(q: QuestionDiff, changes: list[MetricChange]) -> str:
    """`id: metric +0.500` of a question's first change."""
    first = changes[0]
    return f"{q.run.id if q.run.id is not None else q.key}: {first.metric} {first.delta:+.3f}"


def run_labels(sources: Sequence[Any], names: Sequence[str] | None = None) -> list[str]:
    """The label of each evaluation: `names` when given, else its folder's name (a results
    file's stem unless it is a results.jsonl), with as many parent folders as make it unique;
    an in-memory result is `run N`."""
    if names is not None:
        if len(names) != len(sources) or len(set(names)) != len(names):
            raise JudgeError(
                f"names: give {len(sources)} distinct names, one per evaluation, the "
                f"baseline's first (got {len(names)})"
            )
        return list(names)
    parts = [_path_parts(s) for s in sources]
    labels = []
    for i, own in enumerate(parts):
        if not own:
            labels.append(f"run {i}")
            continue
        k = 1
        while k < len(own) and any(p != own and p[-k:] == own[-k:] for p in parts if p):
            k += 1
        labels.append("/".join(own[-k:]))
    seen: Counter[str] = Counter()
    unique = []
    for label in labels:  # the same evaluation given twice
        seen[label] += 1
        unique.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return unique


def _path_parts(source: Any) -> tuple[str, ...]:
    """The path of an evaluation as parts, the results file's own name left out; () for an
    in-memory result."""
    if hasattr(source, "rows"):
        return ()
    path = Path(os.path.abspath(source))
    if not path.is_dir():
        path = path.parent if RunFolder.is_results_file(path) else path.with_suffix("")
    return path.parts[1:]  # not the root


def question_diffs(
    baseline: dict[str, ResultRow],
    run: dict[str, ResultRow],
    metrics: Sequence[str],
    lower: Collection[str] = (),
) -> tuple[list[QuestionDiff], list[QuestionDiff]]:
    """The shared questions that got worse (largest drop first) and better (largest gain
    first) on any metric; a question can be in both. NaN on either side is no change."""
    worse, better = [], []
    for key, base_row in baseline.items():
        run_row = run.get(key)
        if run_row is None:
            continue
        changes = []
        for m in metrics:
            a, b = base_row.scores.get(m), run_row.scores.get(m)
            if a is None or b is None or math.isnan(a) or math.isnan(b):
                continue
            rises = higher_is_better(m) and m not in lower  # lower: the runs' own (config)
            changes.append(MetricChange(m, float(a), float(b), rises))
        down = sorted((c for c in changes if c.gain < -EPSILON), key=lambda c: c.gain)
        up = sorted((c for c in changes if c.gain > EPSILON), key=lambda c: -c.gain)
        if down or up:
            diff = QuestionDiff(key, base_row, run_row, down, up)
            if down:
                worse.append(diff)
            if up:
                better.append(diff)
    worse.sort(key=lambda q: -q.drop)  # stable: ties stay in the baseline's order
    better.sort(key=lambda q: -q.rise)
    return worse, better


def _shared_metrics(row_sets: Sequence[list[ResultRow]]) -> list[str]:
    """The metrics every evaluation scored, in the baseline's order."""
    per_run = [dict.fromkeys(m for r in rows if not r.error for m in r.scores) for rows in row_sets]
    return [m for m in per_run[0] if all(m in other for other in per_run[1:])]


def compare_many(
    baseline: Any,
    runs: Sequence[Any],
    *,
    metrics: Sequence[str] | None = None,
    names: Sequence[str] | None = None,
) -> ManyComparison:
    """Compare one or more evaluations against a baseline.

    Args:
        baseline: the evaluation the others are compared with: an EvaluationResult, a
            results.jsonl, or a `judge eval` output folder.
        runs: the other evaluations, in the same forms.
        metrics: metric names to compare; default every metric all evaluations have.
        names: a label per evaluation, the baseline's first; default each folder's name.

    Returns:
        A `ManyComparison`: `table()` for the terminal, `to_dict()` for JSON; p-values are
        adjusted by Holm across every (run, metric) pair together.
    """
    if not runs:
        raise JudgeError("compare_many needs at least one run besides the baseline")
    sources = [baseline, *runs]
    labels = run_labels(sources, names)
    loaded = [load_results(s) for s in sources]
    row_sets = [rows for rows, _ in loaded]
    lower = {m for source in sources for m in lower_is_better(source)}
    chosen = list(metrics) if metrics else _shared_metrics(row_sets)
    if not chosen:
        raise InputFormatError(
            "the evaluations share no metric: evaluate them with the same metrics, or name "
            "metrics they all have"
        )
    summaries = []
    for label, (rows, source) in zip(labels, loaded, strict=True):
        tally = RowTally(chosen)
        for row in rows:
            tally.add(row)
        resampling = tally.resampling()
        summaries.append(
            RunSummary(
                label,
                source,
                len(rows),
                tally.summaries(chosen),
                resampling if resampling.unit == "conversation" else None,
            )
        )
    versus = []
    base_rows = row_sets[0]
    for label, rows in zip(labels[1:], row_sets[1:], strict=True):
        key = match_key(base_rows, rows, labels[0], label)
        comparison = compare_scores(
            keyed_scores(base_rows, key),
            keyed_scores(rows, key),
            chosen,
            label_a=labels[0],
            label_b=label,
            lower_is_better=lower,
            conversations=paired_conversations(base_rows, rows, key),
        )
        worse, better = question_diffs(_by_key(base_rows, key), _by_key(rows, key), chosen, lower)
        versus.append(RunVersusBaseline(label, key, comparison, worse, better))
    tests = _adjust_across_runs(versus)
    return ManyComparison(labels[0], chosen, summaries, versus, tests)


def _by_key(rows: list[ResultRow], key: str) -> dict[str, ResultRow]:
    """The judged rows by the matching key, as `keyed_scores` keys their scores."""
    return {str(getattr(r, key)): r for r in rows if not r.error}


def _adjust_across_runs(versus: list[RunVersusBaseline]) -> int:
    """Replace each comparison's per-run Holm adjustment by one across every (run, metric)
    pair: comparing many runs is that many more chances of a false alarm. Returns the
    number of tests adjusted for."""
    raw = [m.p_value for v in versus for m in v.comparison.metrics.values()]
    adjusted = iter(holm(raw))
    for v in versus:
        v.comparison.metrics = {
            name: dataclasses.replace(m, p_adjusted=next(adjusted))
            for name, m in v.comparison.metrics.items()
        }
    return sum(not math.isnan(p) for p in raw)
