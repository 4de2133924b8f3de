"""probe.html: each stability probe's expectation, what was measured and whether it held.
Self-contained: no script, no network."""

from __future__ import annotations

import json
import os

from judge.formatting import escape, number, page, write_page
from judge.probes.result import ProbeResult, figures, verdict


def _checks(result: ProbeResult) -> str:
    rows = []
    for c in result.checks:
        css = "ok" if c.held else "bad" if c.held is False else "small"
        shown = "<br>".join(escape(f) for f in figures(c))
        note = f"<br><span class=small>{escape(c.note)}</span>" if c.note else ""
        rows.append(
            f"<tr><td>{escape(c.probe)}</td><td>{escape(c.metric)}</td>"
            f"<td class=small>{escape(c.expectation)}</td><td class=n>{c.rows}</td>"
            f"<td class={css}><b>{verdict(c.held)}</b></td><td>{shown}{note}</td></tr>"
        )
    return (
        "<table><tr><th>probe</th><th>metric</th><th>expectation</th><th>rows</th>"
        f"<th>result</th><th>measured</th></tr>{''.join(rows)}</table>"
    )


def _moved(result: ProbeResult) -> str:
    """The rows behind each failed check, with their scores in each run compared."""
    blocks = []
    for c in result.failed:
        rows = "".join(
            f"<tr><td>{m['row']}</td><td>{escape(m['id'])}</td>"
            f"<td>{escape((m['question'] or '')[:120])}</td><td>"
            + " → ".join(f"{escape(run)} {number(v)}" for run, v in m["scores"].items())
            + "</td></tr>"
            for m in result.moved(c)
        )
        blocks.append(
            f"<details open><summary>{escape(c.probe)} · {escape(c.metric)}</summary><table>"
            f"<tr><th>row</th><th>id</th><th>question</th><th>scores</th></tr>{rows}"
            "</table></details>"
        )
    return "".join(blocks) or "<p>No check failed.</p>"


def _usage(result: ProbeResult) -> str:
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td class=n>{u.get('requests', 0)}</td>"
        f"<td class=n>{u.get('cache_hits', 0)}</td></tr>"
        for name, u in result.usage().items()
    )
    return f"<table><tr><th>run</th><th>requests</th><th>cache hits</th></tr>{rows}</table>"


def render_probe(result: ProbeResult) -> str:
    """The HTML text of probe.html."""
    config = json.dumps(result.config, indent=2, ensure_ascii=False, default=str)
    held = sum(c.held is True for c in result.checks)
    return page(
        "judge probe",
        f"<h1>Stability probes of {escape(result.config.get('model'))}</h1>"
        f"<p>{held} of {len(result.checks)} checks held, {len(result.failed)} failed, on "
        f"{result.config.get('rows')} rows of {escape(result.config.get('source'))}.</p>"
        f"<h2>Checks</h2>{_checks(result)}<h2>Rows that moved most in failed checks</h2>"
        f"{_moved(result)}<h2>Runs</h2>{_usage(result)}"
        f"<h2>Configuration</h2><pre>{escape(config)}</pre>",
    )


def write_probe(result: ProbeResult, path: str | os.PathLike[str]) -> None:
    """Write probe.html."""
    write_page(render_probe(result), path)
