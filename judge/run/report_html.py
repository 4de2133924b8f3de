"""`report.html`: one self-contained page (no script, no network) explaining a run."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from judge.formatting import MISSING, escape, number, page, write_page
from judge.run.rows import ResultRow

if TYPE_CHECKING:
    from judge.run.results import EvaluationResult


def histogram_svg(values: list[float], title: str, bins: int = 10) -> str:
    """An inline SVG histogram of values in [0, 1] (values outside are clipped)."""
    width, height, pad = 260, 120, 18
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int(v * bins)))] += 1
    top = max(counts) or 1
    bar = (width - 2 * pad) / bins
    rects = []
    for i, c in enumerate(counts):
        h = (height - 2 * pad) * c / top
        rects.append(
            f'<rect x="{pad + i * bar:.1f}" y="{height - pad - h:.1f}" width="{bar - 2:.1f}" '
            f'height="{h:.1f}" fill="#3f6fb5"><title>{i / bins:.1f}-{(i + 1) / bins:.1f}: '
            f"{c}</title></rect>"
        )
    return (
        f'<svg class="plot" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)} distribution"><text x="{pad}" y="12" font-size="12">'
        f"{escape(title)} (n={len(values)})</text>{''.join(rects)}"
        f'<text x="{pad}" y="{height - 4}" font-size="10">0</text>'
        f'<text x="{width - pad - 6}" y="{height - 4}" font-size="10">1</text></svg>'
    )


def _summary_table(result: EvaluationResult) -> str:
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
    )


def evidence_html(row: ResultRow) -> str:
    """The judgments behind a row's scores as HTML: claims and verdicts, grades, replies."""
    ev = row.evidence
    parts = []
    for key, title in (("answer", "answer claims"), ("truth", "ground-truth claims")):
        claims, verdicts = ev.get(f"{key}_claims"), ev.get(f"{key}_verdicts")
        if claims and verdicts:
            items = "".join(
                f"<tr><td>{escape(c)}</td>"
                f"<td class={'ok' if v['verdict'] == 'supported' else 'bad'}>"
                f"{escape(v['verdict'])}</td><td>{escape(v['reason'])}</td>"
                f"<td>{escape(v['context'])}</td></tr>"
                for c, v in zip(claims, verdicts, strict=False)
            )
            parts.append(
                f"<b>{title}</b><table><tr><th>claim</th><th>verdict</th><th>reason</th>"
                f"<th>context</th></tr>{items}</table>"
            )
    if ev.get("context_grades"):
        items = "".join(
            f"<tr><td class=n>{g['context']}</td><td class=n>{g['grade']}</td>"
            f"<td>{escape(g['reason'])}</td></tr>"
            for g in ev["context_grades"]
        )
        parts.append(
            "<b>context grades</b><table><tr><th>#</th><th>grade</th><th>reason</th></tr>"
            f"{items}</table>"
        )
    rq = ev.get("reverse_questions")
    if rq:
        sims = ", ".join(number(s) for s in rq.get("similarities", []))
        parts.append(
            f"<b>reverse questions</b> (noncommittal: {escape(rq['noncommittal'])}): "
            f"{escape(' | '.join(rq['questions']))} — similarities {sims}"
        )
    known = {
        "answer_claims",
        "truth_claims",
        "answer_verdicts",
        "truth_verdicts",
        "context_grades",
        "reverse_questions",
    }
    for key, value in ev.items():  # custom metrics' replies, correctness, citations
        if key not in known:
            parts.append(f"<b>{escape(key)}</b> {escape(json.dumps(value, ensure_ascii=False))}")
    if row.errors:
        parts.append("<b>errors</b> " + escape(json.dumps(row.errors, ensure_ascii=False)))
    return "<br>".join(parts) or "<span class=small>no judgments (see reasons)</span>"


def _worst(result: EvaluationResult, limit: int = 10) -> str:
    blocks = []
    for row in result.worst(limit):  # errored rows first, then the lowest scores
        scores = ", ".join(f"{escape(m)} {number(row.scores.get(m))}" for m in result.metrics)
        reasons = "".join(
            f" <span class=bad>{escape(m)}: {escape(row.reasons[m])}</span>"
            for m in result.metrics
            if m in row.reasons
        )
        blocks.append(
            f"<details><summary>row {row.row} · {escape((row.question or '')[:120])} — "
            f"{scores}{reasons}</summary><p><b>answer</b> {escape(row.answer)}</p>"
            f"{'<p class=bad>' + escape(row.error) + '</p>' if row.error else ''}"
            f"{evidence_html(row)}</details>"
        )
    return "".join(blocks)


def _diagnosis(result: EvaluationResult) -> str:
    from judge.run.diagnose import diagnose

    findings = diagnose({m: s.mean for m, s in result.summary.items()})
    return "".join(f"<li>{escape(f)}</li>" for f in findings) or "<li>nothing stands out</li>"


def render_report(result: EvaluationResult) -> str:
    """The HTML text of the report."""
    plots = "".join(histogram_svg(result.scores(m), m) for m in result.metrics)
    usage = result.usage or {}
    cost = usage.get("cost")
    config = json.dumps(result.config.as_json(), indent=2, ensure_ascii=False)
    return page(
        "judge report",
        f"<h1>judge report</h1><p class=small>{len(result.rows)} rows from "
        f"{escape(result.config.source)}; {result.rows_with_errors} with errors.</p>"
        f"<h2>Summary</h2>{_summary_table(result)}"
        f"<h2>Diagnosis</h2><ul>{_diagnosis(result)}</ul>"
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


def write_report(result: EvaluationResult, path: str | os.PathLike[str]) -> None:
    """Write report.html for an EvaluationResult."""
    write_page(render_report(result), path)
