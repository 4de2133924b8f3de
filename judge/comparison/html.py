"""compare.html: the A/B table with significance, a per-sample delta plot, and findings; or,
for runs against a baseline, the runs x metrics table and each run's changes per question."""

from __future__ import annotations

import math
import os

from judge.comparison.evaluations import ALPHA, Comparison, MetricComparison
from judge.comparison.many import ManyComparison, MetricChange, QuestionDiff
from judge.comparison.trec_runs import left_out_note
from judge.formatting import MISSING, counted, escape, number, p_text, page, write_page
from judge.run.report_html import contexts_html, evidence_html
from judge.run.rows import ResultRow


def _resampled_note(comparison: Comparison) -> str:
    """' CI and p resampled by conversation (...).' for turns of conversations; else ''."""
    if comparison.resampled is None:
        return ""
    return f" CI and p {escape(str(comparison.resampled))}."


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


def _turns_html(comparison: Comparison) -> str:
    """Each metric's Δ by turn position, for two runs of conversations' turns; else ''."""
    if not comparison.by_turn:
        return ""
    head = "".join(f"<th>turn {t['position']}</th>" for t in comparison.by_turn)
    pairs = "".join(f"<td class=n>{t['pairs']}</td>" for t in comparison.by_turn)
    rows = "".join(
        f"<tr><td><code>{escape(m)}</code></td>"
        + "".join(
            f"<td class=n>{number(t['metrics'][m]['delta'], sign='+')}</td>"
            for t in comparison.by_turn
        )
        + "</tr>"
        for m in comparison.metrics
    )
    return (
        "<h2>Δ by turn position</h2><p class=small>Position k holds each conversation's k-th "
        "judged turn in B (its turns in order of <code>turn</code>).</p>"
        f"<table><tr><th>metric</th>{head}</tr><tr><td>pairs</td>{pairs}</tr>{rows}</table>"
    )


def _corrected_html(comparison: Comparison) -> str:
    """The labelled metric's difference B - A corrected by people's labels (`judge compare
    --labels-a/--labels-b`: the comparison's `label_corrected`) beside the judge's own and
    the labels' alone, as the terminal's table gives them; '' without labels."""
    found = comparison.extra.get("label_corrected")
    if not found:
        return ""
    ppi = found["ppi"]
    estimates = (
        ("judge only", found["judge_only"], found["judge_only"]["n"]),
        ("labels only", found["labels_only"], found["n_labelled"]),
        ("PPI", ppi, found["n_labelled"] + found["n_unlabelled"]),
    )
    rows = "".join(
        f"<tr><td>{name}</td><td class=n>{number(e['mean'], sign='+')}</td>"
        f"<td class=n>[{number(e['low'], sign='+')}, {number(e['high'], sign='+')}]</td>"
        f"<td class=n>{n}</td></tr>"
        for name, e, n in estimates
    )
    low, high = ppi["low"], ppi["high"]
    if low is None or high is None:
        verdict = "no corrected interval: no verdict by the labels"
    elif high < 0:
        verdict = "by the labels, B is worse: the corrected interval lies wholly below 0"
    elif low > 0:
        verdict = "by the labels, B is better: the corrected interval lies wholly above 0"
    else:
        verdict = "by the labels, the difference is within noise: the corrected interval holds 0"
    level = f"{found['confidence']:.0%}"
    said = [*found.get("notes", []), *(f"warning: {w}" for w in found.get("warnings", []))]
    notes = f"<ul>{''.join(f'<li>{escape(n)}</li>' for n in said)}</ul>" if said else ""
    return (
        "<h2>Corrected by people's labels</h2>"
        f"<p class=small><code>{escape(found['metric'])}</code> "
        f"({escape(found['orientation'])}), B - A, against labels {escape(repr(found['label']))}: "
        f"{found['n_labelled']} rows labelled in both runs, {found['n_unlabelled']} judged "
        f"without a label; {level} intervals (PPI, lambda {number(ppi['lambda'])}). The "
        "judge-only interval is of the judge's own difference: blind to the judge's bias.</p>"
        f"<table><tr><th>estimate</th><th>Δ</th><th>{level} interval of Δ</th><th>n</th></tr>"
        f"{rows}</table><p class=corrected>{escape(verdict)}</p>{notes}"
    )


def _left_out_html(comparison: Comparison) -> str:
    """The rows of two ranked columns left out for want of judgments, as a sentence."""
    rows = comparison.extra.get("left_out", {}).get("no_relevance_judgments")
    return f" {escape(left_out_note(rows))}." if rows else ""


def render_compare(comparison: Comparison, findings: list[str]) -> str:
    """The HTML text of the comparison page."""
    rows = [_stats_row(m, marked=False) for m in comparison.metrics.values()]
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
        f"{counted(len(comparison.keys), 'paired sample')}; unmatched "
        f"{len(comparison.unmatched_a)} in A, {len(comparison.unmatched_b)} in B."
        f"{_left_out_html(comparison)} Δ = B - A; 95% "
        "paired bootstrap CI; two-sided paired randomisation test; Holm-Bonferroni "
        f"adjustment; significant at p < {ALPHA}.{_resampled_note(comparison)}</p>"
        "<table><tr><th>metric</th><th>A</th><th>B</th><th>Δ</th><th>95% CI of Δ</th>"
        "<th>p</th><th>p (Holm)</th><th>W/T/L</th><th>n</th><th>verdict</th></tr>"
        f"{''.join(rows)}</table>{_corrected_html(comparison)}{_turns_html(comparison)}"
        f"{lost_html}"
        f"<h2>Diagnosis of B</h2><ul>{notes}</ul>"
        f"<h2>Per-sample deltas</h2><div class=plots>{plots}</div>",
    )


def write_compare(
    comparison: Comparison, findings: list[str], path: str | os.PathLike[str]
) -> None:
    """Write compare.html."""
    write_page(render_compare(comparison, findings), path)


# Questions shown per list (worse, better) of a run in compare.html; comparison.json has all.
SHOWN_QUESTIONS = 25


def _stats_row(m: MetricComparison, *, marked: bool) -> str:
    """One metric of a paired comparison as a table row, with its verdict (marked: the
    verdict's cell coloured by it, as the many-run page has it)."""
    verdict = (
        "significant " + ("regression" if m.worse else "improvement")
        if m.significant
        else "not significant"
    )
    css = ""
    if marked and m.significant:
        css = " class=bad" if m.worse else " class=ok"
    cells = (
        m.metric,
        number(m.mean_a),
        number(m.mean_b),
        number(m.delta, sign="+"),
        f"[{number(m.ci_low, sign='+')}, {number(m.ci_high, sign='+')}]",
        p_text(m.p_value),
        p_text(m.p_adjusted),
        f"{m.wins}/{m.ties}/{m.losses}",
        m.n,
    )
    return (
        "<tr>"
        + "".join(f"<td class=n>{escape(v)}</td>" for v in cells)
        + f"<td{css}>{verdict}</td></tr>"
    )


def _stats_rows(comparison: Comparison) -> str:
    """One row per metric of a paired comparison, with its verdict."""
    return "".join(_stats_row(m, marked=True) for m in comparison.metrics.values())


def _question_html(q: QuestionDiff, changes: list[MetricChange], base: str, run: str) -> str:
    """One question that moved: its changes, then both sides' answers and the judge's
    evidence side by side."""
    ident = q.run.id if q.run.id is not None else q.key
    moved = ", ".join(f"{c.metric} {c.delta:+.3f}" for c in changes)
    table = "".join(
        f"<tr><td>{escape(c.metric)}</td><td class=n>{number(c.baseline)}</td>"
        f"<td class=n>{number(c.run)}</td><td class=n>{number(c.delta, sign='+')}</td></tr>"
        for c in [*q.worse, *q.better]
    )

    def side(row: ResultRow) -> str:
        answer = escape(row.answer) if row.answer is not None else MISSING
        return (
            f"<td><p><b>answer</b> {answer}</p>{contexts_html(row)}"
            f"{evidence_html(row, grades=False)}</td>"
        )

    return (
        f"<details class=sample><summary><b>{escape(ident)}</b> · {escape(moved)} · "
        f"{escape((q.run.question or '')[:120])}</summary>"
        f"<p><b>question</b> {escape(q.run.question or MISSING)}</p>"
        "<table><tr><th>metric</th><th>baseline</th><th>run</th><th>Δ</th></tr>"
        f"{table}</table><table style='table-layout:fixed;width:100%'>"
        f"<tr><th>{escape(base)} (baseline)</th><th>{escape(run)}</th></tr>"
        f"<tr>{side(q.baseline)}{side(q.run)}</tr></table></details>"
    )


def _questions_html(title: str, diffs: list[QuestionDiff], worse: bool, base: str, run: str) -> str:
    shown = diffs[:SHOWN_QUESTIONS]
    items = "".join(_question_html(q, q.worse if worse else q.better, base, run) for q in shown)
    more = (
        f"<p class=small>and {len(diffs) - len(shown)} more in comparison.json</p>"
        if len(diffs) > len(shown)
        else ""
    )
    return f"<h3>{title} ({len(diffs)} questions)</h3>{items or '<p>none</p>'}{more}"


def render_many(many: ManyComparison) -> str:
    """The HTML text of compare.html for runs against a baseline."""
    head = "".join(f"<th>{escape(m)}</th>" for m in many.metrics)
    run_rows = []
    for r in many.runs:
        name = escape(r.label) + (" <b>(baseline)</b>" if r.label == many.baseline else "")
        cells = "".join(
            f"<td class=n>{number(s.mean)} [{number(s.ci_low)}, {number(s.ci_high)}]</td>"
            for s in (r.metrics[m] for m in many.metrics)
        )
        run_rows.append(f"<tr><td>{name}</td><td class=n>{r.rows}</td>{cells}</tr>")
    sections = []
    for v in many.versus:
        c = v.comparison
        significant = [m for m in c.metrics.values() if m.significant]
        changes = "".join(
            f"<li class={'bad' if m.worse else 'ok'}>{escape(m.metric)}: "
            f"{'worse' if m.worse else 'better'}, Δ {number(m.delta, sign='+')} "
            f"(p Holm {p_text(m.p_adjusted)})</li>"
            for m in significant
        )
        sections.append(
            f"<h2>{escape(v.label)} vs {escape(many.baseline)}</h2>"
            f"<p class=small>{len(c.keys)} paired samples (matched by {escape(v.matched_by)}); "
            f"unmatched {len(c.unmatched_a)} in the baseline, {len(c.unmatched_b)} in the run. "
            f"Δ = run - baseline over the paired samples.{_resampled_note(c)}</p>"
            f"<h3>Significant changes</h3><ul>{changes or '<li>none</li>'}</ul>"
            "<table><tr><th>metric</th><th>baseline</th><th>run</th><th>Δ</th>"
            "<th>95% CI of Δ</th><th>p</th><th>p (Holm)</th><th>W/T/L</th><th>n</th>"
            f"<th>verdict</th></tr>{_stats_rows(c)}</table>"
            + _questions_html("Worse, largest drop first", v.worse, True, many.baseline, v.label)
            + _questions_html("Better, largest gain first", v.better, False, many.baseline, v.label)
        )
    return page(
        "judge compare",
        "<h1>judge compare</h1>"
        f"<p class=small>Baseline: {escape(many.baseline)}. Means with 95% bootstrap intervals "
        "over each run's own rows; each run against the baseline over the samples both have: "
        "95% paired bootstrap CI of Δ, two-sided paired randomisation test, "
        f"{escape(many.holm_note)}.</p>"
        f"<table><tr><th>run</th><th>rows</th>{head}</tr>{''.join(run_rows)}</table>"
        + "".join(sections),
    )


def write_many(many: ManyComparison, path: str | os.PathLike[str]) -> None:
    """Write compare.html of runs against a baseline."""
    write_page(render_many(many), path)
