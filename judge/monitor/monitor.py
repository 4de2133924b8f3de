"""`judge monitor` in Python: traces received (`Monitor.aserve`, an OTLP/HTTP receiver) or
followed in a folder (`--watch`), made into rows as `judge traces extract` makes them,
sampled within a budget, judged by the run engine (judgments through judge's cache), and
kept in windows with each metric's mean and interval; every step is recorded in the
state (`judge.monitor.state`), one transaction per batch.

    from judge.monitor.monitor import Monitor, MonitorConfig
    report = Monitor(MonitorConfig(state="monitor-state", llm=LLM(model=...))).once(watch="otel/")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, ProcessCollector

from judge.aio import sync_twin
from judge.cache.store import Cache
from judge.errors import JudgeError
from judge.formatting import number, terminal_text
from judge.llm.config import LLM, Embeddings
from judge.metrics.registry import higher_is_better, metric_range
from judge.metrics.resolve import MetricLike, resolve_metrics, split_metrics
from judge.monitor.alerts import UNCHECKED, drop_check
from judge.monitor.baseline import Baseline, run_baseline, window_baseline
from judge.monitor.budget import Budget, charge, check_priced, parse_budget
from judge.monitor.prometheus import MonitorCollector, serve_metrics
from judge.monitor.receiver import Received, listen, make_app
from judge.monitor.state import (
    JUDGE_USAGE,
    JUDGED,
    OUTBOX_PENDING,
    OVER_BUDGET,
    PENDING,
    SAMPLED_OUT,
    Completed,
    MonitorState,
    judged_total,
)
from judge.monitor.watch import files_in, identity_of, read_new
from judge.monitor.webhook import Undelivered, post_alert
from judge.monitor.windows import (
    NS,
    WindowCheck,
    WindowSpec,
    metric_summary,
    parse_duration,
    parse_window,
)
from judge.run.dry_run import dry_run, row_estimates
from judge.run.estimate import Estimate
from judge.run.evaluate import aevaluate_rows
from judge.run.inputs import open_input
from judge.run.options import RunSpec
from judge.run.processes import evaluate_in_processes
from judge.run.rows import ResultRow
from judge.traces.extract import parse_since, sample_key
from judge.traces.spans import iso_utc

T = TypeVar("T")
FIRST_WINDOWS = "the first windows"  # the baseline the state records when no run is pinned
WORST = 3  # traces named in an alert
# Seconds before the outbox is tried again after the webhook could not be reached: its
# alerts wait in the state, and the monitor does not spend each pass on a dead receiver.
DELIVERY_RETRY = 60.0
PRUNE_EVERY = 60.0  # seconds between two prunings of the state (`keep_traces`) while serving
_FIGURES = ("scored", "mean", "ci_low", "ci_high")  # a metric's figures in a summary


@dataclass
class MonitorConfig:
    """What a monitor does, besides where its traces come from.

    Args:
        state: the --state folder (monitor.sqlite in it).
        metrics: metric names or objects, as `judge.evaluate` takes them (None: the
            default metrics).
        llm: the judge model (None: retrieval metrics alone).
        embeddings: the embedding model, or None.
        cache: judge's judgment cache (a `Cache` or its path), or None.
        sample_rate: the share of traces judged, chosen by a hash of the trace id.
        budget: a ceiling on judge requests or dollars per hour or day, priced by the dry
            run's estimate of each row: a `judge.monitor.budget.Budget`, its text ("200/h",
            "5000/day", "$3/day"), or a number of requests per hour; spent in steps of the
            traces' start times (5 minutes of an hour, hours of a day); None: no limit.
        window: `WindowSpec`, or its text: a duration ("1h") or a number of judged rows.
        baseline_windows: the first K windows closed are the baseline (without
            `baseline_run`).
        baseline_run: the baseline is this run's per-row scores instead, from the run
            store: "pinned" (the run `judge runs baseline` pinned), or a run's id, id
            prefix or name; every window is then checked, from the first. Refused when
            the run lacks a monitored metric or was judged by another judge.
        runs: the run store of `baseline_run` (default: $JUDGE_RUNS, else
            .judge/runs.sqlite).
        baseline_other_judge: take `baseline_run` even when its judge model, embedding
            model or prompt versions differ from the monitor's.
        words: how messages name options (the CLI gives `judge.cli.words.cli_words`, which
            writes flags for keyword arguments); None: as Python's keyword arguments.
        linger: seconds a trace waits after its root span (or, without one, after its last
            span) for late spans before it is complete.
        late: the longest, in seconds after its end, a time window waits for the traces
            that started inside it and are still open (it closes `linger` seconds after
            its end when none is); a row that completes after its window closed is judged
            and counted as late, with its window, never in a window's figures. Below
            `linger`, `linger` is the bound.
        batch: rows judged at once.
        queue: requests the receiver holds before answering 503.
        seed: the sample's seed.
        mapping: field -> attribute for custom instrumentation (`--map`).
        processes: judge each batch in this many fresh processes (`judge eval
            --processes`'s executor) when one process's client is the limit; 1: here.
        ray: judge each batch on Ray instead (`judge eval --ray`'s executor,
            `judge.ray.file_eval.evaluate_on_ray`; needs judge[ray]): a pool of
            `ray_actors` actors, each with its own session and its own cache file in the
            directory beside `cache`. Not with `processes`.
        ray_address: the Ray cluster to join (`ray start --head` prints it); implies `ray`;
            None: a local Ray started by the monitor (or the one this process joined).
        ray_actors: the actors judging each batch with `ray`.
        check: the alert statistics (`judge.monitor.windows.WindowCheck`; default the
            sequential drop test, `judge.monitor.alerts.drop_check()`); None: windows are
            kept with their intervals and no metric is checked.
        webhook: a URL each alert is POSTed to as JSON, at least once: queued in the
            state's outbox with the alert, retried with backoff, and posted again after
            `DELIVERY_RETRY` seconds, or at the next start (after kill -9 too), until the
            webhook answers 2xx; the alert's "id" (also its Idempotency-Key header) lets a
            receiver drop a second copy. A refusal (a 4xx but 408, 425 and 429) is not
            posted again, nor is a redirect followed; each failure is said on stderr and in
            the report's notes.
        keep_traces: forget a completed trace's row in the state (its input fields, scores
            and evidence) this long after it was completed and judged: seconds, or a
            duration ("7d", "12h"); its numbers stay in the counts, and a span of it that
            comes later starts a new trace. Kept whatever their age: rows pending, rows of
            windows not closed yet and of the baseline windows, each alert's worst traces,
            and every window's figures and alert. None: keep every trace.
        progress: say on stderr what each pass did.
    """

    state: str | os.PathLike[str]
    metrics: Sequence[MetricLike] | None = None
    llm: LLM | None = None
    embeddings: Embeddings | None = None
    cache: Cache | str | os.PathLike[str] | None = None
    sample_rate: float = 1.0
    budget: Budget | str | int | None = None
    window: WindowSpec | str = "1h"
    baseline_windows: int = 3
    baseline_run: str | None = None
    runs: str | os.PathLike[str] | None = None
    baseline_other_judge: bool = False
    words: Callable[[str], str] | None = None
    linger: float = 30.0
    late: float = 300.0
    batch: int = 32
    queue: int = 64
    seed: int = 0
    mapping: Mapping[str, str] | None = None
    processes: int = 1
    ray: bool = False
    ray_address: str | None = None
    ray_actors: int = 2
    check: WindowCheck | None = field(default_factory=drop_check)
    webhook: str | None = None
    keep_traces: float | str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.sample_rate <= 1:
            raise JudgeError(f"sample_rate={self.sample_rate}: give a share from 0 to 1")
        self.budget = parse_budget(self.budget)
        check_priced(self.budget, self.llm, self.embeddings)
        for name in ("baseline_windows", "batch", "queue", "processes", "ray_actors"):
            if getattr(self, name) < 1:
                raise JudgeError(f"{name}={getattr(self, name)}: give 1 or more")
        if self.ray_address is not None:
            self.ray = True
        if self.ray and self.processes > 1:
            raise JudgeError(
                f"processes={self.processes} with ray=True: Ray has its own actors "
                "(ray_actors=); give one of them"
            )
        if self.ray:
            from judge.ray.evaluate import require_ray

            require_ray()  # said at once, not at the first batch
        if isinstance(self.keep_traces, str):
            seconds = parse_duration(self.keep_traces)
            if seconds is None:
                raise JudgeError(
                    f"keep_traces={self.keep_traces!r}: give a duration, e.g. '7d', '12h', or "
                    "seconds"
                )
            self.keep_traces = seconds
        if self.keep_traces is not None and not 0 <= self.keep_traces < math.inf:
            raise JudgeError(f"keep_traces={self.keep_traces}: give seconds, 0 or more")
        if not self.linger >= 0:  # NaN too: no trace would ever be complete
            raise JudgeError(f"linger={self.linger}: give seconds, 0 or more")
        if not 0 <= self.late < math.inf:  # NaN or inf: a window could wait forever
            raise JudgeError(f"late={self.late}: give seconds, 0 or more")


@dataclass
class MonitorReport:
    """What a pass (`once`) or a session (`serve`) did: the state's counts at its end, and
    the windows closed and alerts fired by it."""

    counts: dict[str, int] = field(default_factory=dict)
    windows: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False
    notes: list[str] = field(default_factory=list)  # metrics the check could not test

    def lines(self) -> list[str]:
        """The report as sentences."""
        c = self.counts
        skips = sorted((k.split(":", 1)[1], v) for k, v in c.items() if k.startswith("skipped:"))
        out = [
            f"{c.get('spans', 0)} spans received ({c.get('duplicate_spans', 0)} duplicate, "
            f"{c.get('late_spans', 0)} late, {c.get('rejected_spans', 0)} rejected); "
            f"{c.get(JUDGED, 0)} traces judged, {c.get(PENDING, 0)} pending, "
            f"{c.get(SAMPLED_OUT, 0)} sampled_out, {c.get(OVER_BUDGET, 0)} over_budget, "
            f"{c.get('skipped', 0)} skipped"
            + (f" ({', '.join(f'{n} {r}' for r, n in skips)})" if skips else "")
        ]
        if c.get("forgotten"):
            out.append(
                f"{c['forgotten']} traces forgotten by keep_traces= (counted above; their rows "
                "are no longer in the state)"
            )
        if c.get("late"):
            lates = sorted((k.split(":", 1)[1], v) for k, v in c.items() if k.startswith("late:"))
            out.append(
                f"{c['late']} late rows (after their window closed, in no window's figures: "
                f"{', '.join(f'{n} {r}' for r, n in lates)})"
            )
        for window in self.windows:
            figures = ", ".join(
                f"{m} {s['mean']:.3f} [{number(s['ci_low'])}, {number(s['ci_high'])}]"
                for m, s in window["metrics"].items()
                if s["mean"] is not None
            )
            kind = " (baseline)" if window["baseline"] else ""
            out.append(f"window {window['number']}{kind}: {window['rows']} rows: {figures}")
        out.extend(alert_line(alert) for alert in self.alerts)
        out.extend(f"note: {note}" for note in self.notes)
        return out


def _monitored(config: MonitorConfig) -> list[str]:
    """The names of the metrics a monitor judges, as far as they are known before a row is
    seen: those given, else the default judged ones (the default retrieval metrics come
    with rows that have labels)."""
    if config.metrics is not None:
        judged, retrieval = split_metrics(config.metrics, has_retrieval=True)
        return [m if isinstance(m, str) else m.name for m in judged or []] + retrieval
    if config.llm is None:
        return []
    return [m.name for m in resolve_metrics(None, embeddings=config.embeddings is not None)]


def alert_line(alert: Mapping[str, Any]) -> str:
    """An alert in one sentence."""
    now, base = alert["current"], alert["baseline"]
    return (
        f"ALERT {alert['metric']} in window {alert['window']}: {now['mean']:.3f} "
        f"[{number(now['ci_low'])}, {number(now['ci_high'])}] against the baseline's "
        f"{base['mean']:.3f} [{number(base['ci_low'])}, {number(base['ci_high'])}]"
        + (f" ({base['source']})" if base.get("source") else "")
        + "; worst traces "
        + ", ".join(w["trace_id"] for w in alert["worst"])
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _score(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


class Monitor:
    """A monitor over its state; `once` processes what is new and returns, `serve` runs
    until stopped.

    Args:
        config: what the monitor does.
    """

    def __init__(self, config: MonitorConfig) -> None:
        self.config = config
        self.window = (
            config.window if isinstance(config.window, WindowSpec) else parse_window(config.window)
        )
        # A pinned run's figures per metric (its record's mean and interval), and those
        # computed once when the record has none: an alert never bootstraps the whole run.
        self._run_figures: dict[str, dict[str, Any]] = {}
        self._run_baseline, self._baseline_run_id = self._load_baseline()
        self.state = MonitorState(config.state)
        try:
            self.state.hold()  # one monitor per state: a second would judge rows twice
            self._check_settings()
            # An alert's id is this state's id and the alert's number: unique across the
            # monitors sharing a load, the same in every delivery of one alert.
            self._state_id = self.state.setting("id", uuid.uuid4().hex[:16])
        except BaseException:
            self.state.close()
            raise
        self._delivering = asyncio.Lock()
        # While serving, the outbox is posted by a task of its own (`_deliver_soon`): a
        # webhook slow to answer must not hold the judging and the passes.
        self._delivery: asyncio.Task[int | None] | None = None
        self._serving_poll: float | None = None
        self._deliver_at = 0.0  # time.monotonic() before which the outbox is not tried
        self._prune_at = 0.0  # time.monotonic() before which the state is not pruned
        self._prices: dict[str, Estimate] = {}  # trace id -> its row's price (`_price`)
        # All the state's work runs in this one thread: SQLite's calls never block the
        # event loop that receives traces and awaits the judge.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-monitor")
        self.stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._alerts: list[dict[str, Any]] = []
        self._notes: list[str] = []
        self._windows: list[dict[str, Any]] = []
        self._late: list[str] = []  # the late rows of the batch just recorded, to be said
        # The monitor's own registry (never prometheus_client's global one): two monitors
        # in one process each expose their own state. Read when scraped; `aserve` serves
        # it with metrics_port, or mount it in an app of your own.
        self.registry = CollectorRegistry()
        self._collector = MonitorCollector(
            self.state.folder,
            baseline_windows=config.baseline_windows,
            budget=config.budget if isinstance(config.budget, Budget) else None,
            queue_capacity=config.queue,
        )
        self.registry.register(self._collector)
        try:
            self._collector.open()
        except BaseException:
            self.close()
            raise
        ProcessCollector(registry=self.registry)  # the process's memory, CPU, open files
        self.metrics_port: int | None = None  # the port serving /metrics, once it does

    def _load_baseline(self) -> tuple[dict[str, Baseline] | None, str | None]:
        """(the pinned run's baseline per metric, its id), or (None, None) when the first
        windows are the baseline."""
        config = self.config
        if config.baseline_run is None:
            return None, None
        record, found = run_baseline(
            config.baseline_run,
            _monitored(config),
            model=config.llm.model if config.llm else None,
            embeddings=config.embeddings.model if config.embeddings else None,
            runs=config.runs,
            other_judge=config.baseline_other_judge,
        )
        for metric, figures in record.summary.items():
            if isinstance(figures, Mapping) and all(k in figures for k in _FIGURES):
                self._run_figures[metric] = {k: figures[k] for k in _FIGURES}
        return found, record.id

    def _baseline_figures(self, metric: str, base: Baseline) -> dict[str, Any]:
        """The baseline's scored rows, mean and interval in an alert: a pinned run's from
        its record (as judge eval reported them), else computed from its scores."""
        if base.run is None:
            return metric_summary(list(base), metric_range(metric))
        found = self._run_figures.get(metric)
        if found is None:  # a record without them: computed once, not at every alert
            found = self._run_figures[metric] = metric_summary(list(base), metric_range(metric))
        return found

    def _check_settings(self) -> None:
        """Refuse a window or a baseline other than the state was started with: its
        windows and its detectors were made of them."""
        recorded = self.state.setting("window", str(self.window))
        if recorded != str(self.window):
            raise JudgeError(
                f"--window {self.window}: the state {self.state.folder} keeps windows of "
                f"{recorded}; give --window {recorded}, or another --state"
            )
        run_id = self._baseline_run_id
        given = f"run {run_id}" if run_id else FIRST_WINDOWS
        # A state from before baselines were recorded (format 1) that closed windows made
        # them, and its detectors, against its first windows: the only baseline then.
        if self.state.read("SELECT 1 FROM windows LIMIT 1") and not self.state.read(
            "SELECT 1 FROM settings WHERE key='baseline'"
        ):
            self.state.setting("baseline", FIRST_WINDOWS)
        recorded = self.state.setting("baseline", given)
        if recorded != given:
            redo = (
                "no baseline_run="
                if recorded == FIRST_WINDOWS
                else f"baseline_run={recorded.split()[-1]!r}"
            )
            ref = self.config.baseline_run
            raise JudgeError(
                (f"baseline_run={ref!r}: " if ref is not None else "")
                + f"the state {self.state.folder} checks its windows against the baseline "
                f"of {recorded}, not {given}; give {redo}, or another --state"
            )

    def request_stop(self) -> None:
        """Stop the monitor as SIGTERM does, from any thread: `serve` and `once` then
        finish the batch in hand and return."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.stop.set)
        else:
            self.stop.set()

    def close(self) -> None:
        """Close the state."""
        self._executor.shutdown(wait=True)
        self._collector.close()
        self.state.close()

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, partial(fn, *args, **kwargs))

    def _say(self, message: str, *, always: bool = False) -> None:
        if self.config.progress or always:
            words = self.config.words
            shown = words(message) if words is not None else message
            print(terminal_text(f"judge: {shown}"), file=sys.stderr)

    # -- sampling -----------------------------------------------------------------------

    def _estimate(self, trace_id: str, row: dict[str, Any]) -> Estimate:
        """The judge requests a row takes and their cost, as the dry run estimates them:
        priced with its batch by `_price`, else now."""
        found = self._prices.pop(trace_id, None)
        if found is not None:
            return found
        if self.config.llm is None:
            return Estimate(cost=0.0)
        return dry_run(
            [row],
            metrics=self.config.metrics,
            llm=self.config.llm,
            embeddings=self.config.embeddings,
        ).total

    def _sampled_out(self, trace_id: str) -> bool:
        """Whether --sample-rate leaves the trace out (by a hash of its id)."""
        rate = self.config.sample_rate
        return rate < 1 and sample_key(self.config.seed, trace_id) >= rate * 2**64

    def _price(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        """Price a batch of completed rows at once, before the transaction that charges
        them (`MonitorState.complete`): the metrics, prompts and stand-in judge are made
        once, not per row, and the state is not held meanwhile."""
        self._prices = {}
        if self.config.budget is None or self.config.llm is None:
            return
        rows = [(t, row) for t, row in rows if not self._sampled_out(t)]  # never charged
        if not rows:
            return
        estimates = row_estimates(
            [row for _, row in rows],
            metrics=self.config.metrics,
            llm=self.config.llm,
            embeddings=self.config.embeddings,
        )
        self._prices = {t: e for (t, _), e in zip(rows, estimates, strict=True)}

    def _choose(self, db: sqlite3.Connection, trace_id: str, row: dict[str, Any]) -> Completed:
        """What becomes of a completed trace's row: sampled out, over budget, or pending."""
        start_ns = parse_since(row["start_time"])
        window = start_ns // (self.window.seconds * NS) if self.window.seconds else None
        if self._sampled_out(trace_id):
            return Completed(SAMPLED_OUT, window=window)
        budget = self.config.budget
        if budget is None:
            return Completed(PENDING, window=window)
        assert isinstance(budget, Budget)  # parsed by MonitorConfig
        estimate = self._estimate(trace_id, row)
        requests = estimate.chat_requests + estimate.embedding_requests
        if not charge(db, budget, start_ns, requests, estimate.cost, time.time_ns()):
            return Completed(OVER_BUDGET, requests, window)
        return Completed(PENDING, requests, window)

    async def complete(self, *, everything: bool = False) -> int:
        """Complete the traces due (all open ones with `everything`); returns how many."""
        total = 0
        while True:
            done = await self._db(
                self.state.complete,
                time.time(),
                self.config.linger,
                self._choose,
                everything=everything,
                mapping=dict(self.config.mapping or {}),
                price=self._price,
            )
            total += done
            if not done:
                return total

    # -- judging ------------------------------------------------------------------------

    async def _judge(self, rows: list[dict[str, Any]]) -> tuple[list[ResultRow], dict[str, Any]]:
        """The rows' results, and the judge's usage (requests, cache hits) for them: in
        this process, or in `processes` fresh ones when more than one row is due."""
        spec = RunSpec(
            metrics=self.config.metrics,
            llm=self.config.llm,
            embeddings=self.config.embeddings,
            cache=self.config.cache,
            progress=False,
        )
        if self.config.ray:
            return await asyncio.to_thread(self._judge_on_ray, rows, spec)
        if self.config.processes > 1 and len(rows) > 1:
            return await asyncio.to_thread(self._judge_in_processes, rows, spec)
        given = open_input(rows)
        result = await aevaluate_rows(given, given.columns, given.source, spec)
        return list(result.rows), result.usage

    def _judge_in_processes(
        self, rows: list[dict[str, Any]], spec: RunSpec
    ) -> tuple[list[ResultRow], dict[str, Any]]:
        """The rows judged by the processes executor, through a file of them in a folder of
        the state's own (removed after: the results are read before)."""
        with tempfile.TemporaryDirectory(dir=self.state.folder, prefix=".judging-") as folder:
            data = Path(folder) / "rows.jsonl"
            with data.open("w", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
            work = Path(folder) / "out"
            work.mkdir()
            result = evaluate_in_processes(data, spec, self.config.processes, work)
            return list(result.rows), dict(result.usage)

    def _judge_on_ray(
        self, rows: list[dict[str, Any]], spec: RunSpec
    ) -> tuple[list[ResultRow], dict[str, Any]]:
        """The rows judged by Ray's actors (`judge eval --ray`'s executor), their results
        spilled in a folder of the state's own (removed after: the results are read
        before)."""
        from judge.ray.file_eval import evaluate_on_ray

        with tempfile.TemporaryDirectory(dir=self.state.folder, prefix=".judging-") as folder:
            result = evaluate_on_ray(
                rows,
                spec,
                actors=self.config.ray_actors,
                address=self.config.ray_address,
                work=folder,
            )
            return list(result.rows), dict(result.usage)

    def _join_ray(self) -> None:
        """Join (or start) the Ray cluster before any trace is taken: an address where no
        cluster answers is refused at once, not retried at every batch."""
        if not self.config.ray:
            return
        from judge.ray.evaluate import require_ray
        from judge.ray.file_eval import connect

        connect(require_ray(), self.config.ray_address)

    def _record(
        self,
        rows: list[dict[str, Any]],
        results: list[ResultRow],
        usage: Mapping[str, Any] | None = None,
    ) -> int:
        """Record judged rows (one transaction) with the judge's usage for them, count
        windows numbered by judged rows; returns how many were recorded."""
        by_id = {str(r.id): r for r in results}
        now = time.time()
        recorded = 0
        with self.state.writing() as db:
            judged = judged_total(db)
            for row in rows:
                result = by_id.get(str(row["id"]))
                if result is None:
                    continue
                scores = {m: _score(v) for m, v in result.scores.items()}
                number = None
                if self.window.traces is not None:
                    number = judged // self.window.traces
                judged += 1
                db.execute(
                    "UPDATE traces SET status=?, scores=?, evidence=?, judged_at=?,"
                    " window=coalesce(window, ?) WHERE trace_id=? AND status=?",
                    (
                        JUDGED,
                        _json(scores),
                        _json({"evidence": result.evidence, "errors": result.errors}),
                        now,
                        number,
                        row["trace_id"],
                        PENDING,
                    ),
                )
                recorded += 1
            ids = [row["trace_id"] for row in rows]
            marks = ",".join("?" * len(ids))
            self._late = [
                f"trace {trace_id} of window {window} was judged after its window closed "
                f"({reason}): counted as late, not in the window's figures"
                for trace_id, window, reason in db.execute(
                    f"SELECT trace_id, window, late FROM traces WHERE trace_id IN ({marks})"
                    " AND late IS NOT NULL ORDER BY seq",
                    ids,
                )
            ]
            for name, key in JUDGE_USAGE.items():
                value = int((usage or {}).get(key) or 0)
                if value:
                    db.execute(
                        "INSERT INTO counts (name, value) VALUES (?, ?) ON CONFLICT (name)"
                        " DO UPDATE SET value=value+excluded.value",
                        (name, value),
                    )
        return recorded

    async def judge_batch(self) -> int:
        """Judge one batch of pending rows and record it; returns how many were judged."""
        rows = await self._db(self.state.pending, self.config.batch)
        if not rows:
            return 0
        results, usage = await self._judge(rows)
        recorded = await self._db(self._record, rows, results, usage)
        late, self._late = self._late, []
        for line in late:
            self._say(line, always=True)
        if not recorded:  # never: a run gives every row its result, by the row's id
            raise JudgeError(
                f"the judged rows came back without their ids (trace ids such as "
                f"{rows[0].get('trace_id')!r}): this is a bug in judge; please report it"
            )
        return recorded

    # -- windows ------------------------------------------------------------------------

    def _scores(self, db: sqlite3.Connection, numbers: Sequence[int]) -> list[dict[str, Any]]:
        marks = ",".join("?" * len(numbers))
        return [
            {"trace_id": trace_id, "scores": json.loads(scores), "evidence": evidence}
            for trace_id, scores, evidence in db.execute(
                # A late row (judged after its window closed) is in no window's figures,
                # nor the baseline's: they stay what the closed windows recorded.
                f"SELECT trace_id, scores, evidence FROM traces WHERE status=? AND window IN"
                f" ({marks}) AND late IS NULL ORDER BY seq",
                (JUDGED, *numbers),
            )
        ]

    def _close_windows(self, final: bool) -> None:
        """Close the windows that are over (one transaction): their figures, and after the
        baseline each metric's check."""
        spec = self.window
        with self.state.writing() as db:
            closed = {n for (n,) in db.execute("SELECT number FROM windows")}
            if spec.traces is not None:
                due = [
                    n
                    for n, count in db.execute(
                        "SELECT window, count(*) FROM traces WHERE status=? AND window IS NOT"
                        " NULL GROUP BY window",
                        (JUDGED,),
                    )
                    if count >= spec.traces and n not in closed
                ]
            else:
                assert spec.seconds is not None
                grace = 0 if final else int(self.config.linger * NS)
                # An open trace that started inside a window holds it past the grace, up
                # to this bound: a slow trace at a window's end is counted in it.
                bound = max(grace, int(self.config.late * NS))
                now_ns = time.time_ns()
                waiting = {
                    n
                    for (n,) in db.execute(
                        "SELECT DISTINCT window FROM traces WHERE status=?", (PENDING,)
                    )
                }
                due = [
                    n
                    for (n,) in db.execute(
                        "SELECT DISTINCT window FROM traces WHERE status=? AND window IS NOT NULL",
                        (JUDGED,),
                    )
                    if n not in closed
                    and n not in waiting
                    and (n + 1) * spec.seconds * NS + grace <= now_ns
                    and ((n + 1) * spec.seconds * NS + bound <= now_ns or not self._open_in(db, n))
                ]
            for number in sorted(due):
                self._close(db, number)

    def _open_in(self, db: sqlite3.Connection, number: int) -> int:
        """How many open traces started inside time window `number`."""
        assert self.window.seconds is not None
        width = self.window.seconds * NS
        return int(
            db.execute(
                "SELECT count(*) FROM open_traces WHERE start_ns >= ? AND start_ns < ?",
                (number * width, (number + 1) * width),
            ).fetchone()[0]
        )

    def _close(self, db: sqlite3.Connection, number: int) -> None:
        spec = self.window
        rows = self._scores(db, [number])
        metrics = sorted({m for r in rows for m in r["scores"]})
        figures = {
            m: metric_summary([r["scores"].get(m) for r in rows], metric_range(m)) for m in metrics
        }
        figures = {m: s for m, s in figures.items() if s["scored"]}
        # The baseline is the first K windows closed, as each recorded it: not the K
        # lowest numbers, which a straggler's window (a trace from hours before, a skewed
        # clock) closed later would join.
        base_numbers = [
            n
            for (n,) in db.execute(
                "SELECT number FROM windows WHERE json_extract(summary, '$.baseline')"
                " ORDER BY number LIMIT ?",
                (self.config.baseline_windows,),
            )
        ]
        # A pinned run is the baseline: no window is, every one is checked.
        from_run = self._run_baseline is not None
        baseline = not from_run and len(base_numbers) < self.config.baseline_windows
        start = end = None
        if spec.seconds is not None:
            start = iso_utc(number * spec.seconds * NS)
            end = iso_utc((number + 1) * spec.seconds * NS)
        summary = {
            "number": number,
            "start": start,
            "end": end,
            "rows": len(rows),
            "baseline": baseline,
            "metrics": figures,
        }
        held = self._open_in(db, number) if spec.seconds is not None else 0
        if held:  # closed at the --late bound: their rows will be counted as late
            summary["open_at_close"] = held
        db.execute(
            "INSERT INTO windows (number, start, end, closed_at, summary) VALUES (?, ?, ?, ?, ?)",
            (number, start, end, time.time(), _json(summary)),
        )
        self._windows.append(summary)
        check = self.config.check
        if baseline or check is None:
            return
        base_rows = [] if from_run else self._scores(db, base_numbers)
        for metric, current in figures.items():
            found = db.execute("SELECT state FROM detectors WHERE metric=?", (metric,)).fetchone()
            before = json.loads(found[0]) if found else None
            base = self._baseline(metric, base_rows, base_numbers)
            if base is None:
                continue
            window_scores = [s for r in rows if (s := r["scores"].get(metric)) is not None]
            if isinstance(base, str):  # a metric the pinned run has no scores of
                alert, after = None, {UNCHECKED: base}
            else:
                alert, after = check(metric, base, window_scores, before, number=number)
            unchecked = after.get(UNCHECKED) if isinstance(after, Mapping) else None
            # said once: when the check first met it, or first found it untestable
            if unchecked and not (isinstance(before, Mapping) and UNCHECKED in before):
                self._notes.append(f"{metric} is not checked for drops: {unchecked}")
            db.execute(
                "INSERT INTO detectors (metric, state) VALUES (?, ?) ON CONFLICT (metric)"
                " DO UPDATE SET state=excluded.state",
                (metric, _json(after)),
            )
            if alert is None:
                continue
            scored = [r for r in rows if r["scores"].get(metric) is not None]
            # the worst in the metric's bad direction (highest for hallucination_rate)
            sign = 1 if higher_is_better(metric) else -1
            worst = sorted(scored, key=lambda r: (sign * r["scores"][metric], r["trace_id"]))
            worst = worst[:WORST]
            assert isinstance(base, Baseline)
            (alert_number,) = db.execute("SELECT coalesce(max(id), 0) + 1 FROM alerts").fetchone()
            record = {
                "id": f"{self._state_id}-{alert_number}",
                "metric": metric,
                "window": number,
                "start": start,
                "end": end,
                "baseline": {**self._baseline_figures(metric, base), **base.to_json()},
                "current": current,
                "test": dict(alert),
                "worst": [
                    {
                        "trace_id": r["trace_id"],
                        "score": r["scores"][metric],
                        # The row's judgments (claims, verdicts, grades) behind its scores.
                        "evidence": json.loads(r["evidence"] or "{}").get("evidence"),
                    }
                    for r in worst
                ],
            }
            now = time.time()
            db.execute(
                "INSERT INTO alerts (id, window, metric, at, alert) VALUES (?, ?, ?, ?, ?)",
                (alert_number, number, metric, now, _json(record)),
            )
            if self.config.webhook:  # in the alert's transaction: posted at least once
                db.execute(
                    "INSERT INTO outbox (alert, status, queued_at) VALUES (?, ?, ?)",
                    (alert_number, OUTBOX_PENDING, now),
                )
            self._alerts.append(record)

    def _baseline(
        self, metric: str, base_rows: list[dict[str, Any]], numbers: list[int]
    ) -> Baseline | str | None:
        """A metric's baseline: the pinned run's scores, or the baseline windows'; None
        when the windows hold none of it; why not, when the pinned run has none."""
        if self._run_baseline is None:
            scores = [s for r in base_rows if (s := r["scores"].get(metric)) is not None]
            return window_baseline(metric, scores, numbers) if scores else None
        found = self._run_baseline.get(metric)
        if found is not None:
            return found
        return (
            f"the baseline run {self._baseline_run_id} has no scores of {metric}: monitor only "
            "its metrics (metrics=), or pin a run that computed it"
        )

    async def close_windows(self, *, final: bool = False) -> None:
        """Close the windows that are over; alerts fired are logged."""
        before = len(self._alerts), len(self._windows), len(self._notes)
        try:
            await self._db(self._close_windows, final)
        except BaseException:  # rolled back: none of it was kept, none of it is said
            del self._alerts[before[0] :], self._windows[before[1] :], self._notes[before[2] :]
            raise
        for note in self._notes[before[2] :]:
            self._say(f"note: {note}", always=True)
        for window in self._windows[before[1] :]:
            self._say(f"window {window['number']} closed: {window['rows']} rows")
        for alert in self._alerts[before[0] :]:
            print(terminal_text(f"judge: {alert_line(alert)}"), file=sys.stderr)
        if self._serving_poll is None:
            await self.deliver()
        else:
            self._deliver_soon(self._serving_poll)
        if time.monotonic() >= self._prune_at:
            await self.prune()

    async def prune(self) -> int:
        """Forget the traces older than `keep_traces` that nothing reads any more
        (`MonitorState.prune`); returns how many."""
        keep = self.config.keep_traces
        if keep is None:
            return 0
        assert not isinstance(keep, str)  # parsed by MonitorConfig
        self._prune_at = time.monotonic() + PRUNE_EVERY
        forgotten = await self._db(self.state.prune, time.time() - keep)
        if forgotten:
            self._say(f"{forgotten} traces older than keep_traces= forgotten")
        return forgotten

    def _deliver_soon(self, poll: float) -> None:
        """Post the outbox in a task of its own, unless one is at it already."""
        if self._delivery is None or self._delivery.done():
            self._delivery = asyncio.create_task(self._retried("delivering", self.deliver, poll))

    async def _posted(self, url: str, alert: dict[str, Any]) -> tuple[bool, Undelivered | None]:
        """(whether the POST was answered, `post_alert`'s answer): not answered when the
        monitor was stopped first; the POST is then abandoned (the alert stays pending,
        posted at the next start)."""
        posting = asyncio.ensure_future(post_alert(url, alert))
        stopping = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({posting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not posting.done():
                posting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await posting
        if posting.cancelled():
            return False, None
        return True, posting.result()

    async def deliver(self) -> int:
        """Post the alerts the state's outbox holds undelivered to the webhook, oldest first,
        each marked delivered once the webhook took it: at least once, across restarts and
        kill -9 (a kill after the POST and before the mark posts it again, with the same
        id). After a failed try the outbox waits `DELIVERY_RETRY` seconds. Returns how
        many were delivered."""
        url = self.config.webhook
        if url is None or time.monotonic() < self._deliver_at:
            return 0
        delivered = 0
        async with self._delivering:  # the judging and the passes close windows at once
            for number, text in await self._db(self.state.undelivered):
                alert = json.loads(text)
                # A stop (SIGTERM) does not wait for a webhook slow to answer.
                answered, failure = await self._posted(url, alert)
                if not answered:
                    self._say(
                        f"note: stopped before the webhook took alert {alert.get('id', number)}"
                        "; kept in the state's outbox, posted at the next start",
                        always=True,
                    )
                    break
                reason = None if failure is None else failure.reason
                retry = failure is not None and failure.retry
                await self._db(self.state.delivery, number, time.time(), reason, retry)
                if failure is None:
                    delivered += 1
                    self._say(f"alert {alert.get('id', number)} delivered to the webhook")
                    continue
                note = f"the alert of {alert['metric']} in window {alert['window']}: {failure}"
                if retry:  # the webhook is down: this one and those after it wait
                    # ... as long as its Retry-After asked, when it asked for longer
                    pause = max(DELIVERY_RETRY, failure.after or 0.0)
                    note += (
                        f"; kept in the state's outbox, posted again in {pause:g} s "
                        "or at the next start"
                    )
                    self._deliver_at = time.monotonic() + pause
                self._notes.append(note)
                self._say(f"note: {note}", always=True)
                if retry:
                    break
        return delivered

    # -- sources ------------------------------------------------------------------------

    def _read_folder(self, folder: Path) -> int:
        """Read what is new in the followed folder, one transaction per chunk; spans read."""
        spans = 0
        for path in files_in(folder):
            try:
                identity = identity_of(path.stat())
            except FileNotFoundError:
                continue
            for chunk in read_new(path, self.state.file_offset(identity)):
                self.state.ingest(
                    chunk.batches,
                    time.time(),
                    rejected=chunk.rejected,
                    bad_lines=chunk.bad_lines,
                    files=[(chunk.identity, chunk.path, chunk.offset, chunk.size)],
                )
                spans += sum(len(b) for b in chunk.batches)
        return spans

    async def _report(self) -> MonitorReport:
        counts = await self._db(self.state.counts)
        return MonitorReport(
            counts,
            list(self._windows),
            list(self._alerts),
            stopped=self.stop.is_set(),
            notes=list(self._notes),
        )

    async def health(self) -> dict[str, Any]:
        """What /healthz says: the counts of the state."""
        counts = await self._db(self.state.counts)
        return {"counts": counts, "open_traces": await self._db(self.state.open_traces)}

    async def aonce(self, watch: str | os.PathLike[str] | None = None) -> MonitorReport:
        """Process what is new and return: the files new in `watch`, every trace held
        completed (as `judge traces extract` completes them at the end of its files), every
        pending row judged, the windows that are over closed.

        Args:
            watch: the folder the Collector's file exporter writes, or None (only what the
                state holds: traces received before, rows pending).
        """
        self._loop = asyncio.get_running_loop()
        if watch is not None:
            folder = Path(watch)
            if not folder.is_dir():
                raise JudgeError(
                    f"--watch {watch}: no such folder (give the folder the "
                    "Collector's file exporter writes)"
                )
            await self._db(self._read_folder, folder)
        await self.deliver()  # what a run before left undelivered (killed, webhook down)
        self._join_ray()
        await self.complete(everything=True)
        while not self.stop.is_set() and await self.judge_batch():
            await self.close_windows()
        if not self.stop.is_set():
            await self.close_windows(final=True)
            await self.prune()  # the windows closed last count too
        return await self._report()

    once = sync_twin(aonce)

    async def aserve(
        self,
        *,
        host: str | None = "127.0.0.1",
        port: int = 4318,
        watch: str | os.PathLike[str] | None = None,
        token: str | None = None,
        poll: float = 1.0,
        on_ready: Callable[[int | None], None] | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
    ) -> MonitorReport:
        """Receive (and/or follow) traces until `stop` is set: then the receiver stops
        taking requests, those accepted are kept, the batch being judged is finished and
        recorded, and the report returned.

        Args:
            host: the address to listen on (None: do not listen; `watch` alone).
            port: the port (0: any free one, given to `on_ready`).
            watch: a folder to follow, or None.
            token: a bearer token the receiver requires.
            poll: seconds between passes (completing traces, reading the folder).
            on_ready: called with the port listened on once requests are taken.
            metrics_port: serve the Prometheus metrics (`Monitor.registry`) on
                http://METRICS_HOST:METRICS_PORT/metrics while serving (0: any free port,
                then in `Monitor.metrics_port`); None: not served.
            metrics_host: the address the metrics are served on (default loopback).
        """
        from aiohttp import web

        self._loop = asyncio.get_running_loop()
        self._join_ray()
        queue: asyncio.Queue[Received] = asyncio.Queue(self.config.queue)
        runner = None
        bound = None
        metrics = None
        if metrics_port is not None:
            metrics = serve_metrics(self.registry, metrics_host, metrics_port)
            self.metrics_port = metrics.port
            # A port chosen by the system is said even when quiet: nothing else tells it.
            self._say(f"metrics on {metrics.url}", always=metrics_port == 0)
        if host is not None:
            self._collector.queue_depth = queue.qsize
            app = make_app(queue, token=token, health=self.health)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
            try:
                await listen(runner, host, port)
            except BaseException as exc:  # the port taken, say: nothing left listening
                await runner.cleanup()
                if metrics is not None:
                    metrics.close()
                if isinstance(exc, OSError):
                    raise JudgeError(
                        f"--listen {shown}:{port}: cannot listen ({exc.strerror or exc}): give "
                        "a free port, or another host"
                    ) from exc
                raise
            bound = int(runner.addresses[0][1])  # the port chosen when 0 was given
            self._say(f"monitor listening on http://{shown}:{bound}/v1/traces", always=port == 0)
        if on_ready is not None:
            on_ready(bound)
        self._serving_poll = poll
        tasks = [
            asyncio.create_task(self._ingest_loop(queue)),
            asyncio.create_task(self._judge_loop(poll)),
            asyncio.create_task(self._pass_loop(watch, poll)),
        ]
        try:
            await self.stop.wait()
        finally:
            if runner is not None:
                await runner.cleanup()  # no new request; those in hand are answered
            for task in tasks:
                await asyncio.wait_for(task, timeout=None)
            self._serving_poll = None
            if self._delivery is not None:  # stopped too: it ends without the webhook
                await self._delivery
            self._collector.queue_depth = None
            if metrics is not None:  # scraped to the end: the last batch's figures too
                metrics.close()
                self.metrics_port = None
        return await self._report()

    async def _ingest_loop(self, queue: asyncio.Queue[Received]) -> None:
        while not (self.stop.is_set() and queue.empty()):
            try:
                first = await asyncio.wait_for(queue.get(), timeout=0.2)
            except asyncio.TimeoutError:
                continue
            items = [first]
            while not queue.empty() and len(items) < 256:
                items.append(queue.get_nowait())
            try:
                await self._db(
                    self.state.ingest,
                    [item.spans for item in items],
                    time.time(),
                    rejected=sum(item.rejected for item in items),
                )
            except Exception as exc:  # the state said no: the exporters retry
                for item in items:
                    if not item.done.done():
                        item.done.set_exception(exc)
                self._say(f"warning: received spans could not be kept: {exc}", always=True)
                continue
            for item in items:
                if not item.done.done():
                    item.done.set_result(None)

    async def _judge_loop(self, poll: float) -> None:
        while not self.stop.is_set():
            judged = await self._retried("judging", self.judge_batch, poll)
            if judged:
                await self._retried("closing windows", self.close_windows, poll)
            elif judged == 0:
                await self._sleep(poll)

    async def _pass(self, watch: str | os.PathLike[str] | None) -> bool:
        """One pass: the folder's new lines read, the traces due completed, windows closed."""
        if watch is not None and Path(watch).is_dir():
            await self._db(self._read_folder, Path(watch))
        await self.complete()
        await self.close_windows()
        return True

    async def _pass_loop(self, watch: str | os.PathLike[str] | None, poll: float) -> None:
        while not self.stop.is_set():
            if await self._retried("a pass", partial(self._pass, watch), poll) is not None:
                await self._sleep(poll)

    async def _retried(self, what: str, step: Callable[[], Awaitable[T]], poll: float) -> T | None:
        """`step()`'s value; None when it failed with a JudgeError (the judge down, the
        state locked by another process past the busy timeout), said and waited out, so
        the loop tries again. Any other error stops the monitor: a monitor whose receiver
        answers while a loop of it is dead would take spans and never judge them."""
        try:
            return await step()
        except JudgeError as exc:
            wait = poll * 10
            self._say(f"warning: {what} failed, retried in {wait:g} s: {exc}", always=True)
            await self._sleep(wait)
            return None
        except Exception:
            self.stop.set()
            raise

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)
