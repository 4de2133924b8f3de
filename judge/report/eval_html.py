"""`report.html`: one self-contained page (no script, no network) explaining a run."""

from __future__ import annotations

import html
import json
import math
import os
from typing import Any

_CSS = """
body{font:14px/1.45 system-ui,"Noto Sans CJK SC","PingFang SC","Microsoft YaHei",sans-serif;
margin:24px auto;max-width:1100px;color:#1b1b1b}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}td.n{text-align:right;
font-variant-numeric:tabular-nums}.plots{display:flex;flex-wrap:wrap;gap:16px}
.plot{border:1px solid #eee;padding:6px}.bad{color:#b00020}.ok{color:#1b5e20}
details{margin:6px 0}summary{cursor:pointer}code{background:#f6f6f6;padding:0 3px}
.small{color:#666;font-size:12px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float | None, digits: int = 3) -> str:
    return (
        "–"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


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
        f'aria-label="{_e(title)} distribution"><text x="{pad}" y="12" font-size="12">'
        f"{_e(title)} (n={len(values)})</text>{''.join(rects)}"
        f'<text x="{pad}" y="{height - 4}" font-size="10">0</text>'
        f'<text x="{width - pad - 6}" y="{height - 4}" font-size="10">1</text></svg>'
    )


def _summary_table(result: Any) -> str:
    rows = []
    for s in result.summary.values():
        nan = ", ".join(f"{_e(k)}: {v}" for k, v in s.nan.items()) or "–"
        rows.append(
            f"<tr><td><code>{_e(s.metric)}</code></td><td class=n>{_num(s.mean)}</td>"
            f"<td class=n>[{_num(s.ci_low)}, {_num(s.ci_high)}]</td><td class=n>{s.scored}</td>"
            f"<td>{nan}</td><td class=n>{s.errored}</td></tr>"
        )
    return (
        "<table><tr><th>metric</th><th>mean</th><th>95% bootstrap CI</th><th>scored</th>"
        "<th>NaN (reason: rows)</th><th>errors</th></tr>" + "".join(rows) + "</table>"
    )


def _evidence(row: dict[str, Any]) -> str:
    ev = row.get("evidence") or {}
    parts = []
    for key, title in (("answer", "answer claims"), ("truth", "ground-truth claims")):
        claims, verdicts = ev.get(f"{key}_claims"), ev.get(f"{key}_verdicts")
        if claims and verdicts:
            items = "".join(
                f"<tr><td>{_e(c)}</td><td class={'ok' if v['verdict'] == 'supported' else 'bad'}>"
                f"{_e(v['verdict'])}</td><td>{_e(v['reason'])}</td><td>{_e(v['context'])}</td></tr>"
                for c, v in zip(claims, verdicts, strict=False)
            )
            parts.append(
                f"<b>{title}</b><table><tr><th>claim</th><th>verdict</th><th>reason</th>"
                f"<th>context</th></tr>{items}</table>"
            )
    if ev.get("context_grades"):
        items = "".join(
            f"<tr><td class=n>{g['context']}</td><td class=n>{g['grade']}</td>"
            f"<td>{_e(g['reason'])}</td></tr>"
            for g in ev["context_grades"]
        )
        parts.append(
            "<b>context grades</b><table><tr><th>#</th><th>grade</th><th>reason</th></tr>"
            f"{items}</table>"
        )
    rq = ev.get("reverse_questions")
    if rq:
        sims = ", ".join(_num(s) for s in rq.get("similarities", []))
        parts.append(
            f"<b>reverse questions</b> (noncommittal: {_e(rq['noncommittal'])}): "
            f"{_e(' | '.join(rq['questions']))} — similarities {sims}"
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
            parts.append(f"<b>{_e(key)}</b> {_e(json.dumps(value, ensure_ascii=False))}")
    if row.get("errors"):
        parts.append("<b>errors</b> " + _e(json.dumps(row["errors"], ensure_ascii=False)))
    return "<br>".join(parts) or "<span class=small>no judgments (see reasons)</span>"


def _worst(result: Any, limit: int = 10) -> str:
    def key(row: dict[str, Any]) -> float:
        values = [v for v in row["scores"].values() if v is not None]
        return min(values) if values else -1.0  # errored rows first

    rows = sorted(result.rows, key=key)[:limit]
    blocks = []
    for row in rows:
        scores = ", ".join(f"{_e(m)} {_num(row['scores'].get(m))}" for m in result.metrics)
        reasons = "".join(
            f" <span class=bad>{_e(m)}: {_e(r)}</span>" for m, r in row["reasons"].items()
        )
        blocks.append(
            f"<details><summary>row {row['row']} · {_e((row.get('question') or '')[:120])} — "
            f"{scores}{reasons}</summary><p><b>answer</b> {_e(row.get('answer'))}</p>"
            f"{'<p class=bad>' + _e(row['error']) + '</p>' if row.get('error') else ''}"
            f"{_evidence(row)}</details>"
        )
    return "".join(blocks)


def _diagnosis(result: Any) -> str:
    from judge.report.diagnose import diagnose

    findings = diagnose({m: s.mean for m, s in result.summary.items()})
    return "".join(f"<li>{_e(f)}</li>" for f in findings) or "<li>nothing stands out</li>"


def render_report(result: Any) -> str:
    """The HTML text of the report."""
    plots = "".join(
        histogram_svg([r["scores"][m] for r in result.rows if r["scores"].get(m) is not None], m)
        for m in result.metrics
    )
    usage = result.usage or {}
    cost = usage.get("cost")
    config = json.dumps(result.config, indent=2, ensure_ascii=False)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>judge report</title><style>{_CSS}</style></head><body>"
        f"<h1>judge report</h1><p class=small>{len(result.rows)} rows from "
        f"{_e(result.config.get('source'))}; {result.errors} with errors.</p>"
        f"<h2>Summary</h2>{_summary_table(result)}"
        f"<h2>Diagnosis</h2><ul>{_diagnosis(result)}</ul>"
        f"<h2>Distributions</h2><div class=plots>{plots}</div>"
        f"<h2>Worst samples</h2>{_worst(result)}"
        "<h2>Usage and cost</h2><table>"
        + "".join(
            f"<tr><th>{_e(k)}</th><td class=n>{_e(v)}</td></tr>"
            for k, v in usage.items()
            if k != "cost"
        )
        + f"<tr><th>cost (USD)</th><td class=n>{'unknown' if cost is None else f'{cost:.4f}'}"
        f"</td></tr></table><h2>Configuration</h2><pre>{_e(config)}</pre></body></html>\n"
    )


def write_report(result: Any, path: str | os.PathLike[str]) -> None:
    """Write report.html for an EvaluationResult."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(render_report(result))
