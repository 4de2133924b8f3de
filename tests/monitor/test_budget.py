"""`judge monitor --budget`: requests or dollars per hour or day (dollars at the dry run's
estimate of each row), stratified over the period, counted at the fake judge; what was
spent survives kill -9 and a restart in the same day; old spellings and old states kept."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from judge.cache.migrations import apply_in_order
from judge.errors import JudgeError
from judge.llm.config import LLM
from judge.monitor.budget import DAY, HOUR, Budget, parse_budget
from judge.monitor.migrations import MIGRATIONS
from judge.monitor.monitor import Monitor, MonitorConfig
from judge.monitor.state import MonitorState
from judge.run.dry_run import dry_run
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.monitor import START, good_answer, rag_traces, state_counts, wait_for
from tests.helpers.traces import export, write_json_lines

PER_ROW = 2  # faithfulness asks the heuristic judge twice a row: the claims, their verdicts
PRICED = "openai/gpt-4o-mini"  # in litellm's price map; served by the fake judge
HOUR_NS = 3600 * 10**9


@pytest.mark.parametrize(
    ("given", "budget"),
    [
        (24, Budget(24)),  # Python's int: requests per hour, as before
        ("600", Budget(600)),  # the CLI's spelling before: requests per hour
        ("200/h", Budget(200)),
        ("200/hour", Budget(200)),
        ("5000/day", Budget(5000, seconds=DAY)),
        ("5000/d", Budget(5000, seconds=DAY)),
        ("$3/day", Budget(3.0, dollars=True, seconds=DAY)),
        ("$0.25/h", Budget(0.25, dollars=True, seconds=HOUR)),
        ("$2", Budget(2.0, dollars=True)),
        (" $ 3 / Day ", Budget(3.0, dollars=True, seconds=DAY)),
    ],
)
def test_budget_spellings(given: Any, budget: Budget) -> None:
    assert parse_budget(given) == budget


@pytest.mark.parametrize("given", ["3.5/h", "$3/week", "abc", "-5", "5/day/h", "$"])
def test_a_budget_misspelled_says_the_forms(given: str) -> None:
    with pytest.raises(JudgeError, match=r"give requests or dollars per hour or day: 200/h"):
        parse_budget(given)


def test_the_steps_allow_a_share_of_the_period_each() -> None:
    hourly, daily = Budget(24), Budget(48, seconds=DAY)
    assert hourly.allowed(0) == 2  # the first 5 minutes: 1/12
    assert hourly.allowed(HOUR_NS - 1) == 24
    assert daily.allowed(HOUR_NS) == 4  # the day's second hour: 2/24
    assert daily.allowed(24 * HOUR_NS - 1) == 48


def row_of(n: int) -> dict[str, Any]:
    """The row `rag_traces` makes of trace n, for the dry run's price."""
    return {
        "question": f"How long is river {n}?",
        "answer": good_answer(n),
        "contexts": [f"Document {n} says river {n} is {n * 100} km long."],
    }


def row_cost(numbers: range) -> float:
    """The dry run's dollars for one row of these traces: equal for all (same lengths)."""
    costs = {
        dry_run([row_of(n)], metrics=["faithfulness"], llm=LLM(model=PRICED)).total.cost
        for n in numbers
    }
    [cost] = costs
    assert cost is not None and cost > 0
    return cost


def traces_folder(folder: Path, count: int, **options: Any) -> Path:
    folder.mkdir()
    bodies = export(lambda provider: rag_traces(provider, count, **options), batch=4)
    write_json_lines(bodies, folder / "t.json")
    return folder


def once(tmp: Path, server: FakeLLMServer, folder: Path, model: str, budget: Any) -> Any:
    monitor = Monitor(
        MonitorConfig(
            state=tmp / "state",
            llm=LLM(model=model, api_base=server.base_url, api_key="x"),
            metrics=["faithfulness"],
            cache=str(tmp / "cache.sqlite"),
            budget=budget,
            progress=False,
        )
    )
    try:
        return monitor.once(folder)
    finally:
        monitor.close()


def test_a_daily_request_budget_gives_a_burst_its_hour_s_share(tmp_path: Path) -> None:
    # 12 traces a second apart in the day's second hour (01:00): 2/24 of the day's budget.
    folder = traces_folder(tmp_path / "t", 12, step=10**9)
    with FakeLLMServer(heuristic_judge) as server:
        report = once(tmp_path, server, folder, "openai/fake-model", "48/day")
        assert (report.counts["judged"], report.counts["over_budget"]) == (2, 10)
        assert server.count() == 2 * PER_ROW


def test_a_dollar_budget_is_spent_at_the_dry_run_s_price(tmp_path: Path) -> None:
    cost = row_cost(range(10, 22))
    burst = traces_folder(tmp_path / "burst", 12, step=10**9, first=10)
    spread = traces_folder(tmp_path / "spread", 12, step=5 * 60 * 10**9, first=10)
    with FakeLLMServer(heuristic_judge) as server:
        # An hour's dollars for 2.5 rows per 5-minute step: a burst gets 2 rows.
        budget = f"${12 * 2.5 * cost:.12f}/h"
        report = once(tmp_path / "a", server, burst, PRICED, budget)
        assert (report.counts["judged"], report.counts["over_budget"]) == (2, 10)
        assert server.count() == 2 * PER_ROW
        # One row per step fits: all are judged.
        report = once(tmp_path / "b", server, spread, PRICED, budget)
        assert report.counts["judged"] == 12
        assert server.count() == 14 * PER_ROW


def test_a_dollar_budget_without_a_price_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JudgeError) as error:
        MonitorConfig(state=tmp_path, llm=LLM(model="openai/fake-model"), budget="$3/day")
    assert str(error.value).startswith(
        "budget='$3/day': the price of openai/fake-model is unknown (not in litellm's price "
        "map), so no row can be priced in dollars: give the budget in requests"
    )
    done = run(
        "monitor",
        "--once",
        "--state",
        tmp_path / "state",
        "--model",
        "openai/fake-model",
        "--budget",
        "$3/day",
    )
    assert done.returncode == 2
    assert "judge: error: --budget '$3/day': the price of openai/fake-model" in done.stderr
    assert "give the budget in requests (--budget 200/h or '5000/day')" in done.stderr


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def send(base: str, count: int, first: int) -> None:
    """`count` traces numbered from `first`, exported by the real SDK to the monitor."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    exporter = OTLPSpanExporter(endpoint=f"{base}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=4))
    rag_traces(provider, count, first=first, step=10**9)
    provider.shutdown()


def test_kill_9_keeps_the_day_s_spend(tmp_path: Path) -> None:
    """Dollars spent in a day are in the state: a monitor killed with SIGKILL and started
    again in the same day has only what the day left, not a fresh budget."""
    cost = row_cost(range(10, 30))
    # 30 rows' worth a day: the day's second hour allows 2/24 of it, 2.5 rows.
    budget = f"${30 * cost:.12f}/day"
    state = tmp_path / "state"
    flags = ["--model", PRICED, "--api-key", "x", "--cache", str(tmp_path / "cache.sqlite")]
    flags += ["--metrics", "faithfulness", "--budget", budget, "--window", "100"]
    with FakeLLMServer(heuristic_judge) as server:
        flags += ["--api-base", server.base_url]
        port = free_port()
        command = [sys.executable, "-m", "judge", "monitor", "--listen", f"127.0.0.1:{port}"]
        command += ["--state", str(state), "--linger", "0.2", "--batch", "1", *flags]
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, OPENAI_API_KEY="x"),
        )
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert process.poll() is None, process.communicate()
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=5):
                    return True
            except OSError:
                return False

        try:
            wait_for(up)
            send(base, 6, first=10)  # 01:00:10 to 01:00:15
            wait_for(lambda: state_counts(state) == {"judged": 2, "over_budget": 4})
        finally:
            process.kill()  # SIGKILL: no clean-up at all
            process.wait(30)
        assert server.count() == 2 * PER_ROW
        # Started again: 3 more traces in the same hour find its share spent; 2 in the
        # day's fourth hour (4/24 of the day: 5 rows, 2 spent) are judged.
        later = tmp_path / "later"
        later.mkdir()
        bodies = export(lambda p: rag_traces(p, 3, first=20, step=10**9), batch=4)
        bodies += export(
            lambda p: rag_traces(p, 2, first=23, start=START + 2 * HOUR_NS, step=10**9), batch=4
        )
        write_json_lines(bodies, later / "t.json")
        done = run("monitor", "--once", "--watch", later, "--state", state, *flags, "--quiet")
        assert done.returncode == 0, done.stderr
        assert state_counts(state) == {"judged": 4, "over_budget": 7}
        assert server.count() == 4 * PER_ROW


def test_a_state_of_format_1_keeps_its_hours_spent(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    db = sqlite3.connect(folder / "monitor.sqlite", isolation_level=None)
    apply_in_order(db, MIGRATIONS[:1])
    hour = START // HOUR_NS
    db.execute("INSERT INTO budget (hour, spent) VALUES (?, 24), (?, 6)", (hour, hour + 1))
    db.close()
    state = MonitorState(folder)
    try:
        spent = state.read("SELECT seconds, number, requests, dollars FROM spend ORDER BY 1, 2")
    finally:
        state.close()
    assert spent == [(HOUR, hour, 24, 0.0), (HOUR, hour + 1, 6, 0.0), (DAY, hour // 24, 30, 0.0)]
    # The hour's requests are spent: a burst in it gets nothing more under 24/h.
    traces = traces_folder(tmp_path / "t", 4, step=10**9)
    with FakeLLMServer(heuristic_judge) as server:
        report = once(tmp_path, server, traces, "openai/fake-model", 24)
        assert report.counts["over_budget"] == 4
        assert server.count() == 0


@pytest.mark.parametrize("given", ["9" * 400, "$" + "9" * 400 + "/day", "9" * 400 + ".5/h"])
def test_a_budget_too_large_for_a_number_is_refused(given: str) -> None:
    # Digits past a float's range read as infinity: an error in the flag's words, not
    # an OverflowError from int(inf), nor an infinite ceiling taken as one.
    with pytest.raises(JudgeError, match=r"budget=.*give a finite number"):
        parse_budget(given)


@pytest.mark.parametrize(
    "amount", [float("inf"), float("nan"), 10**400], ids=["inf", "nan", "1e400"]
)
def test_a_budget_object_of_no_finite_amount_is_refused(amount: float) -> None:
    with pytest.raises(JudgeError, match=r"give a finite number"):
        Budget(amount)
    with pytest.raises(JudgeError, match=r"give a finite number"):
        Budget(amount, dollars=True, seconds=DAY)


def test_a_budget_too_large_under_the_cli_is_a_usage_error(tmp_path: Path) -> None:
    done = run(
        "monitor", "--once", "--state", tmp_path / "state", "--metrics", "ndcg@10",
        "--budget", "9" * 400,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "judge: error: --budget 999" in done.stderr
    assert "give a finite number" in done.stderr


def test_kill_9_while_judging_charges_each_row_once(tmp_path: Path) -> None:
    """Killed between the charge (made when the trace completes, with its row pending) and
    the record of its judgment: restarted, the pending rows are judged without a second
    charge, and none is lost."""
    folder = traces_folder(tmp_path / "t", 10, step=10**9, first=10)
    state = tmp_path / "state"
    flags = ["--model", "openai/fake-model", "--api-key", "x", "--metrics", "faithfulness"]
    flags += ["--cache", str(tmp_path / "cache.sqlite"), "--budget", "1200/h", "--window", "100"]
    with FakeLLMServer(heuristic_judge) as server:
        server.latency = 0.15  # slow enough to be killed mid-way
        flags += ["--api-base", server.base_url]
        command = [sys.executable, "-m", "judge", "monitor", "--watch", str(folder)]
        command += ["--state", str(state), "--linger", "0", "--batch", "2", *flags]
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, OPENAI_API_KEY="x"),
        )
        try:
            wait_for(lambda: (state / "monitor.sqlite").exists())
            wait_for(lambda: state_counts(state).get("judged", 0) >= 2)
        finally:
            process.kill()  # SIGKILL: no clean-up at all
            process.wait(30)
        counts = state_counts(state)
        assert counts.get("pending", 0) > 0, counts  # killed with rows charged, not judged
        spend = MonitorState(state)
        try:
            charged = spend.read("SELECT requests FROM spend WHERE seconds=3600")
        finally:
            spend.close()
        assert charged == [(10 * PER_ROW,)]  # all ten charged at completion
        server.latency = 0
        done = run("monitor", "--once", "--watch", folder, "--state", state, *flags, "--quiet")
        assert done.returncode == 0, done.stderr
    assert state_counts(state) == {"judged": 10}
    spend = MonitorState(state)
    try:
        assert spend.read("SELECT requests FROM spend WHERE seconds=3600") == charged
    finally:
        spend.close()


def test_a_batch_priced_at_once_costs_each_row_what_the_dry_run_says_of_it() -> None:
    from judge.run.dry_run import row_estimates

    rows = [row_of(n) for n in (1, 22, 333)]
    rows[1]["answer"] = "A longer answer. It has three sentences. Each is a claim."
    llm = LLM(model=PRICED)
    alone = [dry_run([row], metrics=["faithfulness"], llm=llm).total for row in rows]
    together = row_estimates(rows, metrics=["faithfulness"], llm=llm)
    assert together == alone
    assert len({e.chat_requests for e in together}) == 1  # claims, then their verdicts
    assert len({e.cost for e in together}) == 3  # priced by each row's own tokens


def test_rows_are_priced_outside_the_transaction_that_charges_them(tmp_path: Path) -> None:
    """Pricing takes milliseconds a row: `MonitorState.complete` calls its `price` with the
    batch's rows before the transaction that records them, the write lock free meanwhile
    (another connection takes it without waiting), and then `choose` for each."""
    from judge.monitor.state import PENDING, Completed
    from judge.traces.otlp import spans_of_protobuf

    bodies = export(lambda provider: rag_traces(provider, 5), batch=4)
    state = MonitorState(tmp_path / "state")
    priced: list[str] = []
    chosen: list[str] = []

    def price(rows: list[tuple[str, dict]]) -> None:
        other = sqlite3.connect(tmp_path / "state" / "monitor.sqlite", timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")  # "database is locked" at once if it were held
            other.execute("ROLLBACK")
        finally:
            other.close()
        priced.extend(trace_id for trace_id, row in rows if row["question"])

    def choose(db: sqlite3.Connection, trace_id: str, row: dict) -> Completed:
        assert trace_id in priced  # priced before
        chosen.append(trace_id)
        return Completed(PENDING)

    try:
        state.ingest([spans_of_protobuf(body) for body in bodies], 1.0)
        assert state.complete(2.0, 0.0, choose, everything=True, price=price) == 5
        assert state.counts()["pending"] == 5
    finally:
        state.close()
    assert len(priced) == 5 and sorted(chosen) == sorted(priced)
