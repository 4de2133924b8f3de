"""compare.html: the A/B table with significance, a per-sample delta plot, and findings."""

from __future__ import annotations

import math
import os

from judge.comparison.evaluations import ALPHA, Comparison
from judge.formatting import escape, number, page, write_page


def delta_plot(metric: str, deltas: list[float], keys: list[str]) -> str:
    """Sorted per-sample deltas (B - A) as bars around zero, an inline SVG, with the scale at
    the left (+max, 0, -max) and the largest |Δ| in the title ("every Δ is 0" when none moved;
    a panel of zeros claims no maximum)."""
    points = sorted((d, k) for d, k in zip(deltas, keys, strict=True) if not math.isnan(d))
    width, height, pad, left = 520, 140, 20, 52
    if not points:
        return f"<p>{escape(metric)}: no paired values</p>"
    largest = max(abs(d) for d, _ in points)
    top = largest or 1.0  # the bars' scale; all zero: flat bars
    bar = (width - left - pad) / len(points)
    middle = height / 2
    rects = []
    for i, (d, key) in enumerate(points):
        h = (height / 2 - pad) * abs(d) / top
        y = middle - h if d > 0 else middle
        color = "#1b5e20" if d > 0 else "#b00020" if d < 0 else "#999"
        rects.append(
            f'<rect x="{left + i * bar:.2f}" y="{y:.1f}" width="{max(bar - 1, 0.5):.2f}" '
            f'height="{max(h, 0.5):.1f}" fill="{color}"><title>{escape(key)}: {d:+.4f}'
            "</title></rect>"
        )
    scale = (
        f"max |Δ| {largest:.3f}, {len(points)} samples"
        if largest
        else f"every Δ is 0, {len(points)} samples"
    )
    axis = "".join(
        f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{label}</text>'
        for y, label in (
            ((pad, f"+{largest:.3f}"), (middle, "0"), (height - pad, f"-{largest:.3f}"))
            if largest
            else ((middle, "0"),)
        )
    )
    return (
        f'<svg class="plot" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(metric)} per-sample delta"><text x="{left}" y="14" font-size="12">'
        f"{escape(metric)}: B - A per sample, sorted ({scale})</text>{axis}"
        f'<line x1="{left}" x2="{width - pad}" y1="{middle}" y2="{middle}" stroke="#444"/>'
        f"{''.join(rects)}</svg>"
    )


def render_compare(comparison: Comparison, findings: list[str]) -> str:
    """The HTML text of the comparison page."""
    rows = []
    for m in comparison.metrics.values():
        verdict = (
            "significant " + ("regression" if m.worse else "improvement")
            if m.significant
            else "not significant"
        )
        rows.append(
            "<tr>"
            + "".join(
                f"<td class=n>{escape(v)}</td>"
                for v in (
                    m.metric,
                    number(m.mean_a),
                    number(m.mean_b),
                    number(m.delta, sign="+"),
                    f"[{number(m.ci_low, sign='+')}, {number(m.ci_high, sign='+')}]",
                    number(m.p_value),
                    number(m.p_adjusted),
                    f"{m.wins}/{m.ties}/{m.losses}",
                    m.n,
                )
            )
            + f"<td>{verdict}</td></tr>"
        )
    lost = comparison.extra.get("lost_from_top_k")
    lost_html = ""
    if lost is not None:
        items = "".join(
            f"<li>{escape(q['query'])}: {escape(', '.join(q['docs']))} (rank in B: "
            f"{escape(q['rank_in_b'])})</li>"
            for q in lost["queries"]
        )
        lost_html = (
            f"<h2>Relevant docs pushed out of the top {lost['k']}</h2>"
            f"<ul>{items or '<li>none</li>'}</ul>"
        )
    plots = "".join(
        delta_plot(m, comparison.deltas[m], comparison.keys) for m in comparison.metrics
    )
    notes = "".join(f"<li>{escape(f)}</li>" for f in findings) or "<li>nothing stands out</li>"
    return page(
        "judge compare",
        "<h1>judge compare</h1>"
        f"<p class=small>A: {escape(comparison.label_a)}<br>B: {escape(comparison.label_b)}<br>"
        f"{len(comparison.keys)} paired samples; unmatched {len(comparison.unmatched_a)} in A, "
        f"{len(comparison.unmatched_b)} in B. Δ = B - A; 95% paired bootstrap CI; two-sided "
        f"paired randomisation test; Holm-Bonferroni adjustment; significant at p < {ALPHA}."
        "</p><table><tr><th>metric</th><th>A</th><th>B</th><th>Δ</th><th>95% CI of Δ</th>"
        "<th>p</th><th>p (Holm)</th><th>W/T/L</th><th>n</th><th>verdict</th></tr>"
        f"{''.join(rows)}</table>{lost_html}<h2>Diagnosis of B</h2><ul>{notes}</ul>"
        f"<h2>Per-sample deltas</h2><div class=plots>{plots}</div>",
    )


def write_compare(
    comparison: Comparison, findings: list[str], path: str | os.PathLike[str]
) -> None:
    """Write compare.html."""
    write_page(render_compare(comparison, findings), path)
