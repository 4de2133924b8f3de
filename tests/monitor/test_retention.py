"""`--keep-traces`: the state forgets old traces' rows, so it stays bounded however long
the monitor runs, while the counts, the windows of N rows, the baseline and each alert's
worst traces stay whole, and a restart judges nothing twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from judge.llm.config import LLM
from judge.monitor.monitor import Monitor, MonitorConfig, MonitorReport
from judge.monitor.snapshot import read_snapshot
from judge.monitor.state import MonitorState
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.monitor import PER_ROW, rag_traces, traces_file


def once(tmp: Path, server: FakeLLMServer, **options: Any) -> MonitorReport:
    """One `--once` pass over tmp/otel by a monitor started afresh (a restart each time)."""
    llm = LLM(model="openai/fake-model", api_base=server.base_url, api_key="x")
    monitor = Monitor(
        MonitorConfig(
            state=tmp / "state",
            llm=llm,
            metrics=["faithfulness"],
            cache=str(tmp / "cache.sqlite"),
            window="10",
            baseline_windows=1,
            progress=False,
            **options,
        )
    )
    try:
        return monitor.once(tmp / "otel")
    finally:
        monitor.close()


def kept(tmp: Path) -> list[tuple[Any, ...]]:
    """The traces the state still holds: (trace id, status, window)."""
    state = MonitorState(tmp / "state")
    try:
        return state.read("SELECT trace_id, status, window FROM traces ORDER BY seq")
    finally:
        state.close()


def test_the_state_stays_bounded_and_a_restart_judges_nothing_twice(tmp_path: Path) -> None:
    (tmp_path / "otel").mkdir()
    ids: list[str] = []
    with FakeLLMServer(heuristic_judge) as server:
        for n in range(5):  # 25 traces a pass, each pass a restart
            folder = tmp_path / "otel" / f"t{n}.json"
            ids += traces_file(folder, lambda p, n=n: rag_traces(p, 25, first=25 * n))
            report = once(tmp_path, server, keep_traces=0)
            judged = 25 * (n + 1)
            assert report.counts["judged"] == judged  # the forgotten ones still counted
            assert server.count() == judged * PER_ROW  # nothing judged twice
            held = kept(tmp_path)
            # The baseline window's 10 rows and the rows of the window still open.
            assert [w for _, _, w in held] == [0] * 10 + [judged // 10] * (judged % 10)
            assert report.counts["forgotten"] == judged - len(held)
    assert [t for t, _, _ in held[:10]] == ids[:10]
    # The windows of 10 rows go on being numbered by every row judged, forgotten or not.
    state = MonitorState(tmp_path / "state")
    try:
        windows = state.read("SELECT number, json_extract(summary, '$.rows') FROM windows")
    finally:
        state.close()
    assert windows == [(n, 10) for n in range(12)]
    assert "125 traces judged" in report.lines()[0]
    assert "110 traces forgotten by keep_traces=" in report.lines()[1]  # 125 - 10 - 5


def test_an_alert_s_worst_traces_are_kept_with_their_evidence(tmp_path: Path) -> None:
    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 60, bad_from=30))
    with FakeLLMServer(heuristic_judge) as server:
        first = once(tmp_path, server, keep_traces="1d")
        assert "forgotten" not in first.counts  # a day has not passed
        report = once(tmp_path, server, keep_traces=0)
    worst = {w["trace_id"] for alert in first.alerts for w in alert["worst"]}
    assert worst and not report.alerts  # the second pass fired nothing new
    state = MonitorState(tmp_path / "state")
    try:
        alerted = {
            t
            for (t,) in state.read(
                "SELECT DISTINCT json_extract(w.value, '$.trace_id') FROM"
                " alerts, json_each(alerts.alert, '$.worst') AS w"
            )
        }
    finally:
        state.close()
    assert alerted == worst
    held = {t for t, _, w in kept(tmp_path) if w != 0}  # besides the baseline window
    assert held == alerted
    snapshot = read_snapshot(tmp_path / "state")
    assert set(snapshot.traces) == alerted  # the viewer still shows their rows and evidence
    assert all(t["evidence"] for t in snapshot.traces.values())
    assert report.counts["judged"] == 60 and report.counts["forgotten"] == 60 - 10 - len(held)


def test_a_duration_misspelled_is_named_by_its_flag(tmp_path: Path) -> None:
    done = run(
        "monitor",
        "--once",
        "--state",
        tmp_path / "s",
        "--metrics",
        "recall@10",
        "--keep-traces",
        "3x",
    )
    assert done.returncode == 2
    assert "--keep-traces 3x: give a duration" in done.stderr
