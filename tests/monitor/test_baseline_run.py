"""`judge monitor --baseline-run`: a pinned run's per-row scores are the drop test's
baseline from the first window (no warm-up windows), the alert says which run; a run that
is not comparable (another judge, a metric missing) or a pin that is not there is refused,
and a baseline of too few windows names --baseline-windows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from judge.errors import JudgeError
from judge.llm.config import LLM
from judge.monitor.monitor import Monitor, MonitorConfig
from judge.monitor.state import MonitorState
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.monitor import START, judge_flags, pinned_run, rag_traces
from tests.helpers.traces import export, write_json_lines

PER_ROW = 2  # faithfulness asks the heuristic judge twice a row


def traces_folder(folder: Path, **options: Any) -> list[str]:
    folder.mkdir()
    ids: list[str] = []
    bodies = export(lambda provider: ids.extend(rag_traces(provider, 30, **options)), batch=4)
    write_json_lines(bodies, folder / "t.json")
    return ids


def config(tmp: Path, server: FakeLLMServer, state: str, **options: Any) -> MonitorConfig:
    llm = LLM(model="openai/fake-model", api_base=server.base_url, api_key="x")
    options.setdefault("window", "10")
    return MonitorConfig(
        state=tmp / state,
        llm=llm,
        metrics=["faithfulness"],
        cache=str(tmp / "cache.sqlite"),
        runs=tmp / "runs.sqlite",
        progress=False,
        **options,
    )


def once(cfg: MonitorConfig, folder: Path) -> Any:
    monitor = Monitor(cfg)
    try:
        return monitor.once(folder)
    finally:
        monitor.close()


def test_a_pinned_run_is_the_baseline_from_the_first_window(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    traces_folder(good)
    ids = traces_folder(bad, bad_from=0, first=100)
    with FakeLLMServer(heuristic_judge) as server:
        run_id = pinned_run(tmp_path, server)
        # A stream as good as the pinned run: every window checked, no alert.
        report = once(config(tmp_path, server, "s1", baseline_run="pinned"), good)
        assert [w["baseline"] for w in report.windows] == [False, False, False]
        assert report.alerts == [] and report.notes == []
        state = MonitorState(tmp_path / "s1")
        [(text,)] = state.read("SELECT state FROM detectors WHERE metric='faithfulness'")
        state.close()
        detector = json.loads(text)
        assert (detector["windows"], detector["baseline_rows"]) == (3, 40)
        assert detector["baseline_source"] == f"run {run_id}"
        # A stream below it: the alert comes in the first window, no K windows of warm-up.
        report = once(config(tmp_path, server, "s2", baseline_run=run_id[:6]), bad)
    first = report.alerts[0]
    assert first["window"] == 0
    assert first["baseline"]["run"] == run_id and first["baseline"]["source"] == f"run {run_id}"
    assert first["baseline"]["mean"] == 1.0 and first["baseline"]["scored"] == 40
    assert first["test"]["baseline_source"] == f"run {run_id}"
    assert first["test"]["statistic"] >= first["test"]["threshold"]
    assert {w["trace_id"] for w in first["worst"]} <= set(ids)


def test_the_alert_line_names_the_pinned_run(tmp_path: Path) -> None:
    traces_folder(tmp_path / "bad", bad_from=0)
    with FakeLLMServer(heuristic_judge) as server:
        run_id = pinned_run(tmp_path, server, rows=20)
        done = run(
            "monitor",
            "--once",
            "--watch",
            tmp_path / "bad",
            "--state",
            tmp_path / "state",
            *judge_flags(server, tmp_path),
            "--window",
            "10",
            "--baseline-run",
            "pinned",
            "--runs",
            tmp_path / "runs.sqlite",
            "--quiet",
        )
    assert done.returncode == 1, done.stderr  # --once: an alert fired
    assert "window 0: 10 rows" in done.stdout  # not a baseline window
    assert (
        # 10 rows all 0 against 20 all 1: the exact bounds, 1 - 0.025^(1/10) and 0.025^(1/20)
        "ALERT faithfulness in window 0: 0.000 [0.000, 0.308] against the baseline's 1.000 "
        f"[0.832, 1.000] (run {run_id}); worst traces"
    ) in done.stdout


def test_nothing_pinned_is_refused_with_how_to_pin(tmp_path: Path) -> None:
    traces_folder(tmp_path / "t")
    with FakeLLMServer(heuristic_judge) as server:
        pinned_run(tmp_path, server, rows=12)
        done = run("runs", "baseline", "--clear", "--runs", tmp_path / "runs.sqlite")
        assert done.returncode == 0, done.stderr
        with pytest.raises(JudgeError, match="baseline_run='pinned': no run is pinned") as err:
            Monitor(config(tmp_path, server, "state", baseline_run="pinned"))
        assert "judge runs baseline REF" in str(err.value)
        done = run(
            "monitor",
            "--once",
            "--state",
            tmp_path / "state",
            *judge_flags(server, tmp_path),
            "--baseline-run",
            "pinned",
            "--runs",
            tmp_path / "runs.sqlite",
        )
    assert done.returncode == 2
    assert "error: --baseline-run pinned: no run is pinned as the baseline" in done.stderr
    assert server.count() == 12 * PER_ROW  # the eval's: the monitor judged nothing


def test_a_run_without_a_monitored_metric_is_refused(tmp_path: Path) -> None:
    with FakeLLMServer(heuristic_judge) as server:
        run_id = pinned_run(tmp_path, server, rows=12)
        cfg = config(tmp_path, server, "state", baseline_run="pinned")
        cfg.metrics = ["faithfulness", "context_relevance"]
        with pytest.raises(JudgeError) as error:
            Monitor(cfg)
    assert str(error.value).startswith(
        f"baseline_run='pinned' (run {run_id}) has no scores of context_relevance (its "
        "metrics: faithfulness): pin a run that computed every monitored metric"
    )


def test_a_run_judged_by_another_judge_is_refused_unless_asked(tmp_path: Path) -> None:
    traces_folder(tmp_path / "t")
    with FakeLLMServer(heuristic_judge) as server:
        run_id = pinned_run(tmp_path, server, rows=12)
        db = sqlite3.connect(tmp_path / "runs.sqlite")
        prompts = json.loads(db.execute("SELECT prompts FROM runs").fetchone()[0])
        real_claims = prompts["claims"]
        prompts["claims"] = "0123456789abcdef"  # as if judged with an older claims prompt
        with db:
            db.execute("UPDATE runs SET prompts=?", (json.dumps(prompts),))
        db.close()
        flags = judge_flags(server, tmp_path, model="openai/other-model")
        args = ["monitor", "--once", "--watch", tmp_path / "t", "--state", tmp_path / "state"]
        args += [*flags, "--baseline-run", run_id, "--runs", tmp_path / "runs.sqlite"]
        done = run(*args)
        assert done.returncode == 2
        said = done.stderr
        assert f"--baseline-run {run_id} (run {run_id}) was judged by another judge" in said
        assert "judge model openai/fake-model (the monitor's: openai/other-model)" in said
        assert f"prompt versions claims 0123456789abcdef (the monitor's: {real_claims})" in said
        assert "--baseline-other-judge takes it all the same" in said
        assert server.count() == 12 * PER_ROW
        done = run(*args, "--baseline-other-judge", "--quiet")
        assert done.returncode == 0, done.stderr
        assert "30 traces judged" in done.stdout


def test_a_state_keeps_the_baseline_it_was_started_with(tmp_path: Path) -> None:
    traces_folder(tmp_path / "t")
    with FakeLLMServer(heuristic_judge) as server:
        once(config(tmp_path, server, "state"), tmp_path / "t")  # the first windows
        pinned_run(tmp_path, server, rows=12)
        with pytest.raises(JudgeError) as error:
            Monitor(config(tmp_path, server, "state", baseline_run="pinned"))
    assert "checks its windows against the baseline of the first windows" in str(error.value)
    assert "give no baseline_run=, or another --state" in str(error.value)


def test_too_few_baseline_windows_name_the_flag_under_the_cli(tmp_path: Path) -> None:
    traces_folder(tmp_path / "t")
    with FakeLLMServer(heuristic_judge) as server:
        args = ["monitor", "--once", "--watch", tmp_path / "t", "--state", tmp_path / "state"]
        args += [*judge_flags(server, tmp_path), "--window", "5", "--baseline-windows", "1"]
        done = run(*args)
    assert done.returncode == 0, done.stderr
    words = (
        "faithfulness has 5 scored row(s) in its baseline (the first window); a baseline "
        "needs at least 10 to bound its mean: take more windows as the baseline: raise "
        "--baseline-windows (now 1)"
    )
    assert words in done.stdout and words in done.stderr
    assert "baseline_windows" not in done.stdout + done.stderr


def test_a_run_s_judge_matters_only_for_judged_metrics(tmp_path: Path) -> None:
    """Retrieval metrics are computed from the row alone: a retrieval-only monitor takes a
    run judged by any model, with its scores (NaN ones kept as None, skipped by the test)."""
    from judge.monitor.baseline import run_baseline
    from judge.runs.store import RunStore
    from tests.helpers.runs import record

    out = tmp_path / "out"
    out.mkdir()
    lines = [{"row": n, "id": f"q{n}", "scores": {"ndcg@10": 0.5 + n / 100}} for n in range(12)]
    lines[3]["scores"]["ndcg@10"] = None  # written null when undefined
    (out / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    made = record(out_dir=str(out), metrics=["ndcg@10", "faithfulness"], baseline=True)
    with RunStore(tmp_path / "runs.sqlite") as store:
        store.add(made)
    found, baselines = run_baseline(
        "pinned", ["ndcg@10"], model=None, runs=tmp_path / "runs.sqlite"
    )
    assert found.id == made.id and list(baselines) == ["ndcg@10"]
    base = baselines["ndcg@10"]
    assert (base.run, base.source, len(base)) == (made.id, f"run {made.id}", 12)
    assert base[3] is None and base[4] == 0.54
    with pytest.raises(JudgeError, match=r"judge model openai/gpt-4o-mini \(the monitor's: none\)"):
        run_baseline(
            "pinned", ["ndcg@10", "faithfulness"], model=None, runs=tmp_path / "runs.sqlite"
        )


def scraped(monitor: Monitor) -> dict[tuple[str, str], float]:
    """The monitor's per-metric gauges as its registry serves them: (name, metric) -> value."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    text = generate_latest(monitor.registry).decode()
    return {
        (sample.name, sample.labels.get("metric", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_baseline_gauge_of_a_pinned_run_is_the_run_s_mean(tmp_path: Path) -> None:
    # A pinned run is the baseline: no window is. The gauge showed the first windows'
    # mean all the same (0.0 here, the drop itself), a baseline line at the drop in Grafana.
    traces_folder(tmp_path / "bad", bad_from=0, first=100)
    with FakeLLMServer(heuristic_judge) as server:
        pinned_run(tmp_path, server)
        monitor = Monitor(config(tmp_path, server, "state", baseline_run="pinned"))
        try:
            report = monitor.once(tmp_path / "bad")
            values = scraped(monitor)
        finally:
            monitor.close()
    assert report.alerts and report.alerts[0]["baseline"]["mean"] == 1.0
    assert values[("judge_monitor_window_mean", "faithfulness")] == 0.0
    assert values[("judge_monitor_baseline_mean", "faithfulness")] == 1.0


def answerless_trace(provider: Any, start: int) -> str:
    """A trace whose answer makes no claim: its row has no faithfulness score (NaN)."""
    from opentelemetry.trace import set_span_in_context

    from tests.helpers.rag_spans import KIND

    tracer = provider.get_tracer("tests.monitor")
    root = tracer.start_span("RAG", start_time=start)
    root.set_attribute(KIND, "CHAIN")
    root.set_attribute("input.value", "How long is the river?")
    child = tracer.start_span("retrieve", context=set_span_in_context(root), start_time=start)
    child.set_attribute(KIND, "RETRIEVER")
    child.set_attribute("retrieval.documents.0.document.id", "x")
    child.set_attribute("retrieval.documents.0.document.content", "The river is long.")
    child.end(end_time=start + 10**6)
    root.set_attribute("output.value", ".")
    root.end(end_time=start + 2 * 10**6)
    return format(root.get_span_context().trace_id, "032x")


def test_a_straggler_from_an_earlier_hour_is_not_the_baseline(tmp_path: Path) -> None:
    """The baseline is the first K windows closed, not the K lowest numbers: a trace whose
    start time is hours before the baseline's (a late export, a skewed clock) closes a
    window of its own later. It was taken as the baseline of the windows after it: a
    straggler without a score of the metric left it unchecked for good (a window of 30
    unfaithful answers raised no alert), one with a score moved the baseline gauge."""
    minute = 60 * 10**9
    hour = 60 * minute
    first, later = tmp_path / "first", tmp_path / "later"
    traces_folder(first)  # 30 faithful rows in the hour from START: the baseline window
    later.mkdir()
    bodies = export(
        lambda p: [
            answerless_trace(p, START - 5 * hour),
            # numbered from 200 (rows of their own), from START + 1 hour a minute apart
            rag_traces(p, 30, start=START + hour - 200 * minute, first=200, bad_from=0),
        ],
        batch=4,
    )
    write_json_lines(bodies, later / "t.json")
    with FakeLLMServer(heuristic_judge) as server:
        cfg = config(tmp_path, server, "state", window="1h", baseline_windows=1)
        report = once(cfg, first)
        assert [w["baseline"] for w in report.windows] == [True]
        monitor = Monitor(cfg)
        try:
            report = monitor.once(later)
            values = scraped(monitor)
        finally:
            monitor.close()
    numbers = [w["number"] - START // hour for w in report.windows]
    assert numbers == [-5, 1] and not any(w["baseline"] for w in report.windows)
    assert [(a["metric"], a["window"] - START // hour) for a in report.alerts] == [
        ("faithfulness", 1)
    ]
    assert report.alerts[0]["baseline"]["windows"] == [START // hour]
    assert values[("judge_monitor_baseline_mean", "faithfulness")] == 1.0


def test_an_alert_takes_a_pinned_run_s_figures_from_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alert's baseline mean and interval are the pinned run's, as its record keeps
    them. Each alert bootstrapped the whole run again, in the state's write transaction:
    34 s per alert for a run of 100,000 rows, the receiver's commits waiting behind it."""
    import numpy as np

    from judge.monitor import monitor as monitor_module
    from judge.monitor.windows import metric_summary
    from judge.runs.store import RunStore
    from tests.helpers.runs import record

    rows = 2000
    scores = np.random.default_rng(0).uniform(0.9, 1.0, rows).round(6)
    out = tmp_path / "gold"
    out.mkdir()
    lines = [{"row": n, "id": f"g{n}", "scores": {"faithfulness": s}} for n, s in enumerate(scores)]
    (out / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary = metric_summary(list(scores))
    made = record(
        out_dir=str(out),
        model="openai/fake-model",
        prompts={},
        summary={"faithfulness": summary},
        rows=rows,
        baseline=True,
    )
    with RunStore(tmp_path / "runs.sqlite") as store:
        store.add(made)
    traces_folder(tmp_path / "bad", bad_from=0, first=100)
    sizes: list[int] = []

    def summary_of(values: Any, bounds: Any = None) -> Any:
        sizes.append(len(values))
        return metric_summary(values, bounds)

    monkeypatch.setattr(monitor_module, "metric_summary", summary_of)
    with FakeLLMServer(heuristic_judge) as server:
        report = once(config(tmp_path, server, "state", baseline_run="pinned"), tmp_path / "bad")
    assert len(report.alerts) == 3
    for alert in report.alerts:
        assert {k: alert["baseline"][k] for k in summary} == summary
        assert alert["baseline"]["run"] == made.id
    assert max(sizes) < rows, sizes  # windows of 10 rows: never the run's 2,000 again


def test_baseline_windows_with_a_baseline_run_is_refused(tmp_path: Path) -> None:
    # Two baselines asked for: --baseline-windows was dropped without a word.
    from judge.runs.store import RunStore
    from tests.helpers.runs import record

    out = tmp_path / "out"
    out.mkdir()
    lines = [{"row": n, "id": f"q{n}", "scores": {"ndcg@10": 0.5}} for n in range(12)]
    (out / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    with RunStore(tmp_path / "runs.sqlite") as store:
        store.add(record(out_dir=str(out), metrics=["ndcg@10"], baseline=True))
    args = ["monitor", "--once", "--state", tmp_path / "state", "--metrics", "ndcg@10"]
    args += ["--runs", tmp_path / "runs.sqlite", "--baseline-run", "pinned"]
    done = run(*args)
    assert done.returncode == 0, done.stderr
    done = run(*args, "--state", tmp_path / "other", "--baseline-windows", "5")
    assert done.returncode == 2
    assert (
        "judge: error: --baseline-windows 5 takes the first windows as the baseline, and "
        "--baseline-run takes a run: give one of them"
    ) in done.stderr
    assert not (tmp_path / "other").exists()


def test_a_state_from_before_baseline_runs_keeps_its_first_windows(tmp_path: Path) -> None:
    """A state written before --baseline-run existed (format 1) recorded no baseline: its
    windows and detectors were made against its first windows. Restarted with a pinned
    run, it was taken silently (the detectors kept the windows' baseline, the alerts named
    it); it is refused as a state started with the first windows is."""
    from judge.cache.migrations import apply_in_order
    from judge.monitor.migrations import MIGRATIONS

    folder = tmp_path / "state"
    folder.mkdir()
    db = sqlite3.connect(folder / "monitor.sqlite", isolation_level=None)
    apply_in_order(db, MIGRATIONS[:1])
    db.execute("INSERT INTO settings (key, value) VALUES ('window', '10')")
    summary = {"number": 0, "start": None, "end": None, "rows": 10, "baseline": True}
    summary["metrics"] = {
        "faithfulness": {"scored": 10, "mean": 1.0, "ci_low": 1.0, "ci_high": 1.0}
    }
    db.execute(
        "INSERT INTO windows (number, start, end, closed_at, summary) VALUES (0, NULL, NULL, 0, ?)",
        (json.dumps(summary),),
    )
    db.close()
    with FakeLLMServer(heuristic_judge) as server:
        pinned_run(tmp_path, server, rows=12)
        with pytest.raises(JudgeError) as error:
            Monitor(config(tmp_path, server, "state", baseline_run="pinned"))
        assert "checks its windows against the baseline of the first windows" in str(error.value)
        Monitor(config(tmp_path, server, "state")).close()  # as it was started: taken


def test_a_run_whose_scores_of_a_metric_are_all_nan_is_refused(tmp_path: Path) -> None:
    """The guide: a run with no scores of a monitored metric is refused. A run that lists
    the metric but scored no row of it (every score NaN: the judge failed, the metric did
    not apply) was taken, and the metric left unchecked for the state's whole life."""
    from judge.monitor.baseline import run_baseline
    from judge.runs.store import RunStore
    from tests.helpers.runs import record

    out = tmp_path / "out"
    out.mkdir()
    lines = [
        {"row": n, "id": f"q{n}", "scores": {"faithfulness": None, "ndcg@10": 0.5}}
        for n in range(12)
    ]
    (out / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    made = record(out_dir=str(out), metrics=["faithfulness", "ndcg@10"], baseline=True)
    with RunStore(tmp_path / "runs.sqlite") as store:
        store.add(made)
    runs = tmp_path / "runs.sqlite"
    with pytest.raises(JudgeError) as error:
        run_baseline("pinned", ["faithfulness", "ndcg@10"], model=made.model, runs=runs)
    assert str(error.value).startswith(
        f"baseline_run='pinned' (run {made.id}) has no scores of faithfulness (12 rows, "
        "every score NaN): "
    )
    _, found = run_baseline("pinned", ["ndcg@10"], model=None, runs=runs)
    assert len(found["ndcg@10"]) == 12
