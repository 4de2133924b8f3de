"""`judge monitor --state DIR (--listen HOST:PORT | --watch DIR) [--once]`: live traces
judged within a budget and kept in windows (`judge.monitor`)."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import sys
from typing import Any

from judge.cli.options import (
    check_retrieval_only,
    judge_options,
    llm_options,
    metrics_given,
    module_option,
    runs_path_option,
    trace_mapping,
)
from judge.errors import JudgeError
from judge.formatting import terminal_text

TOKEN_ENV = "JUDGE_MONITOR_TOKEN"
DEFAULT_PORT = 4318  # OTLP/HTTP's port
EXIT_ALERT = 1
EXIT_TERMINATED = 143


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the monitor subcommand."""
    p = sub.add_parser(
        "monitor",
        help="judge live traces (an OTLP/HTTP receiver, or the Collector's files) within a "
        "budget, in windows",
        description="Receive traces (--listen: OTLP/HTTP, as an OpenTelemetry SDK exporter "
        "or a Collector's otlphttp exporter sends them) or follow the files of the "
        "Collector's file exporter (--watch), make each trace a row as judge traces extract "
        "does (the traces that give none counted with their reasons), judge a sample of "
        "them within --budget, and keep each --window's metrics with intervals in --state. "
        "A restart, even after kill -9, loses nothing and judges nothing twice. Exit codes: "
        "0 done; 1 (--once) an alert fired; 2 a usage, input or configuration error; "
        "143 SIGTERM (the batch in hand is finished first).",
    )
    p.add_argument("--state", required=True, metavar="DIR", help="the monitor's state folder")
    p.add_argument(
        "--listen",
        metavar="[HOST:]PORT",
        help=f"receive OTLP/HTTP on POST /v1/traces (protobuf or JSON, gzip) and answer GET "
        f"/healthz; HOST defaults to 127.0.0.1 (loopback: give 0.0.0.0 to take traces from "
        f"other machines, with --token); OTLP's port is {DEFAULT_PORT}",
    )
    p.add_argument(
        "--watch",
        metavar="DIR",
        help="follow the OTLP/JSON lines files the Collector's file exporter writes in DIR, "
        "through rotation",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="process what is new (the files new in --watch, the traces and rows the state "
        "holds), close the windows that are over, and exit: for cron and CI",
    )
    p.add_argument(
        "--token",
        help=f"require 'Authorization: Bearer TOKEN' of senders (else 401); default ${TOKEN_ENV}",
    )
    p.add_argument(
        "--metrics",
        help="comma-separated metric names (default: judge eval's default metrics)",
    )
    llm_options(p)
    module_option(p)
    p.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="FIELD=ATTRIBUTE",
        help="read a field from a span attribute of custom instrumentation (as judge traces "
        "extract --map)",
    )
    p.add_argument(
        "--sample-rate",
        type=float,
        default=1.0,
        metavar="SHARE",
        help="the share of traces judged, chosen by a hash of the trace id (default 1)",
    )
    p.add_argument(
        "--budget",
        metavar="LIMIT",
        help="judge requests (200/h, 5000/day; a number alone is per hour) or dollars "
        "($3/day) at most, each row's as the dry run estimates it (dollars at the model's "
        "list price: refused when it is unknown); spent in steps of the traces' start times "
        "(5 minutes of an hour, hours of a day) so that a burst takes only its step's share "
        "(what a quiet step leaves goes on); the rest are counted as over_budget. What was "
        "spent is kept in --state across restarts",
    )
    p.add_argument(
        "--window",
        default="1h",
        help="a window: a duration of the traces' start times (30m, 1h, 1d) or a number of "
        "judged traces (500) (default 1h)",
    )
    p.add_argument(
        "--baseline-windows",
        type=int,
        default=None,
        metavar="K",
        help="the first K windows are the baseline (default 3; not with --baseline-run)",
    )
    p.add_argument(
        "--baseline-run",
        metavar="REF",
        help="the baseline is this run's per-row scores (from the run store, --runs): "
        "'pinned' for the run pinned with judge runs baseline, or a run's id, id prefix or "
        "name; every window is checked from the first. Refused when the run lacks a "
        "monitored metric or was judged by another judge model or other prompt versions",
    )
    p.add_argument(
        "--baseline-other-judge",
        action="store_true",
        help="take --baseline-run even when its judge model, embedding model or prompt "
        "versions differ from the monitor's (its scores may be on another scale)",
    )
    runs_path_option(p)
    p.add_argument(
        "--alpha",
        type=float,
        default=0.001,
        help="the false-alarm rate per window of each metric that did not drop (default "
        "0.001: at most one false alert in 1,000 windows, by the test's guarantee)",
    )
    p.add_argument(
        "--webhook",
        metavar="URL",
        help="POST each alert as JSON to URL, at least once: queued in --state with the alert "
        "and posted (retried with backoff, again after 60 s and at the next start, even "
        'after kill -9) until URL answers 2xx; every copy has the alert\'s "id" (and '
        "Idempotency-Key header) to de-duplicate by; a failure is said on stderr",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics while the monitor runs "
        "(with --listen or --watch, not --once): traces received, sampled, judged and "
        "skipped, the queue, the judge's requests and the budget left, each metric's "
        "window mean with its interval and the baseline, the drop test and the alerts",
    )
    p.add_argument(
        "--metrics-host",
        metavar="HOST",
        help="the address --metrics-port listens on (default 127.0.0.1, loopback: give "
        "0.0.0.0 for a Prometheus on another machine)",
    )
    p.add_argument(
        "--min-drop",
        type=float,
        default=0.0,
        metavar="D",
        help="do not alert on drops smaller than D in the metric's units (default 0)",
    )
    p.add_argument(
        "--linger",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds a trace waits for late spans after its root span (or its last span) "
        "(default 30; --once completes every trace it holds)",
    )
    p.add_argument(
        "--late",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="the longest a time window waits after its end for traces that started inside "
        "it and are still open (default 300); a row that comes after its window closed is "
        "judged and counted as late, with its window",
    )
    p.add_argument(
        "--keep-traces",
        metavar="DURATION",
        help="forget a trace's row (its fields, scores and evidence) this long after it was "
        "completed and judged (7d, 12h, 30m; 0: at once), so the state stays bounded; its "
        "numbers stay in the counts and metrics. Kept whatever their age: rows pending, rows "
        "of windows still open and of the baseline windows, each alert's worst traces, and "
        "every window's figures and alert (default: keep every trace)",
    )
    p.add_argument(
        "--batch", type=int, default=32, metavar="N", help="rows judged at once (default 32)"
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="judge each batch in N fresh processes sharing the cache, as judge eval "
        "--processes does, when one process's client is the limit (default 1: here)",
    )
    p.add_argument(
        "--ray",
        action="store_true",
        help="judge each batch on Ray (needs judge[ray]), as judge eval --ray does: a pool of "
        "--ray-actors actors, each with its own session and its own cache file in the "
        "directory beside --cache (cache.sqlite -> cache.ray/); not with --processes",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="the Ray cluster to join (e.g. 10.0.0.1:6379, as `ray start --head` prints); "
        "implies --ray; default: a local Ray started by the monitor",
    )
    p.add_argument(
        "--ray-actors",
        type=int,
        default=2,
        metavar="N",
        help="actors judging each batch with --ray (default 2)",
    )
    p.add_argument(
        "--queue",
        type=int,
        default=64,
        metavar="N",
        help="requests held by the receiver before it answers 503 Retry-After (default 64)",
    )
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="say only alerts and errors on stderr, and the address listened on when the "
        "system chose its port (--listen :0, --metrics-port 0)",
    )
    p.set_defaults(func=run_monitor)


def listen_address(value: str) -> tuple[str, int]:
    """--listen [HOST:]PORT as (host, port); the host defaults to loopback."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise JudgeError(f"--listen {value}: give [HOST:]PORT, e.g. 4318 or 127.0.0.1:4318")
    return host or "127.0.0.1", number


def run_monitor(args: argparse.Namespace) -> int:
    """The `judge monitor` command."""
    from judge.cli.words import cli_words
    from judge.monitor.alerts import drop_check
    from judge.monitor.monitor import Monitor, MonitorConfig

    if args.once and args.listen:
        raise JudgeError("--once processes what is new and exits: it does not --listen")
    if not (args.once or args.listen or args.watch):
        raise JudgeError("give --listen [HOST:]PORT, --watch DIR, or --once")
    if args.once and (args.metrics_port is not None or args.metrics_host):
        flag = "--metrics-port" if args.metrics_port is not None else "--metrics-host"
        raise JudgeError(
            f"{flag} serves metrics while the monitor runs, and --once exits after one pass: "
            "drop --once (run with --listen or --watch) or drop the metrics flags"
        )
    if args.metrics_host and args.metrics_port is None:
        raise JudgeError("--metrics-host HOST: give --metrics-port PORT too")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise JudgeError(f"--metrics-port {args.metrics_port}: give a port from 0 to 65535")
    # The numbers MonitorConfig checks too, said here with their flags and as given.
    if not args.linger >= 0:  # NaN too: no trace would ever be complete
        raise JudgeError(f"--linger {args.linger:g}: give seconds, 0 or more")
    if not 0 <= args.late < math.inf:  # NaN or inf: a window could wait forever
        raise JudgeError(f"--late {args.late:g}: give seconds, 0 or more")
    if args.keep_traces is not None:
        from judge.monitor.windows import parse_duration

        if parse_duration(args.keep_traces) is None:
            raise JudgeError(
                f"--keep-traces {args.keep_traces}: give a duration, e.g. 7d, 12h or 30m "
                "(0: as soon as nothing reads them)"
            )
    if not 0 <= args.sample_rate <= 1:
        raise JudgeError(f"--sample-rate {args.sample_rate:g}: give a share from 0 to 1")
    if (args.ray or args.ray_address) and args.processes > 1:
        raise JudgeError(
            f"--processes {args.processes} cannot be used with --ray: Ray has its own actors "
            "(--ray-actors); drop one of them"
        )
    for flag, number in (
        ("--batch", args.batch),
        ("--processes", args.processes),
        ("--ray-actors", args.ray_actors),
        ("--queue", args.queue),
        ("--baseline-windows", args.baseline_windows),
    ):
        if number is not None and number < 1:
            raise JudgeError(f"{flag} {number}: give 1 or more")
    if not 0 < args.alpha < 1:
        raise JudgeError(f"--alpha {args.alpha}: give a false-alarm rate per window in (0, 1)")
    if not 0 <= args.min_drop < 1:
        raise JudgeError(f"--min-drop {args.min_drop}: give a drop in [0, 1)")
    if args.baseline_windows is not None and args.baseline_run:
        raise JudgeError(
            f"--baseline-windows {args.baseline_windows} takes the first windows as the "
            "baseline, and --baseline-run takes a run: give one of them"
        )
    if args.baseline_other_judge and not args.baseline_run:
        raise JudgeError("--baseline-other-judge applies to --baseline-run REF: give both")
    if args.webhook and not args.webhook.startswith(("http://", "https://")):
        raise JudgeError(f"--webhook {args.webhook}: give an http:// or https:// URL")
    address = listen_address(args.listen) if args.listen else None
    token = args.token or os.environ.get(TOKEN_ENV) or None
    metrics = metrics_given(args)
    judge = judge_options(args)
    if judge.settings.model:
        llm, embeddings, cache = judge.open()
    else:
        check_retrieval_only(metrics)
        llm, embeddings, cache = None, None, None
    config = MonitorConfig(
        state=args.state,
        metrics=metrics,
        llm=llm,
        embeddings=embeddings,
        cache=cache,
        sample_rate=args.sample_rate,
        processes=args.processes,
        ray=args.ray or args.ray_address is not None,
        ray_address=args.ray_address,
        ray_actors=args.ray_actors,
        budget=args.budget,
        window=args.window,
        baseline_windows=(
            MonitorConfig.baseline_windows
            if args.baseline_windows is None
            else args.baseline_windows
        ),
        baseline_run=args.baseline_run,
        runs=args.runs,
        baseline_other_judge=args.baseline_other_judge,
        words=cli_words,
        linger=args.linger,
        late=args.late,
        batch=args.batch,
        queue=args.queue,
        seed=args.seed,
        mapping=trace_mapping(args.map),
        check=drop_check(alpha=args.alpha, min_drop=args.min_drop),
        webhook=args.webhook,
        keep_traces=args.keep_traces,
        progress=not args.quiet,
    )
    monitor = Monitor(config)
    try:
        report = asyncio.run(_run(monitor, args, address, token))
    finally:
        monitor.close()
    for line in report.lines():
        print(terminal_text(cli_words(line)))
    if report.stopped:
        print("judge: stopped (SIGTERM) after the batch in hand", file=sys.stderr)
        return EXIT_TERMINATED
    return EXIT_ALERT if args.once and report.alerts else 0


async def _run(
    monitor: Any, args: argparse.Namespace, address: tuple[str, int] | None, token: str | None
) -> Any:
    loop = asyncio.get_running_loop()
    # SIGTERM sets the monitor's stop: the receiver closes, the batch in hand is finished.
    loop.add_signal_handler(signal.SIGTERM, monitor.stop.set)
    try:
        if args.once:
            return await monitor.aonce(args.watch)
        host, port = address if address is not None else (None, 0)
        return await monitor.aserve(
            host=host,
            port=port,
            watch=args.watch,
            token=token,
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host or "127.0.0.1",
        )
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
