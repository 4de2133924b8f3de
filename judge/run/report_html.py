"""`report.html`: one self-contained page (no script, no network) explaining a run."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

import numpy as np

from judge.formatting import MISSING, escape, number, page, write_page
from judge.metrics.evidence import CONTEXT_GRADES, CONTEXT_GRADES_CAPPED, Evidence
from judge.metrics.findings import (
    ABOUT_ANSWER,
    ABOUT_CONTEXTS,
    ABOUT_FIELDS,
    ABOUT_TRUTH,
    Finding,
)
from judge.metrics.registry import JUDGE_ERROR, findings_of
from judge.metrics.turns import HISTORY_NAME
from judge.run.result_view import ResultView
from judge.run.rows import ResultRow, histogram_counts


def histogram_svg(
    values: Sequence[float] | np.ndarray, title: str, bins: int = 10, left_out: int = 0
) -> str:
    """An inline SVG histogram of values in [0, 1] (values outside are clipped; the last bin
    holds 1.0): a count over every bar that has rows, the bin edges on the x axis, "rows" up
    the y axis, and in the title how many values it shows and how many NaN were left out."""
    counts = histogram_counts(np.asarray(values, dtype=np.float64), bins)
    return counts_svg([int(c) for c in counts], title, left_out=left_out)


def counts_svg(counts: Sequence[int], title: str, left_out: int = 0) -> str:
    """`histogram_svg` of values already counted in equal bins of [0, 1] (`histogram_counts`)."""
    width, height = 300, 170
    left, right, top, bottom = 34, 10, 30, 40  # the plot area's margins
    bins = len(counts)
    most = max(counts) or 1
    bar = (width - left - right) / bins
    floor = height - bottom
    tall = floor - top
    shapes = []
    for i, c in enumerate(counts):
        h = tall * c / most
        x = left + i * bar
        shapes.append(
            f'<rect x="{x + 1:.1f}" y="{floor - h:.1f}" width="{bar - 2:.1f}" '
            f'height="{h:.1f}" fill="#3f6fb5"><title>{i / bins:g}-{(i + 1) / bins:g}: '
            f"{c} rows</title></rect>"
        )
        if c:
            shapes.append(
                f'<text x="{x + bar / 2:.1f}" y="{floor - h - 3:.1f}" font-size="10" '
                f'text-anchor="middle">{c}</text>'
            )
    ticks = "".join(
        f'<text x="{left + i * bar:.1f}" y="{floor + 12}" font-size="9" '
        f'text-anchor="middle">{i / bins:g}</text>'
        for i in range(bins + 1)
    )
    shown = f"n={sum(counts)}" + (f"; {left_out} NaN left out" if left_out else "")
    return (
        f'<svg class="plot" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)} distribution"><text x="{left}" y="14" font-size="12">'
        f"{escape(title)} ({shown})</text>{''.join(shapes)}"
        f'<line x1="{left}" x2="{width - right}" y1="{floor}" y2="{floor}" stroke="#444"/>'
        f'<line x1="{left}" x2="{left}" y1="{top}" y2="{floor}" stroke="#444"/>'
        f'<text x="{left - 4}" y="{top + 4}" font-size="9" text-anchor="end">{most}</text>'
        f'<text x="{left - 4}" y="{floor}" font-size="9" text-anchor="end">0</text>'
        f'<text x="12" y="{(top + floor) / 2:.1f}" font-size="10" text-anchor="middle" '
        f'transform="rotate(-90 12 {(top + floor) / 2:.1f})">rows</text>{ticks}'
        f'<text x="{(left + width - right) / 2:.1f}" y="{height - 8}" font-size="10" '
        f'text-anchor="middle">score (bins of {1 / bins:g}; the last holds 1)</text></svg>'
    )


def _summary_table(result: ResultView) -> str:
    rows = []
    for s in result.summary.values():
        nan = ", ".join(f"{escape(k)}: {v}" for k, v in s.nan.items()) or MISSING
        rows.append(
            f"<tr><td><code>{escape(s.metric)}</code></td><td class=n>{number(s.mean)}</td>"
            f"<td class=n>[{number(s.ci_low)}, {number(s.ci_high)}]</td><td class=n>{s.scored}</td>"
            f"<td>{nan}</td><td class=n>{s.errored}</td></tr>"
        )
    return (
        "<table><tr><th>metric</th><th>mean</th><th>95% bootstrap CI</th><th>scored</th>"
        "<th>NaN (reason: rows)</th><th>errors</th></tr>" + "".join(rows) + "</table>"
    ) + _turns_html(result)


def _turns_html(result: ResultView) -> str:
    """For a run of conversations' turns: how the intervals resampled, and each metric's
    mean by turn position; '' for other runs (their report is as it was)."""
    resampling = result.tally.resampling()
    positions = result.tally.by_turn(result.metrics)
    if resampling.unit != "conversation" or not positions:
        return ""
    head = "".join(f"<th>turn {p.position}</th>" for p in positions)
    counts = "".join(f"<td class=n>{p.turns}</td>" for p in positions)
    rows = "".join(
        f"<tr><td><code>{escape(m)}</code></td>"
        + "".join(f"<td class=n>{number(p.means[m])}</td>" for p in positions)
        + "</tr>"
        for m in result.metrics
    )
    return (
        f"<p class=small>95% CI {escape(str(resampling))}: the turns of one conversation are "
        "not independent.</p><h3>Mean by turn position</h3><p class=small>Position k holds "
        "each conversation's k-th judged turn (its turns in order of <code>turn</code>).</p>"
        f"<table><tr><th>metric</th>{head}</tr><tr><td>turns</td>{counts}</tr>{rows}</table>"
    )


# What the grades 0-3 of the context_relevance prompt mean.
GRADE_MEANING = {
    3: "gives the answer",
    2: "gives part of the answer",
    1: "same subject, none of the answer",
    0: "about something else",
}

# How the report picks and orders its worst samples (RowTally.worst).
WORST_ORDER = (
    "Up to 10 rows: those that failed (bad input, or a judge failed) first, then those "
    "with the lowest mean of their defined scores over every metric; ties in row order. "
    "Rows whose every score is 1.000 are left out, as are rows that have no score and did "
    "not fail (their reasons are counted in the summary)."
)

# The evidence `contexts_html` shows beside the contexts.
_BESIDE_CONTEXTS = frozenset({CONTEXT_GRADES, CONTEXT_GRADES_CAPPED})


def row_findings(row: ResultRow, metrics: list[str] | None = None) -> list[Finding]:
    """The findings of every metric of the run (else every metric the row was scored on,
    by name), each once (metrics reading the same judgments give the same finding)."""
    found: list[Finding] = []
    for metric in sorted(row.scores) if metrics is None else metrics:
        for finding in findings_of(metric, row.evidence, row.contexts or ()):
            if finding not in found:
                found.append(finding)
    return found


def _verdict_css(ok: bool | None) -> str:
    return "" if ok is None else (" class=ok" if ok else " class=bad")


def finding_html(finding: Finding) -> str:
    """One finding: its title, and its items in a table (its summary when it has none)."""
    title = f"<b>{escape(finding.title)}</b>"
    if not finding.items:
        return f"{title} {escape(finding.summary)}"
    texts = any(i.text for i in finding.items)
    reasons = any(i.reason for i in finding.items)
    sources = any(i.source for i in finding.items)
    # A conversation's turn: a claim can rest on a message of the conversation too.
    beyond = any(i.source.startswith(HISTORY_NAME) for i in finding.items)
    head = (
        "<tr><th>#</th>"
        + ("<th>text</th>" if texts else "")
        + "<th>verdict</th>"
        + ("<th>reason</th>" if reasons else "")
        + (f"<th>{'source' if beyond else 'context'}</th>" if sources else "")
        + "</tr>"
    )
    rows = "".join(
        f"<tr><td>{escape(i.name)}</td>"
        + (f"<td>{escape(i.text)}</td>" if texts else "")
        + f"<td{_verdict_css(i.ok)}>{escape(i.verdict)}</td>"
        + (f"<td>{escape(i.reason)}</td>" if reasons else "")
        + (f"<td>{escape(i.source) if i.source else MISSING}</td>" if sources else "")
        + "</tr>"
        for i in finding.items
    )
    return f"{title}<table>{head}{rows}</table>"


def _other_html(row: ResultRow, shown: set[str]) -> list[str]:
    """The evidence not in `shown` (what no finding shows: claims dropped as not drawn from
    their text, say) as JSON, and the row's judge errors."""
    parts = [
        f"<b>{escape(key)}</b> {escape(json.dumps(value, ensure_ascii=False))}"
        for key, value in row.evidence.items()
        if key not in shown
    ]
    if row.errors:
        parts.append("<b>errors</b> " + escape(json.dumps(row.errors, ensure_ascii=False)))
    return parts


def _shown(findings: list[Finding]) -> set[str]:
    """The evidence keys the findings (and the contexts' grades) show."""
    return set(_BESIDE_CONTEXTS).union(*(f.keys for f in findings))


def evidence_html(row: ResultRow, *, grades: bool = True, metrics: list[str] | None = None) -> str:
    """The judgments behind a row's scores as HTML: the findings of `metrics` (default: those
    the row was scored on; the contexts' grades unless shown beside the contexts,
    `contexts_html`), and the other evidence."""
    findings = row_findings(row, metrics)
    parts = [finding_html(f) for f in findings if grades or not f.keys <= _BESIDE_CONTEXTS]
    parts += _other_html(row, _shown(findings))
    return (
        "<br>".join(p for p in parts if p) or "<span class=small>no judgments (see reasons)</span>"
    )


def _mean(row: ResultRow, metrics: list[str]) -> float:
    """The mean of the row's defined scores, as RowTally.worst orders by it."""
    defined = [v for m in metrics if not math.isnan(v := float(row.scores.get(m, math.nan)))]
    return sum(defined) / len(defined) if defined else math.nan


def _scores_html(row: ResultRow, metrics: list[str]) -> str:
    """A table of the row's scores, each NaN with its reason and any judge error."""
    cells = []
    for m in metrics:
        value = float(row.scores.get(m, math.nan))
        if math.isnan(value):
            why = row.reasons.get(m, "row_error" if row.error else "missing")
            error = f"<br>{escape(row.errors[m])}" if m in row.errors else ""
            css = "bad" if why in (JUDGE_ERROR, "row_error") else "small"
            cells.append(f"<td class={css}>{MISSING} {escape(why)}{error}</td>")
        else:
            css = " bad" if value < 0.5 else ""
            cells.append(f"<td class='n{css}'>{number(value)}</td>")
    head = "".join(f"<th>{escape(m)}</th>" for m in metrics)
    return f"<table><tr>{head}</tr><tr>{''.join(cells)}</tr></table>"


def contexts_html(row: ResultRow) -> str:
    """The retrieved contexts in retrieval order, each beside the judge's grade 0-3 and its
    reason (when a metric of the run graded them)."""
    if not row.contexts:
        return "<p><b>retrieved contexts</b> none</p>"
    evidence = Evidence(row.evidence)
    grades = {g.context: g for g in evidence.context_grades()}
    capped = evidence.capped_contexts()
    items = []
    for i, text in enumerate(row.contexts):
        g = grades.get(i)
        if g is None:
            grade = f"<td>{MISSING}</td><td></td>"  # not graded by any metric of the run
        else:
            grade_value = g.raw.get("grade")
            meaning = GRADE_MEANING.get(g.grade, "") if g.grade is not None else ""
            cap = " (capped at 1: it shares no content with the question or answer)"
            note = escape(g.reason) + (cap if i in capped else "")
            css = "ok" if g.relevant else "small"
            grade = (
                f"<td class={css}>{escape(grade_value)}"
                f"{' – ' + meaning if meaning else ''}</td><td>{note}</td>"
            )
        items.append(f"<tr><td class=n>{i + 1}</td><td>{escape(text)}</td>{grade}</tr>")
    return (
        "<b>retrieved contexts</b> <span class=small>(in retrieval order; the judge's grade: "
        "3 gives the answer, 2 part of it, 1 same subject, 0 unrelated)</span><table><tr>"
        "<th>#</th><th>context</th><th>grade</th><th>the judge's reason</th></tr>"
        f"{''.join(items)}</table>"
    )


# The turns of a conversation a worst sample's block lists at most.
CONVERSATION_TURNS = 50


def _anchor(row: ResultRow) -> str:
    """The id of a turn's block in the page (other rows' blocks have none)."""
    return f"row-{row.row}"


def _conversation_html(
    row: ResultRow, turns: Sequence[ResultRow], metrics: list[str], shown: set[int]
) -> str:
    """The turns of a worst sample's conversation in order, with their scores: this one
    marked, each other turn among the worst samples linked to its block."""
    cells = "".join(f"<th>{escape(m)}</th>" for m in metrics)
    lines = []
    for turn in turns[:CONVERSATION_TURNS]:
        label = f"turn {escape(turn.turn)}"
        if turn.row == row.row:
            label = f"<b>{label} (this one)</b>"
        elif turn.row in shown:
            label = f'<a href="#{_anchor(turn)}">{label}</a>'
        scores = "".join(
            f"<td class=n>{number(float(turn.scores.get(m, math.nan)))}</td>" for m in metrics
        )
        question = escape(_clip(turn.question))
        lines.append(
            f"<tr><td>{label}</td><td>{question}</td><td>{escape(_clip(turn.answer))}</td>"
            f"{scores}</tr>"
        )
    more = len(turns) - CONVERSATION_TURNS
    note = f"<p class=small>and {more} more turns</p>" if more > 0 else ""
    return (
        f"<b>the conversation</b> <span class=small>(its judged turns in order; the linked "
        "ones are among the worst samples below or above)</span><table><tr><th>turn</th>"
        f"<th>question</th><th>answer</th>{cells}</tr>{''.join(lines)}</table>{note}"
    )


def _clip(text: str | None, limit: int = 200) -> str:
    if text is None:
        return MISSING
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sample_html(
    row: ResultRow, metrics: list[str], conversation: str = "", anchor: str = ""
) -> str:
    """One worst sample in full: scores, question, contexts with grades, ground truth with
    its claims, answer with its claims, the other judgments and errors; for a turn of a
    conversation, its conversation and turn, its block's `anchor`, and the `conversation`'s
    turns (`_conversation_html`)."""
    mean = _mean(row, metrics)
    headline = "failed" if row.failed else f"mean {number(mean)}"
    ident = f" · id {escape(row.id)}" if row.id is not None and row.id != row.row else ""
    if row.conversation_id is not None:
        ident += f" · conversation {escape(row.conversation_id)} · turn {escape(row.turn)}"
    truth = MISSING if row.ground_truth is None else escape(row.ground_truth)
    findings = [f for f in row_findings(row, metrics) if not f.keys <= _BESIDE_CONTEXTS]

    def about(field: str | None) -> list[str]:
        return [finding_html(f) for f in findings if f.about == field]

    parts = [
        _scores_html(row, metrics),
        f"<p class=bad>{escape(row.error)}</p>" if row.error else "",
        conversation,
        f"<p><b>question</b> {escape(row.question) if row.question is not None else MISSING}</p>",
        contexts_html(row),
        *about(ABOUT_CONTEXTS),
        f"<p><b>ground truth</b> {truth}</p>",
        *about(ABOUT_TRUTH),
        f"<p><b>answer</b> {escape(row.answer) if row.answer is not None else MISSING}</p>",
        *about(ABOUT_ANSWER),
        *[finding_html(f) for f in findings if f.about not in ABOUT_FIELDS],
        *_other_html(row, _shown(row_findings(row, metrics))),
    ]
    where = f' id="{anchor}"' if anchor else ""
    return (
        f"<details open class=sample{where}><summary><b>row {row.row}</b>{ident} · {headline} · "
        f"{escape((row.question or '')[:120])}</summary>"
        + "".join(f"<div>{p}</div>" if p.startswith("<b>") else p for p in parts if p)
        + "</details>"
    )


def _worst(result: ResultView, limit: int = 10) -> str:
    numbers = result.tally.worst(limit)
    worst = [result.rows[i] for i in numbers]
    shown = {row.row for row in worst}
    blocks = []
    for at, row in zip(numbers, worst, strict=True):
        if row.conversation_id is None:
            blocks.append(_sample_html(row, result.metrics))
            continue
        turns = [result.rows[i] for i in result.tally.conversation_rows(at)]
        table = _conversation_html(row, turns, result.metrics, shown)
        blocks.append(_sample_html(row, result.metrics, table, _anchor(row)))
    if not blocks:
        blocks = ["<p>No row scored below 1 and none failed.</p>"]
    return f"<p class=small>{escape(WORST_ORDER)}</p>" + "".join(blocks)


def _diagnosis(result: ResultView) -> str:
    from judge.run.diagnose import diagnose

    findings = diagnose({m: s.mean for m, s in result.summary.items()})
    return "".join(f"<li>{escape(f)}</li>" for f in findings) or "<li>nothing stands out</li>"


def render_report(result: ResultView, lines: Sequence[str] = ()) -> str:
    """The HTML text of the report; `lines` (a metric corrected by labels) are said under
    the summary table."""
    rows = len(result.rows)
    plots = "".join(
        # counted from the tally a chunk at a time, not from a copy of every defined score
        counts_svg(
            [int(c) for c in result.tally.histogram(m)], m, left_out=rows - result.summary[m].scored
        )
        for m in result.metrics
    )
    usage = result.usage or {}
    cost = usage.get("cost")
    config = json.dumps(result.config.as_json(), indent=2, ensure_ascii=False)
    return page(
        "judge report",
        f"<h1>judge report</h1><p class=small>{len(result.rows)} rows from "
        f"{escape(result.config.source)}; {result.rows_with_errors} with errors.</p>"
        f"<h2>Summary</h2>{_summary_table(result)}"
        + "".join(f"<p class=corrected>{escape(line)}</p>" for line in lines)
        + f"<h2>Diagnosis</h2><ul>{_diagnosis(result)}</ul>"
        f"<h2>Distributions</h2><div class=plots>{plots}</div>"
        f"<h2>Worst samples</h2>{_worst(result)}"
        "<h2>Usage and cost</h2><table>"
        + "".join(
            f"<tr><th>{escape(k)}</th><td class=n>{escape(v)}</td></tr>"
            for k, v in usage.items()
            if k != "cost"
        )
        + f"<tr><th>cost (USD)</th><td class=n>{'unknown' if cost is None else f'{cost:.4f}'}"
        f"</td></tr></table><h2>Configuration</h2><pre>{escape(config)}</pre>",
    )


def write_report(
    result: ResultView, path: str | os.PathLike[str], lines: Sequence[str] = ()
) -> None:
    """Write report.html for an EvaluationResult (`lines`: see `render_report`)."""
    write_page(render_report(result, lines), path)
