"""The monitor's page data (`judge view --monitor STATE`): a monitor state's windows with
their intervals, each metric's baseline and where it came from, the alerts with their worst
traces and the judge's evidence, and the counts, read once from the state (read-only, in
one short transaction: a running monitor goes on writing) so that the page needs nothing
but its own folder."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from judge.errors import JudgeError
from judge.metrics.registry import higher_is_better
from judge.monitor.alerts import UNCHECKED, DropDetector
from judge.monitor.snapshot import StateSnapshot, read_snapshot
from judge.view.data import (
    MAX_ANSWER_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_QUESTION_CHARS,
    answer_claims,
    cut_text,
    finite_number,
)

# The judge's evidence of a worst trace, as JSON text in the page, is cut at this length
# (a row of many contexts' grades would otherwise make data.js large).
MAX_EVIDENCE_CHARS = 6000
# A trace's contexts shown at most (each cut at MAX_CONTEXT_CHARS).
MAX_CONTEXTS = 20
FIGURES = ("scored", "mean", "ci_low", "ci_high")


def monitor_data(state: str | os.PathLike[str] | StateSnapshot) -> dict[str, Any]:
    """The monitor page's data (`window.JUDGE_MONITOR`) from a monitor state.

    Args:
        state: the folder `judge monitor` was given as --state, or a snapshot of it
            (`judge.monitor.snapshot.read_snapshot`).

    Returns:
        {"state", "settings", "counts", "open_traces", "metrics", "windows", "baselines",
        "alerts", "traces"}: windows in order, each with its metrics' figures and the
        metrics that raised an alert in it; per metric its baseline (mean, interval,
        source, the drop test's reference and statistic, or why it is unchecked); alerts
        in the order fired with their worst traces (trace id, score, the judge's claims
        and evidence); the judged rows of those traces by trace id.
    """
    snap = state if isinstance(state, StateSnapshot) else read_snapshot(state)
    metrics: dict[str, None] = {}  # an ordered set: the order windows first name them
    fired: dict[int, list[str]] = {}
    for alert in snap.alerts:
        fired.setdefault(int(alert["window"]), []).append(str(alert["metric"]))
    windows = []
    for summary in snap.windows:
        figures = {
            str(m): {k: finite_number(s.get(k)) for k in FIGURES}
            for m, s in (summary.get("metrics") or {}).items()
            if isinstance(s, Mapping)
        }
        metrics.update(dict.fromkeys(figures))
        number = int(summary["number"])
        windows.append(
            {
                "number": number,
                "start": summary.get("start"),
                "end": summary.get("end"),
                "rows": summary.get("rows"),
                "baseline": bool(summary.get("baseline")),
                "metrics": figures,
                "alerts": sorted(set(fired.get(number, []))),
            }
        )
    for alert in snap.alerts:
        metrics.setdefault(str(alert["metric"]))
    metrics.update(dict.fromkeys(snap.detectors))
    return {
        "state": str(snap.path.parent),
        "settings": snap.settings,
        "counts": snap.counts,
        "open_traces": snap.open_traces,
        "metrics": list(metrics),
        "windows": windows,
        "baselines": {m: _baseline(m, snap, windows) for m in metrics},
        "alerts": [_alert(alert) for alert in snap.alerts],
        "traces": {tid: _trace(tid, found) for tid, found in snap.traces.items()},
    }


def _baseline(metric: str, snap: StateSnapshot, windows: list[dict[str, Any]]) -> dict[str, Any]:
    """A metric's baseline as the page shows it: the drop test's (its mean, its betting
    interval, the reference compared against, the statistic now) when the check made one;
    else the baseline windows' mean with no interval, and why the metric is unchecked."""
    out: dict[str, Any] = {
        "mean": None,
        "ci_low": None,
        "ci_high": None,
        "rows": None,
        "source": None,
        "reference": None,
        "statistic": None,
        "threshold": None,
        "unchecked": None,
        "higher_is_better": higher_is_better(metric),
    }
    recorded = snap.settings.get("baseline")
    if recorded and recorded.startswith("run "):
        out["source"] = recorded  # a pinned run: the setting names it from the start
    detector = snap.detectors.get(metric)
    if isinstance(detector, Mapping) and UNCHECKED in detector:
        out["unchecked"] = str(detector[UNCHECKED])
    elif detector is not None:
        try:
            test = DropDetector.from_json(detector)
        except JudgeError:  # another check's state: no baseline of the drop test's
            test = None
        if test is not None:
            out.update(
                mean=test.baseline_mean,
                ci_low=test.baseline_interval[0],
                ci_high=test.baseline_interval[1],
                rows=test.baseline_rows,
                source=test.baseline_source,
                reference=test.reference,
                statistic=test.statistic,
                threshold=test.threshold,
                higher_is_better=test.higher_is_better,
            )
            return out
    # No drop test yet (or none possible): the baseline windows' rows' mean, if any.
    sums, rows, numbers = 0.0, 0, []
    for window in windows:
        figures = window["metrics"].get(metric)
        if not window["baseline"]:
            continue
        numbers.append(window["number"])
        if figures and figures["mean"] is not None and figures["scored"]:
            sums += figures["mean"] * figures["scored"]
            rows += int(figures["scored"])
    if rows:
        out.update(mean=sums / rows, rows=rows)
    if out["source"] is None and numbers:
        out["source"] = (
            "the first window" if len(numbers) == 1 else f"the first {len(numbers)} windows"
        )
    return out


def _mapping(value: Any) -> Mapping[str, Any]:
    """A JSON object of the state, or an empty one for anything else."""
    return value if isinstance(value, Mapping) else {}


def _alert(record: Mapping[str, Any]) -> dict[str, Any]:
    """An alert as the page shows it."""
    test, baseline, current = (_mapping(record.get(k)) for k in ("test", "baseline", "current"))
    interval = test.get("baseline_interval")
    low, high = interval if isinstance(interval, list) and len(interval) == 2 else (None, None)
    return {
        "id": record["id"],
        "at": record.get("at"),
        "metric": str(record["metric"]),
        "window": int(record["window"]),
        "start": record.get("start"),
        "end": record.get("end"),
        "current": {k: finite_number(current.get(k)) for k in FIGURES},
        "baseline": {
            # the drop test's interval of the baseline mean when the test gave one
            "mean": finite_number(test.get("baseline_mean", baseline.get("mean"))),
            "ci_low": finite_number(low if low is not None else baseline.get("ci_low")),
            "ci_high": finite_number(high if high is not None else baseline.get("ci_high")),
            "source": baseline.get("source") or test.get("baseline_source"),
            "run": baseline.get("run"),
        },
        "reference": finite_number(test.get("reference")),
        "statistic": finite_number(test.get("statistic")),
        "threshold": finite_number(test.get("threshold")),
        "since_mean": finite_number(test.get("since_mean")),
        "since_rows": test.get("since_rows"),
        "worst": [_worst(w) for w in record.get("worst") or [] if isinstance(w, Mapping)],
    }


def _worst(worst: Mapping[str, Any]) -> dict[str, Any]:
    """One of an alert's worst traces: its id, score, and the judge's evidence (the answer's
    claims with verdicts and reasons, and the whole evidence as JSON text)."""
    evidence = worst.get("evidence")
    return {
        "trace_id": str(worst.get("trace_id")),
        "score": finite_number(worst.get("score")),
        "claims": answer_claims(evidence) if isinstance(evidence, Mapping) else [],
        "evidence": _evidence_text(evidence),
    }


def _evidence_text(evidence: Any) -> str | None:
    if not evidence:
        return None
    text = json.dumps(evidence, ensure_ascii=False, indent=1, sort_keys=True, default=str)
    return cut_text(text, MAX_EVIDENCE_CHARS)


def _trace(trace_id: str, found: Mapping[str, Any]) -> dict[str, Any]:
    """A worst trace's judged row, as the monitor recorded it."""
    row, scores, errors = (_mapping(found.get(k)) for k in ("row", "scores", "errors"))
    given = row.get("contexts")
    contexts: list[Any] = given if isinstance(given, list) else []
    evidence = found.get("evidence")
    return {
        "trace_id": trace_id,
        "window": found.get("window"),
        "start_time": row.get("start_time"),
        "question": cut_text(row.get("question"), MAX_QUESTION_CHARS),
        "answer": cut_text(row.get("answer"), MAX_ANSWER_CHARS),
        "contexts": [cut_text(c, MAX_CONTEXT_CHARS) for c in contexts[:MAX_CONTEXTS]],
        "more_contexts": max(0, len(contexts) - MAX_CONTEXTS),
        "scores": {str(m): finite_number(v) for m, v in scores.items()},
        "errors": {str(m): cut_text(e, MAX_CONTEXT_CHARS) for m, e in errors.items() if e},
        "claims": answer_claims(evidence) if isinstance(evidence, Mapping) else [],
        "evidence": _evidence_text(evidence),
    }
