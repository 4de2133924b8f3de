"""`judge view --monitor STATE`: the page of a monitor state made in the test by the monitor
itself (the loopback fake judge over traces whose faithfulness drops at a known trace):
its windows, alert markers, baseline and worst traces are the state's; the state is read
while a monitor holds it and writes; every text is data, never markup."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from judge.errors import JudgeError
from judge.monitor.alerts import DropDetector
from judge.monitor.migrations import SCHEMA_VERSION
from judge.monitor.monitor import Monitor
from judge.monitor.snapshot import read_snapshot
from judge.monitor.state import MonitorState
from judge.testing import FakeLLMServer, heuristic_judge
from judge.view import build_monitor_view
from judge.view.monitor import monitor_data
from tests.helpers.cli import run
from tests.helpers.monitor import (
    BAD_ANSWER,
    MINUTE,
    pinned_run,
    post,
    rag_traces,
    serving,
    traces_file,
    wait_for,
)
from tests.helpers.monitor_view import (
    BAD_FROM,
    WINDOW,
    dropped_state,
    make_hostile,
    monitor_config,
    page_data,
)
from tests.helpers.traces import export
from tests.helpers.view import HOSTILE


@pytest.fixture(scope="module")
def dropped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A monitor state after faithfulness fell from 1 to 0 at trace 30 (window 3)."""
    return dropped_state(tmp_path_factory.mktemp("dropped"))


def state_rows(state: Path, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{state / 'monitor.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_the_page_holds_the_state_s_windows_alerts_baseline_and_worst_traces(
    dropped: dict[str, Any], tmp_path: Path
) -> None:
    index = build_monitor_view(dropped["state"], tmp_path / "page")
    assert index == tmp_path / "page" / "index.html"
    assert sorted(p.name for p in (tmp_path / "page" / "assets").iterdir()) == [
        "chart.js.LICENSE.md",
        "chart.umd.js",
        "dom.js",
        "monitor.js",
        "view.css",
    ]
    data = page_data(tmp_path / "page")

    # The windows: as many as the state closed, with their figures.
    stored = [json.loads(s) for (s,) in state_rows(dropped["state"], "SELECT summary FROM windows")]
    assert len(data["windows"]) == len(stored) == 60 // WINDOW
    assert [w["number"] for w in data["windows"]] == list(range(6))
    assert [w["baseline"] for w in data["windows"]] == [True] + [False] * 5
    assert [w["metrics"]["faithfulness"]["mean"] for w in data["windows"]] == [1, 1, 1, 0, 0, 0]
    assert [w["metrics"] for w in data["windows"]] == [s["metrics"] for s in stored]

    # The alert marker sits on the window whose alert the state keeps, after the drop.
    alerts = state_rows(dropped["state"], "SELECT id, window, metric FROM alerts")
    assert alerts, "the drop raised no alert"
    fired = {window for _, window, _ in alerts}
    assert min(fired) >= BAD_FROM // WINDOW
    assert [w["number"] for w in data["windows"] if w["alerts"]] == sorted(fired)
    assert all(w["alerts"] == ["faithfulness"] for w in data["windows"] if w["alerts"])
    assert [(a["id"], a["window"], a["metric"]) for a in data["alerts"]] == alerts

    # The baseline is the drop test's, as the state keeps it.
    [(saved,)] = state_rows(dropped["state"], "SELECT state FROM detectors")
    detector = DropDetector.from_json(json.loads(saved))
    baseline = data["baselines"]["faithfulness"]
    assert baseline["mean"] == detector.baseline_mean == 1.0
    assert (baseline["ci_low"], baseline["ci_high"]) == detector.baseline_interval
    assert baseline["reference"] == detector.reference
    assert baseline["source"] == "the first window"
    assert baseline["rows"] == WINDOW
    assert baseline["statistic"] == pytest.approx(detector.statistic)
    assert baseline["threshold"] == detector.threshold == 1000
    assert baseline["unchecked"] is None

    # Each alert's worst traces are traces after the drop, with the judge's evidence, and
    # link to their judged rows.
    first = data["alerts"][0]
    record = dropped["report"].alerts[0]
    assert first["current"] == record["current"]
    assert first["statistic"] == record["test"]["statistic"] >= first["threshold"]
    assert first["baseline"]["source"] == "the first window"
    worst = [w["trace_id"] for w in first["worst"]]
    assert worst == [w["trace_id"] for w in record["worst"]] and len(worst) == 3
    assert set(worst) <= set(dropped["ids"][BAD_FROM:])
    for item in first["worst"]:
        assert item["score"] == 0.0
        assert [(c["claim"], c["verdict"]) for c in item["claims"]] == [(BAD_ANSWER, "not_found")]
        assert "not in any context" in item["evidence"]
        row = data["traces"][item["trace_id"]]
        assert (row["answer"], row["scores"]) == (BAD_ANSWER, {"faithfulness": 0.0})
        n = dropped["ids"].index(item["trace_id"])
        assert row["question"] == f"How long is river {n}?"
        assert row["contexts"] == [f"Document {n} says river {n} is {n * 100} km long."]
        assert row["window"] == first["window"]

    # The counts: received, sampled, judged, skipped by reason.
    counts = data["counts"]
    assert counts["judged"] == 60 and counts["skipped:no_retriever"] == 1
    assert counts["skipped"] == 1 and counts.get("over_budget", 0) == 0
    assert counts["judge_requests"] == dropped["requests"]
    assert counts == dropped["report"].counts


def test_the_view_reads_the_state_without_writing_it(
    dropped: dict[str, Any], tmp_path: Path
) -> None:
    """The state's files keep their bytes. A read-only open of a WAL database whose -wal and
    -shm are absent (a stopped monitor removes them) makes them: SQLite's own index, and a
    log with nothing in it; whether they exist before depends on what read the fixture's
    state first, so the test holds in either case."""
    state = tmp_path / "state"
    shutil.copytree(dropped["state"], state)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in state.iterdir()}
    build_monitor_view(state, tmp_path / "page")
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in state.iterdir()}
    assert {name: after[name] for name in before} == before
    made = set(after) - set(before)
    assert made <= {"monitor.sqlite-wal", "monitor.sqlite-shm"}
    if "monitor.sqlite-wal" in made:
        assert (state / "monitor.sqlite-wal").stat().st_size == 0  # no page written


def test_the_view_reads_while_a_monitor_holds_the_state_and_another_writer_waits(
    tmp_path: Path,
) -> None:
    """A monitor serving on the state, and a transaction of another connection held open
    in the middle of it: the view is written at once from the last committed batch, and
    neither the writer nor the monitor waits for the view."""
    bodies = export(lambda p: rag_traces(p, 20, bad_from=None), batch=8)
    more = export(lambda p: rag_traces(p, 10, first=20), batch=8)
    with (
        FakeLLMServer(heuristic_judge) as server,
        serving(monitor_config(tmp_path, server, linger=0.2), poll=0.05) as (monitor, base),
    ):
        for body in bodies:
            assert post(f"{base}/v1/traces", body, "application/x-protobuf")[0] == 200
        wait_for(lambda: len(monitor.state.read("SELECT number FROM windows")) == 2)
        writer = sqlite3.connect(tmp_path / "state" / "monitor.sqlite", isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # the write lock, as a monitor's batch holds it
        writer.execute("UPDATE counts SET value=value+1000 WHERE name='spans'")
        took = time.monotonic()
        build_monitor_view(tmp_path / "state", tmp_path / "page")
        took = time.monotonic() - took
        assert took < 5, f"the view waited {took:.1f} s for the writer"
        data = page_data(tmp_path / "page")
        assert len(data["windows"]) == 2
        assert data["counts"]["spans"] == 40  # the writer's uncommitted change is not seen
        writer.execute("ROLLBACK")
        writer.close()

        # The view is written again and again while the monitor receives and judges more.
        stop = threading.Event()
        built: list[int] = []
        failed: list[BaseException] = []

        def rebuild() -> None:
            while not stop.is_set():
                try:
                    build_monitor_view(tmp_path / "state", tmp_path / "page")
                    built.append(len(page_data(tmp_path / "page")["windows"]))
                except BaseException as exc:
                    failed.append(exc)
                    return

        thread = threading.Thread(target=rebuild)
        thread.start()
        try:
            for body in more:
                assert post(f"{base}/v1/traces", body, "application/x-protobuf")[0] == 200
            wait_for(lambda: len(monitor.state.read("SELECT number FROM windows")) == 3)
        finally:
            stop.set()
            thread.join(60)
        assert not failed, failed
        assert built and built == sorted(built)  # never a window lost between two reads
    build_monitor_view(tmp_path / "state", tmp_path / "page")
    assert len(page_data(tmp_path / "page")["windows"]) == 3


def test_hostile_names_ids_and_reasons_are_data_not_markup(
    dropped: dict[str, Any], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    shutil.copytree(dropped["state"], state)
    make_hostile(state)
    build_monitor_view(state, tmp_path / "page")
    script = (tmp_path / "page" / "data.js").read_text(encoding="utf-8")
    assert "<" not in script and ">" not in script  # nothing in data.js can end a script
    data = page_data(tmp_path / "page")
    assert data["metrics"] == [HOSTILE]
    assert data["windows"][-1]["metrics"][HOSTILE]["mean"] == 0.0
    assert data["alerts"][0]["metric"] == HOSTILE
    assert data["alerts"][0]["worst"][0]["trace_id"] == HOSTILE
    assert data["traces"][HOSTILE]["answer"] == BAD_ANSWER
    assert data["counts"][f"skipped:{HOSTILE}"] == 1
    assert data["baselines"][HOSTILE]["mean"] == 1.0
    html = (tmp_path / "page" / "index.html").read_text(encoding="utf-8")
    assert "<script>" not in html.replace('<script src="', "")


def test_a_state_that_is_not_one_is_refused_with_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(JudgeError, match=r"no monitor state in .*judge monitor was given"):
        build_monitor_view(tmp_path / "nowhere", tmp_path / "page")
    (tmp_path / "other").mkdir()
    sqlite3.connect(tmp_path / "other" / "monitor.sqlite").execute("CREATE TABLE t (x)").close()
    with pytest.raises(JudgeError, match="not a judge monitor state"):
        build_monitor_view(tmp_path / "other", tmp_path / "page")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "monitor.sqlite").touch()
    with pytest.raises(JudgeError, match="holds no monitor state yet"):
        build_monitor_view(tmp_path / "empty", tmp_path / "page")
    MonitorState(tmp_path / "newer").close()
    db = sqlite3.connect(tmp_path / "newer" / "monitor.sqlite")
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(JudgeError, match="written by a newer judge"):
        read_snapshot(tmp_path / "newer")
    assert not (tmp_path / "page").exists()  # nothing written for a refused state


def test_an_empty_state_gives_a_page_that_says_so(tmp_path: Path) -> None:
    MonitorState(tmp_path / "state").close()
    build_monitor_view(tmp_path / "state", tmp_path / "page")
    data = page_data(tmp_path / "page")
    assert (data["windows"], data["alerts"], data["metrics"]) == ([], [], [])
    assert data["counts"]["spans"] == 0


def test_the_cli_writes_the_monitor_page_and_refuses_runs_beside_it(
    dropped: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "page"
    done = run("view", "--monitor", dropped["state"], "--out", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {(out / 'index.html').resolve()}"
    assert len(page_data(out)["windows"]) == 6
    done = run("view", "--monitor", tmp_path / "nowhere", "--out", out)
    assert done.returncode == 2
    assert "no monitor state in" in done.stderr and "--state" in done.stderr
    done = run("view", "--monitor", dropped["state"], "--runs", "x.sqlite")
    assert done.returncode == 2 and "--runs and --monitor: give one" in done.stderr


def test_a_pinned_run_is_named_as_the_baseline_and_no_window_is_one(tmp_path: Path) -> None:
    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 30, bad_from=20))
    with FakeLLMServer(heuristic_judge) as server:
        run_id = pinned_run(tmp_path, server)
        config = monitor_config(
            tmp_path, server, baseline_run="pinned", runs=str(tmp_path / "runs.sqlite")
        )
        monitor = Monitor(config)
        try:
            monitor.once(tmp_path / "otel")
        finally:
            monitor.close()
    data = monitor_data(tmp_path / "state")
    assert data["settings"]["baseline"] == f"run {run_id}"
    assert [w["baseline"] for w in data["windows"]] == [False, False, False]
    baseline = data["baselines"]["faithfulness"]
    assert (baseline["source"], baseline["mean"], baseline["rows"]) == (f"run {run_id}", 1.0, 40)
    [(saved,)] = state_rows(tmp_path / "state", "SELECT state FROM detectors")
    assert (baseline["ci_low"], baseline["ci_high"]) == tuple(
        json.loads(saved)["baseline_interval"]
    )
    assert [a["window"] for a in data["alerts"]] == [2]
    assert data["alerts"][0]["baseline"]["run"] == run_id


def test_an_unchecked_metric_says_why_and_hourly_windows_keep_their_times(tmp_path: Path) -> None:
    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 9, step=20 * MINUTE))
    with FakeLLMServer(heuristic_judge) as server:
        monitor = Monitor(monitor_config(tmp_path, server, window="1h", baseline_windows=2))
        try:
            monitor.once(tmp_path / "otel")
        finally:
            monitor.close()
    data = monitor_data(tmp_path / "state")
    assert [(w["start"], w["baseline"]) for w in data["windows"]] == [
        ("2026-11-30T01:00:00.000000Z", True),
        ("2026-11-30T02:00:00.000000Z", True),
        ("2026-11-30T03:00:00.000000Z", False),
    ]
    baseline = data["baselines"]["faithfulness"]
    # No drop test: the baseline windows' mean, no interval, and why it is not checked.
    assert (baseline["mean"], baseline["rows"], baseline["ci_low"]) == (1.0, 6, None)
    assert baseline["source"] == "the first 2 windows"
    assert baseline["unchecked"].startswith("faithfulness has 6 scored row(s) in its baseline")
    assert data["alerts"] == []


def test_a_custom_check_s_state_and_alert_show_without_the_drop_test_s_figures(
    tmp_path: Path,
) -> None:
    """A `WindowCheck` of the caller's keeps a state and alerts of its own making: the page
    shows its alert and the baseline windows' mean, and none of the drop test's figures."""
    (tmp_path / "otel").mkdir()
    traces_file(tmp_path / "otel" / "t.json", lambda p: rag_traces(p, 16, bad_from=12))

    def check(
        metric: str, baseline: Any, window: Any, state: Any, *, number: int
    ) -> tuple[Any, Any]:
        drop = sum(baseline) / len(baseline) - sum(window) / len(window)
        return ({"statistic": drop} if drop > 0.5 else None), (state or 0) + 1

    with FakeLLMServer(heuristic_judge) as server:
        monitor = Monitor(monitor_config(tmp_path, server, window="4", check=check))
        try:
            monitor.once(tmp_path / "otel")
        finally:
            monitor.close()
    data = monitor_data(tmp_path / "state")
    baseline = data["baselines"]["faithfulness"]
    assert (baseline["mean"], baseline["rows"], baseline["source"]) == (1.0, 4, "the first window")
    assert (baseline["ci_low"], baseline["reference"], baseline["statistic"]) == (None, None, None)
    [alert] = data["alerts"]
    assert (alert["window"], alert["statistic"], alert["threshold"]) == (3, 1.0, None)
    assert [w["alerts"] for w in data["windows"]] == [[], [], [], ["faithfulness"]]
    assert len(alert["worst"]) == 3 and set(data["traces"]) == {
        w["trace_id"] for w in alert["worst"]
    }


def test_nan_infinite_and_huge_figures_of_a_window_show_as_no_number(tmp_path: Path) -> None:
    """A window's figures that are no finite float (NaN, inf, an integer past a float's
    range) are shown as missing: no internal error, no Infinity drawn."""
    state = MonitorState(tmp_path / "state")
    try:
        with state.writing() as db:
            db.execute(
                "INSERT INTO windows VALUES (1, 'a', 'b', 0, ?)",
                (
                    '{"number": 1, "rows": 3, "metrics": {"faithfulness": {"scored": 1'
                    + "0" * 400
                    + ', "mean": NaN, "ci_low": -Infinity, "ci_high": 1e999}}}',
                ),
            )
    finally:
        state.close()
    build_monitor_view(tmp_path / "state", tmp_path / "page")
    figures = page_data(tmp_path / "page")["windows"][0]["metrics"]["faithfulness"]
    assert figures == {"scored": None, "mean": None, "ci_low": None, "ci_high": None}


def test_a_record_of_the_state_that_is_not_json_is_said_damaged(tmp_path: Path) -> None:
    """A window summary cut short (a state edited or damaged) is refused as a damaged state
    with what to do, not an internal error."""
    state = MonitorState(tmp_path / "state")
    try:
        with state.writing() as db:
            db.execute("INSERT INTO windows VALUES (1, 'a', 'b', 0, ?)", ('{"number": 1, "ro',))
    finally:
        state.close()
    with pytest.raises(JudgeError, match=r"cannot be read .*give another state folder"):
        build_monitor_view(tmp_path / "state", tmp_path / "page")
    done = run("view", "--monitor", tmp_path / "state", "--out", tmp_path / "page")
    assert done.returncode == 2 and "internal error" not in done.stderr, done.stderr
