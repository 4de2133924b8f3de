"""agreement.html: how far the judge agrees with people, and the worst disagreements with the
judge's evidence beside the label. Self-contained: no script, no network."""

from __future__ import annotations

import json
import os
from typing import Any

from judge.formatting import MISSING, escape, number, page, write_page
from judge.labels.agreement import Agreement, AgreementResult
from judge.run.report_html import contexts_html, evidence_html
from judge.run.rows import ResultRow


def _measures(a: Agreement) -> str:
    rows = "".join(
        f"<tr><td><code>{escape(name)}</code></td><td class=n>{number(m.value)}</td>"
        f"<td class=n>[{number(m.ci_low)}, {number(m.ci_high)}]</td>"
        f"<td class=small>{escape(m.note or '')}</td></tr>"
        for name, m in a.measures.items()
    )
    return (
        "<table><tr><th>measure</th><th>value</th><th>95% bootstrap CI</th><th>note</th></tr>"
        f"{rows}</table>"
    )


def _counts(a: Agreement) -> str:
    counts = ", ".join(f"{escape(k)} {v}" for k, v in a.counts.items())
    unscored = ", ".join(f"{escape(k)}: {v}" for k, v in a.unscored.items()) or "none"
    return (
        f"<p>{a.rows} rows, {a.scored} scored; {counts}. Not scored (reason: rows): {unscored}.</p>"
    )


def _groups(result: AgreementResult) -> str:
    if not result.groups:
        return ""
    names = list(result.overall.measures)
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    rows = "".join(
        f"<tr><td>{escape(group)}</td><td class=n>{a.rows}</td><td class=n>{a.scored}</td>"
        + "".join(
            f"<td class=n>{number(a.measures[n].value)}<br><span class=small>"
            f"[{number(a.measures[n].ci_low)}, {number(a.measures[n].ci_high)}]</span></td>"
            for n in names
        )
        + "</tr>"
        for group, a in result.groups.items()
    )
    return (
        f"<h2>By {escape(result.by)}</h2><table><tr><th>{escape(result.by)}</th><th>rows</th>"
        f"<th>scored</th>{head}</tr>{rows}</table>"
    )


def _side(view: dict[str, Any], title: str, metric: str) -> str:
    """One row's label, score and inputs, beside the judge's evidence on `metric`."""
    row = ResultRow(
        view["row"],
        view["id"],
        view["question"],
        view["answer"],
        contexts=view.get("contexts"),
        ground_truth=view.get("ground_truth"),
        evidence=view["evidence"],
    )
    truth = view.get("ground_truth")
    group = f" · {escape(view['group'])}" if view.get("group") is not None else ""
    return (
        f"<tr><td><b>{escape(title)}</b> row {view['row']} (id {escape(view['id'])}){group}"
        f"<br>label <b>{view['label']:g}</b> · judge <b>{number(view['score'])}</b>"
        f"<p><b>question</b> {escape(view['question'] or '')}</p>"
        f"<p><b>ground truth</b> {MISSING if truth is None else escape(truth)}</p>"
        f"<p><b>answer</b> {escape(view['answer'] or '')}</p>{contexts_html(row)}</td>"
        f"<td>{evidence_html(row, grades=False, metrics=[metric])}</td></tr>"
    )


def _disagreements(result: AgreementResult) -> str:
    if not result.disagreements:
        return "<p>None: the judge sides with the people on every scored row.</p>"
    blocks = []
    for d in result.disagreements:
        if "pair" in d:
            summary = f"pair {escape(d['pair'])}: the other row scored {d['margin']:+.3f} higher"
            body = _side(d["preferred"], "preferred", result.metric) + _side(
                d["other"], "other", result.metric
            )
        else:
            summary = (
                f"row {d['row']}: label {d['label']:g}, judge {number(d['score'])} "
                f"(gap {number(d['gap'])}) · {escape((d['question'] or '')[:100])}"
            )
            body = _side(d, "row", result.metric)
        blocks.append(
            f"<details open><summary>{summary}</summary><table><tr><th>label and inputs</th>"
            f"<th>the judge's evidence</th></tr>{body}</table></details>"
        )
    return "".join(blocks)


def render_agreement(result: AgreementResult) -> str:
    """The HTML text of agreement.html."""
    config = json.dumps(result.config, indent=2, ensure_ascii=False, default=str)
    source, orientation = result.config.get("source"), result.config.get("orientation", MISSING)
    return page(
        "judge agreement",
        f"<h1>{escape(result.metric)} vs people's labels</h1><p class=small>{escape(result.kind)} "
        f"labels in <code>{escape(result.label)}</code>, from {escape(source)}; the judge's score "
        f"compared as {escape(orientation)}.</p>"
        f"<h2>Agreement</h2>{_counts(result.overall)}{_measures(result.overall)}"
        f"{_groups(result)}<h2>Worst disagreements</h2>{_disagreements(result)}"
        f"<h2>Configuration</h2><pre>{escape(config)}</pre>",
    )


def write_agreement(result: AgreementResult, path: str | os.PathLike[str]) -> None:
    """Write agreement.html."""
    write_page(render_agreement(result), path)
