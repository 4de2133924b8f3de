"""What a dry run found, per metric and in all: `MetricCheck`, `DryRun`, their table and
JSON, and what to say of metrics that would score no row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.formatting import counted
from judge.metrics.custom import MISSING_FIELD
from judge.metrics.registry import EMPTY_ANSWER, NO_CONTEXTS, NO_GROUND_TRUTH
from judge.metrics.tools import NO_EXPECTED_TOOLS
from judge.run.data import COLUMNS
from judge.run.estimate import ASSUMPTIONS, Estimate
from judge.run.local import NO_RELEVANCE_JUDGMENTS, ROW_ERROR
from judge.run.progress import cost_text

# Reasons a dry run gives for a metric that would not score a row, besides the scorers'.
OVER_CONTEXT_WINDOW = "over_context_window"


NO_RETRIEVED_IDS = "no_retrieved_ids"  # a ranking without ids: scored 0, not NaN


# NaN reasons that say a row lacks a field, and the field (a custom prompt's column: "").
WANTED_FIELDS = {
    EMPTY_ANSWER: "answer",
    NO_CONTEXTS: "contexts",
    NO_GROUND_TRUTH: "ground_truth",
    NO_RELEVANCE_JUDGMENTS: "relevance",
    NO_EXPECTED_TOOLS: "expected_tools",
    MISSING_FIELD: "",
}


@dataclass
class MetricCheck:
    """What one metric would do with the data.

    Attributes:
        name: the metric's name.
        kind: "judged" (LLM-judged) or "retrieval".
        scored: rows it would score.
        not_scored: NaN reason -> rows it would leave NaN (`no_ground_truth`,
            `no_contexts`, `empty_answer`, `row_error`, `no_relevance_judgments`,
            `over_context_window`, ...).
        warnings: reason -> rows scored in a way worth knowing (`no_retrieved_ids`: a
            retrieval metric scores such a row 0).
        cannot_run: why the metric cannot run at all (a message), or None.
        estimate: its requests and tokens if it ran alone (a run shares judgments
            between metrics: see `DryRun.total`).
    """

    name: str
    kind: str
    scored: int = 0
    not_scored: dict[str, int] = field(default_factory=dict)
    warnings: dict[str, int] = field(default_factory=dict)
    cannot_run: str | None = None
    estimate: Estimate = field(default_factory=Estimate)

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON values."""
        return {
            "name": self.name,
            "kind": self.kind,
            "scored": self.scored,
            "not_scored": dict(self.not_scored),
            "warnings": dict(self.warnings),
            "cannot_run": self.cannot_run,
            "estimate": self.estimate.to_dict() if self.kind == "judged" else None,
        }


@dataclass
class DryRun:
    """What a run over the data would do, found with no request made (`dry_run`).

    Attributes:
        source: where the rows came from.
        rows: the input rows (of the shard, when one is given).
        unreadable: (row number, error) of the rows that cannot be read.
        model: the judge model's name, or None when none was given.
        embedding_model: the embedding model's name, or None.
        context_window: the judge's context window in tokens, or None when unknown.
        metrics: one `MetricCheck` per metric, judged ones first.
        total: the run's requests and tokens, each shared judgment counted once, as a
            run makes it (metrics that cannot run left out).
        rows_over_window: rows with at least one request over the context window.
        notes: what else a run would say (default metrics left out, no judge model).
        problems: why the data is not usable for this run; empty when it is.
        max_error_rate: the share of unreadable rows (and of rows with a refused
            request) allowed, as for a run.
    """

    source: str
    rows: int
    unreadable: list[tuple[int, str]]
    model: str | None
    embedding_model: str | None
    context_window: int | None
    metrics: list[MetricCheck]
    total: Estimate
    rows_over_window: int = 0
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    max_error_rate: float = 0.05

    @property
    def usable(self) -> bool:
        """Whether a run over this data would work: every metric can run and score at
        least one row, and unreadable rows (and rows over the context window) are within
        `max_error_rate`."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The dry run as JSON values."""
        return {
            "dry_run": True,
            "source": self.source,
            "rows": self.rows,
            "unreadable": [{"row": n, "error": e} for n, e in self.unreadable],
            "model": self.model,
            "embedding_model": self.embedding_model,
            "context_window": self.context_window,
            "metrics": [m.to_dict() for m in self.metrics],
            "total": self.total.to_dict(),
            "rows_over_window": self.rows_over_window,
            "usable": self.usable,
            "problems": list(self.problems),
            "notes": list(self.notes),
            "assumptions": ASSUMPTIONS,
        }

    def table(self) -> str:
        """The dry run as a text table, with its notes and problems below."""
        lines = [
            f"dry run of {self.source}: {counted(self.rows, 'row')}, "
            f"{len(self.unreadable)} unreadable; "
            "no request was made",
            f"judge model: {self.model or 'none given'}"
            + (f" (context window {self.context_window:,} tokens)" if self.context_window else "")
            + f"; embedding model: {self.embedding_model or 'none given'}",
            "",
        ]
        head = ("metric", "rows", "chat", "embed", "prompt tok", "compl. tok", "cost", "not scored")
        body = [
            (
                m.name,
                f"{m.scored}/{self.rows}",
                *_figures(m.estimate, m.kind == "judged", self.model),
                _reasons(m) if m.cannot_run is None else f"CANNOT RUN: {m.cannot_run}",
            )
            for m in self.metrics
        ]
        body.append(("total", "", *_figures(self.total, True, self.model), "shared judgments once"))
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head) - 1)]
        for row in [head, *body]:
            cells = [
                row[i].ljust(widths[i]) if i < 2 else row[i].rjust(widths[i])
                for i in range(len(widths))
            ]
            lines.append("  ".join([*cells, row[-1]]).rstrip())
        lines.append("")
        for number, error in self.unreadable[:5]:
            lines.append(f"row {number} cannot be read: {error}")
        if len(self.unreadable) > 5:
            lines.append(f"... and {counted(len(self.unreadable) - 5, 'more unreadable row')}")
        if self.total.refused:
            lines.append(
                f"{counted(self.total.refused, 'request')} in "
                f"{counted(self.rows_over_window, 'row')} "
                "over the context window: a run would not send them (their metrics: judge errors)"
            )
        lines.extend(f"note: {n}" for n in self.notes)
        lines.append("estimate:")
        lines.extend(f"  - {a}" for a in ASSUMPTIONS)
        if self.problems:
            lines.extend(f"NOT USABLE: {p}" for p in self.problems)
        else:
            lines.append("usable: a run over this data would work")
        return "\n".join(lines)


def _figures(e: Estimate, judged: bool, model: str | None) -> tuple[str, ...]:
    if not judged:
        return ("-", "-", "-", "-", "-")
    if e.cost is not None:
        cost = cost_text(e.cost) or "$0"  # "" only when nothing is sent: a true 0
    elif not e.chat_requests and not e.embedding_requests:
        cost = "$0"  # nothing is sent: a true 0
    else:
        cost = "price unknown" if model else "no model"
    return (
        f"{e.chat_requests:,}",
        f"{e.embedding_requests:,}",
        f"{e.prompt_tokens:,}",
        f"{e.completion_tokens:,}",
        cost,
    )


def _reasons(m: MetricCheck) -> str:
    listed = [f"{count} {reason}" for reason, count in sorted(m.not_scored.items())]
    listed += [f"{count} {reason} (scored 0)" for reason, count in sorted(m.warnings.items())]
    return ", ".join(listed)


def wanted_fields(check: MetricCheck) -> list[str] | None:
    """The fields for want of which a metric scores no row (a custom prompt's column as
    ""), or None: it scores a row, cannot run, or scores none for other reasons (only
    unreadable rows, requests over the context window)."""
    reasons = set(check.not_scored) - {ROW_ERROR}
    if check.cannot_run is not None or check.scored or not reasons:
        return None
    if reasons - WANTED_FIELDS.keys():
        return None
    return [f for r, f in WANTED_FIELDS.items() if r in reasons]


def no_row_scored(
    checks: Sequence[MetricCheck],
    columns: Mapping[str, str],
    present: Sequence[str],
    others: Sequence[str] = (),
) -> list[str]:
    """What to say of metrics that would score no row, one line per lot that lacks the
    same: their reasons, and for want of fields the columns found and the mapping to make.

    Args:
        checks: the metrics that score no row.
        columns: field -> column, as the data's columns were resolved.
        present: the data's column names.
        others: the run's other metrics (the way to leave these out).
    """
    lots: dict[tuple[str, str], list[str]] = {}
    for check in checks:
        why = ", ".join(f"{c} {r}" for r, c in sorted(check.not_scored.items()))
        fields = wanted_fields(check)
        lack = "; ".join(_lacking(f, columns, present) for f in fields or [])
        lots.setdefault((why, lack), []).append(check.name)
    lines = []
    for (why, lack), names in lots.items():
        line = f"{_listed(names)} would score no row ({why})"
        if lack:
            them = "them" if len(names) > 1 else "it"
            out = f", or leave {them} out (metrics={','.join(others)!r})" if others else ""
            line += f": {lack}{out}"
        lines.append(line)
    return lines


def _lacking(field: str, columns: Mapping[str, str], present: Sequence[str]) -> str:
    """Why rows lack a field: no column for it (and the mapping to make), or its column
    empty."""
    if not field:
        return "a column the metric's prompt reads is empty"
    if field == "expected_tools":  # read from the row's own columns, not mapped
        if field in present:
            return "expected_tools (column 'expected_tools') is empty"
        return (
            f"no expected_tools column (columns: {', '.join(present) or 'none'}): give each row "
            "its expected_tools, [{name, arguments}], beside its tools_called"
        )
    if field in columns:
        return f"{field} (column {columns[field]!r}) is empty"
    return COLUMNS.no_column(field, present)


def _listed(names: Sequence[str]) -> str:
    """a, b and c."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
