"""Monitor states for the tests of `judge view --monitor`, made by running the monitor with
the loopback fake judge over traces whose quality drops (tests/helpers/monitor.py), and
the page's data read back from the folder it wrote."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from judge.llm.config import LLM
from judge.monitor.monitor import Monitor, MonitorConfig
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.monitor import no_retriever_trace, rag_traces, traces_file
from tests.helpers.view import HOSTILE

TRACES = 60
BAD_FROM = 30  # the answers are unfaithful from trace 30: window 3 on, in windows of 10
WINDOW = 10


def monitor_config(tmp: Path, server: FakeLLMServer, **options: Any) -> MonitorConfig:
    """A monitor of faithfulness judged by the fake server, windows of 10 judged traces,
    the first window as the baseline."""
    llm = LLM(model="openai/fake-model", api_base=server.base_url, api_key="x")
    settings: dict[str, Any] = {"window": str(WINDOW), "baseline_windows": 1, "progress": False}
    settings.update(options)
    return MonitorConfig(
        state=tmp / "state",
        llm=llm,
        metrics=["faithfulness"],
        cache=str(tmp / "cache.sqlite"),
        **settings,
    )


def dropped_state(tmp: Path) -> dict[str, Any]:
    """Run `judge monitor --once` (in Python) over 60 traces whose answers turn unfaithful
    at trace 30, and one trace that gives no row; returns {"state": folder, "ids": the
    traces' ids in order, "report": the pass's MonitorReport, "requests": the judge's}."""
    (tmp / "otel").mkdir(parents=True)
    ids: list[str] = []

    def make(provider: Any) -> list[str]:
        ids.extend(rag_traces(provider, TRACES, bad_from=BAD_FROM))
        return [*ids, no_retriever_trace(provider)]

    traces_file(tmp / "otel" / "t.json", make)
    with FakeLLMServer(heuristic_judge) as server:
        monitor = Monitor(monitor_config(tmp, server))
        try:
            report = monitor.once(tmp / "otel")
        finally:
            monitor.close()
        requests = server.count()
    return {"state": tmp / "state", "ids": ids, "report": report, "requests": requests}


def page_data(folder: Path) -> dict[str, Any]:
    """The data a written monitor page holds (its data.js), as JSON."""
    text = (folder / "data.js").read_text(encoding="utf-8")
    prefix = "window.JUDGE_MONITOR = "
    assert text.startswith(prefix) and text.endswith(";\n"), text[:80]
    data: dict[str, Any] = json.loads(text[len(prefix) : -2])
    return data


def make_hostile(state: Path, metric: str = HOSTILE, trace_id: str = HOSTILE) -> None:
    """Rename faithfulness to `metric` and the first worst trace of the first alert to
    `trace_id` throughout a monitor state (its windows, detectors, alerts and traces), and
    give a skipped trace a reason holding markup: what a custom metric's name or a foreign
    exporter's ids could put there."""
    db = sqlite3.connect(state / "monitor.sqlite")
    try:
        with db:
            for number, text in db.execute("SELECT number, summary FROM windows").fetchall():
                summary = json.loads(text)
                summary["metrics"] = {
                    (metric if m == "faithfulness" else m): s for m, s in summary["metrics"].items()
                }
                db.execute(
                    "UPDATE windows SET summary=? WHERE number=?", (json.dumps(summary), number)
                )
            (detector,) = db.execute("SELECT state FROM detectors").fetchone()
            moved = json.loads(detector)
            moved["metric"] = metric
            db.execute("UPDATE detectors SET metric=?, state=?", (metric, json.dumps(moved)))
            for number, text in db.execute("SELECT id, alert FROM alerts").fetchall():
                alert = json.loads(text)
                alert["metric"] = alert["test"]["metric"] = metric
                if number == 1:
                    old = alert["worst"][0]["trace_id"]
                    alert["worst"][0]["trace_id"] = trace_id
                    db.execute("UPDATE traces SET trace_id=? WHERE trace_id=?", (trace_id, old))
                db.execute(
                    "UPDATE alerts SET metric=?, alert=? WHERE id=?",
                    (metric, json.dumps(alert), number),
                )
            db.execute("UPDATE traces SET reason=? WHERE status='skipped'", (HOSTILE,))
    finally:
        db.close()
