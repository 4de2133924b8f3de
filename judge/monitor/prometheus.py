"""The monitor's Prometheus metrics (`judge monitor --metrics-port`), read from its state
when scraped, served in the Prometheus text format by `prometheus_client`.

**Why a collector that reads the state, not gauges and counters updated as things
happen.** Every figure a scrape shows is already in the state, written in the transaction
that made it true (a trace judged, a window closed, an alert fired). Read from there, the
numbers are the state's own: counters survive a restart (even after kill -9) without
going back to 0 or counting twice, and a scrape cannot show an alert whose transaction was
rolled back. Instruments updated in the many places where things happen would repeat the
state's bookkeeping, drift from it at the first missed update, and start from 0 at each
restart (which Prometheus's `rate` forgives, but a count of alerts or judged traces read
off a dashboard would be wrong). The price is a few indexed queries per scrape, on a
connection of its own (SQLite's WAL lets it read while the monitor writes); the receiver's
queue, which is no state, is read as it is at the scrape.

Each monitor owns its `CollectorRegistry` (`Monitor.registry`): no global default
registry, so two monitors in one process each expose their own state.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from judge.errors import JudgeError
from judge.monitor.alerts import DropDetector
from judge.monitor.budget import Budget
from judge.monitor.state import (
    JUDGED,
    LATE_AFTER,
    LATE_OPEN,
    OUTBOX_DELIVERED,
    OUTBOX_PENDING,
    OUTBOX_REFUSED,
    OVER_BUDGET,
    PENDING,
    SAMPLED_OUT,
    SKIPPED,
    MonitorState,
    counts_of,
)
from judge.traces.extract import parse_since

PREFIX = "judge_monitor_"
NS = 1_000_000_000


class MonitorCollector(Collector):
    """The monitor's metrics, read from its state at each scrape (see the module).

    Args:
        folder: the --state folder.
        baseline_windows: the first K windows are the baseline (the monitor's setting).
        budget: the monitor's budget, or None.
        queue_capacity: requests the receiver holds before answering 503.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        baseline_windows: int,
        budget: Budget | None = None,
        queue_capacity: int | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.baseline_windows = baseline_windows
        self.budget = budget
        self.queue_capacity = queue_capacity
        # The receiver's queue length, while a receiver runs (None otherwise). Read from
        # the scrape's thread: asyncio.Queue.qsize is a len() of a deque, a snapshot.
        self.queue_depth: Callable[[], int] | None = None
        self._state: MonitorState | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the collector's connection to the state."""
        with self._lock:
            if self._state is not None:
                self._state.close()
                self._state = None

    def open(self) -> None:
        """Open the collector's connection to the state now (else at the first scrape):
        its monitor opens it beside its own, so a state folder deleted while the monitor
        runs is still read from the file the monitor writes. A reader never makes a state
        of its own: none there is a MonitorStateError."""
        with self._lock:
            if self._state is None:
                self._state = MonitorState(self.folder, create=False)

    def collect(self) -> Iterator[Metric]:
        """The metrics, as the state holds them now (one read transaction)."""
        self.open()
        with self._lock:
            assert self._state is not None
            with self._state.snapshot() as db:
                families = list(self._families(db))
        yield from families

    def _families(self, db: sqlite3.Connection) -> Iterator[Metric]:
        counts = counts_of(db)
        yield from self._traffic(db, counts)
        yield from self._budget(db)
        yield from self._windows(db)
        yield self._outbox(db)

    def _outbox(self, db: sqlite3.Connection) -> Metric:
        """The alerts queued for the webhook, by status: a pending one that stays is a
        webhook that does not take them."""
        family = GaugeMetricFamily(
            PREFIX + "webhook_alerts",
            "Alerts queued for --webhook, by status: pending (not taken yet: retried), "
            "delivered, refused (a 4xx: not retried).",
            labels=["status"],
        )
        found = dict.fromkeys((OUTBOX_PENDING, OUTBOX_DELIVERED, OUTBOX_REFUSED), 0)
        found.update({s: int(n) for s, n in db.execute(_OUTBOX)})
        for status, n in found.items():
            family.add_metric([status], n)
        return family

    def _traffic(self, db: sqlite3.Connection, counts: dict[str, int]) -> Iterator[Metric]:
        spans = CounterMetricFamily(
            PREFIX + "spans",
            "Spans that came to the monitor, by outcome: kept, duplicate (received before), "
            "late (their trace was complete), rejected (malformed ids).",
            labels=["outcome"],
        )
        duplicate, late = counts["duplicate_spans"], counts["late_spans"]
        spans.add_metric(["kept"], counts["spans"] - duplicate - late)
        spans.add_metric(["duplicate"], duplicate)
        spans.add_metric(["late"], late)
        spans.add_metric(["rejected"], counts["rejected_spans"])
        yield spans
        yield CounterMetricFamily(
            PREFIX + "bad_lines",
            "Lines of followed files that are no OTLP request.",
            value=counts["bad_lines"],
        )
        completed = sum(v for k, v in counts.items() if k in _STATUSES)
        yield CounterMetricFamily(
            PREFIX + "traces_received",
            "Traces completed (each trace id once), whatever became of them.",
            value=completed,
        )
        skipped = CounterMetricFamily(
            PREFIX + "traces_skipped",
            "Traces that gave no row, by reason (as judge traces extract says it).",
            labels=["reason"],
        )
        for key, value in sorted(counts.items()):
            if key.startswith(SKIPPED + ":"):
                skipped.add_metric([key.split(":", 1)[1]], value)
        yield skipped
        late_rows = CounterMetricFamily(
            PREFIX + "traces_late",
            "Rows that came after their time window closed, by reason (open_at_close, "
            "after_close): judged, and in no window's figures.",
            labels=["reason"],
        )
        # Both reasons always, 0 until one comes: rate() and alerting rules see a series.
        for reason in (LATE_AFTER, LATE_OPEN):
            late_rows.add_metric([reason], counts.get(f"late:{reason}", 0))
        yield late_rows
        sampled = counts.get(PENDING, 0) + counts.get(OVER_BUDGET, 0) + counts.get(JUDGED, 0)
        for name, value, text in (
            ("traces_sampled", sampled, "Rows chosen by --sample-rate."),
            ("traces_sampled_out", counts.get(SAMPLED_OUT, 0), "Rows left out by --sample-rate."),
            (
                "traces_over_budget",
                counts.get(OVER_BUDGET, 0),
                "Rows sampled but over the --budget: not judged.",
            ),
            ("traces_judged", counts.get(JUDGED, 0), "Rows judged and recorded."),
            (
                "judge_requests",
                counts.get("judge_requests", 0),
                "Requests sent to the judge model (retries included).",
            ),
            (
                "judge_cache_hits",
                counts.get("judge_cache_hits", 0),
                "Judgments found in judge's cache instead of asked.",
            ),
        ):
            yield CounterMetricFamily(PREFIX + name, text, value=value)
        yield GaugeMetricFamily(
            PREFIX + "open_traces",
            "Traces whose spans are held until they are complete (--linger).",
            value=db.execute("SELECT count(*) FROM open_traces").fetchone()[0],
        )
        yield GaugeMetricFamily(
            PREFIX + "pending_traces",
            "Rows waiting to be judged.",
            value=counts.get(PENDING, 0),
        )
        if self.queue_depth is not None:
            yield GaugeMetricFamily(
                PREFIX + "queue_requests",
                "Requests the receiver accepted and holds until their spans are committed.",
                value=self.queue_depth(),
            )
            if self.queue_capacity is not None:
                yield GaugeMetricFamily(
                    PREFIX + "queue_capacity_requests",
                    "Requests the receiver holds at most (--queue); beyond it answers 503.",
                    value=self.queue_capacity,
                )

    def _budget(self, db: sqlite3.Connection) -> Iterator[Metric]:
        budget = self.budget
        if budget is None:
            return
        # The period the budget is spent in now: the traces' start times' hour or day, as
        # the budget counts it; the clock's when no trace of it came yet. The latest trace
        # charged says it, not the latest period ever charged: one trace stamped a year
        # ahead (an app's clock set wrong) would hold the gauges on its period for good.
        seconds = budget.seconds
        number = time.time_ns() // (seconds * NS)
        latest = db.execute(
            "SELECT start_time FROM traces WHERE status IN (?, ?, ?) ORDER BY seq DESC LIMIT 1",
            (PENDING, JUDGED, OVER_BUDGET),
        ).fetchone()
        if latest is not None and latest[0]:
            number = max(number, parse_since(latest[0]) // (seconds * NS))
        found = db.execute(
            "SELECT requests, dollars FROM spend WHERE seconds=? AND number=?", (seconds, number)
        ).fetchone()
        spent = (float(found[1]) if budget.dollars else int(found[0])) if found else 0
        labels = [("dollars" if budget.dollars else "requests"), budget.period]
        for name, text, value in (
            (
                "budget",
                "The --budget: judge requests or dollars per period at most.",
                budget.amount,
            ),
            (
                "budget_spent",
                "What this period's rows took from the budget (the dry run's estimates).",
                spent,
            ),
            ("budget_left", "What is left of this period's budget.", max(0, budget.amount - spent)),
        ):
            family = GaugeMetricFamily(PREFIX + name, text, labels=["unit", "period"])
            family.add_metric(labels, value)
            yield family

    def _windows(self, db: sqlite3.Connection) -> Iterator[Metric]:
        closed, last_at = db.execute("SELECT count(*), max(closed_at) FROM windows").fetchone()
        yield CounterMetricFamily(PREFIX + "windows_closed", "Windows closed.", value=closed)
        last = db.execute("SELECT number, summary FROM windows ORDER BY number DESC LIMIT 1")
        found = last.fetchone()
        current: dict[str, Any] = {}
        if found is not None:
            yield GaugeMetricFamily(
                PREFIX + "last_window_closed_timestamp_seconds",
                "When the latest window was closed (Unix time).",
                value=float(last_at),
            )
            yield GaugeMetricFamily(
                PREFIX + "last_window_number",
                "The number of the latest window closed.",
                value=int(found[0]),
            )
            current = json.loads(found[1])["metrics"]
        figures = {
            "mean": "The latest closed window's mean of the metric.",
            "ci_low": "The lower end of the 95% bootstrap interval of that mean.",
            "ci_high": "The upper end of the 95% bootstrap interval of that mean.",
            "scored": "The rows of the latest closed window with a score of the metric.",
        }
        for figure, text in figures.items():
            family = GaugeMetricFamily(PREFIX + "window_" + figure, text, labels=["metric"])
            for metric, summary in sorted(current.items()):
                if summary.get(figure) is not None:
                    family.add_metric([metric], summary[figure])
            yield family
        detectors = _detectors(db)
        # The drop test's own baseline mean once it started (a pinned run's, when one is
        # the baseline: then no window is); before, the baseline windows closed so far.
        baseline = _baseline_means(db, self.baseline_windows)
        baseline.update({m: d.baseline_mean for m, d in detectors.items()})
        family = GaugeMetricFamily(
            PREFIX + "baseline_mean",
            "The metric's mean over the baseline: the baseline windows' rows (those closed "
            "so far), or the pinned run's.",
            labels=["metric"],
        )
        for metric, mean in sorted(baseline.items()):
            family.add_metric([metric], mean)
        yield family
        for name, text, value_of in _DETECTOR_FIGURES:
            family = GaugeMetricFamily(PREFIX + name, text, labels=["metric"])
            for metric, detector in sorted(detectors.items()):
                family.add_metric([metric], value_of(detector))
            yield family
        alerts = dict.fromkeys(set(current) | set(baseline) | set(detectors), 0)
        alerts.update({m: int(n) for m, n in db.execute(_ALERTS)})
        # Every metric watched has its series from 0: Prometheus's increase() over the
        # first alert needs the 0 before it.
        fired = CounterMetricFamily(
            PREFIX + "alerts", "Alerts fired, by metric.", labels=["metric"]
        )
        for metric, n in sorted(alerts.items()):
            fired.add_metric([metric], n)
        yield fired


_STATUSES = (SKIPPED, SAMPLED_OUT, OVER_BUDGET, PENDING, JUDGED)
_ALERTS = "SELECT metric, count(*) FROM alerts GROUP BY metric"
_OUTBOX = "SELECT status, count(*) FROM outbox GROUP BY status"


def _baseline_means(db: sqlite3.Connection, windows: int) -> dict[str, float]:
    """Each metric's mean over the baseline windows' scored rows: their means weighted by
    their scored rows (the mean of all those rows, as the drop test takes them). The
    baseline windows are those closed first, as each recorded it (not the lowest numbers:
    a straggler's window closed later is none)."""
    sums: dict[str, float] = {}
    rows: dict[str, int] = {}
    for (text,) in db.execute(
        "SELECT summary FROM windows WHERE json_extract(summary, '$.baseline')"
        " ORDER BY number LIMIT ?",
        (windows,),
    ):
        for metric, summary in json.loads(text)["metrics"].items():
            if summary.get("mean") is None or not summary.get("scored"):
                continue
            sums[metric] = sums.get(metric, 0.0) + summary["mean"] * summary["scored"]
            rows[metric] = rows.get(metric, 0) + summary["scored"]
    return {m: sums[m] / rows[m] for m in sums}


def _detectors(db: sqlite3.Connection) -> dict[str, DropDetector]:
    """The drop tests of the metrics the check tests (a metric it cannot test, or another
    check's state, has none)."""
    out = {}
    for metric, text in db.execute("SELECT metric, state FROM detectors"):
        try:
            out[str(metric)] = DropDetector.from_json(json.loads(text))
        except JudgeError:
            continue
    return out


_DETECTOR_FIGURES: tuple[tuple[str, str, Callable[[DropDetector], float]], ...] = (
    (
        "detector_statistic",
        "The drop test's statistic after the latest window (an alert at the threshold).",
        lambda d: d.statistic,
    ),
    (
        "detector_threshold",
        "The statistic that raises an alert: 1 / --alpha.",
        lambda d: d.threshold,
    ),
    (
        "detector_reference",
        "The mean the drop test compares against: the baseline interval's worse end, "
        "moved by --min-drop.",
        lambda d: d.reference,
    ),
    (
        "baseline_ci_low",
        "The lower end of the baseline mean's betting interval (the drop test's).",
        lambda d: d.baseline_interval[0],
    ),
    (
        "baseline_ci_high",
        "The upper end of the baseline mean's betting interval (the drop test's).",
        lambda d: d.baseline_interval[1],
    ),
)


@dataclass
class MetricsServer:
    """prometheus_client's HTTP server of a registry, in a thread of its own."""

    server: WSGIServer
    thread: threading.Thread
    host: str
    port: int

    @property
    def url(self) -> str:
        """The metrics' URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and free the port."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def serve_metrics(registry: CollectorRegistry, host: str, port: int) -> MetricsServer:
    """Serve `registry` on http://HOST:PORT/metrics (any path answers) with
    prometheus_client's server.

    Args:
        registry: the registry to expose.
        host: the address to listen on.
        port: the port (0: any free one; `MetricsServer.port` says which).
    """
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise JudgeError(
            f"--metrics-port {port}: cannot listen on {host}:{port} "
            f"({exc.strerror or exc}): give a free port, or another --metrics-host"
        ) from exc
    return MetricsServer(server, thread, host, int(server.server_port))
