"""`judge traces export RESULTS --rows ROWS ...`: a run's scores back beside the traces it
judged, as OpenTelemetry `gen_ai.evaluation.result` events (an OTLP JSON file, an OTLP/HTTP
endpoint) and as Phoenix span evaluations (parquet)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from judge.errors import JudgeError


def add_export_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `export` in the subcommands of `judge traces`."""
    p = sub.add_parser(
        "export",
        help="write a run's scores as OpenTelemetry evaluation events linked to their traces",
        description="Turn the scores of a `judge eval` run on rows read from traces into "
        "OpenTelemetry gen_ai.evaluation.result events (gen_ai.evaluation.name, "
        ".score.value, .score.label, .explanation), one per row and metric, each linked to "
        "the trace and span its row came from (joined by the rows' id: give the rows file "
        "the run judged). An undefined score becomes an event without a score value, its "
        "reason as the explanation. Rows without a trace are counted and named, not sent.",
    )
    p.add_argument(
        "results", help="the --out folder of the `judge eval` run (or its results.jsonl)"
    )
    p.add_argument(
        "--rows",
        required=True,
        metavar="FILE",
        help="the rows the run judged, a .jsonl with id, trace_id and span_id columns (as "
        "`judge traces extract` writes them)",
    )
    p.add_argument(
        "--otlp-json",
        metavar="FILE",
        help="write the events as OTLP JSON lines (one ExportLogsServiceRequest per line, "
        "the OpenTelemetry Collector's file exporter format, read by its otlpjsonfile receiver)",
    )
    p.add_argument(
        "--export-otlp",
        metavar="URL",
        help="send the events with the OpenTelemetry SDK's OTLP/HTTP log exporter (pip "
        "install 'judge[otel]'): a collector's address such as http://localhost:4318 (the "
        "path /v1/logs is added) or a full logs URL; headers from OTEL_EXPORTER_OTLP_HEADERS",
    )
    p.add_argument(
        "--phoenix",
        metavar="FILE",
        help="write Phoenix span evaluations to a .parquet file (columns name, span_id, "
        "score, label, explanation, annotator_kind): "
        "Client().spans.log_span_annotations_dataframe(dataframe=pd.read_parquet(FILE))",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="label the metric's events pass or fail against VALUE, on the metric's good "
        "side (hallucination_rate passes at or below it); without one, no label (repeatable)",
    )
    p.set_defaults(func=run_export_command)


def threshold_map(items: list[str]) -> dict[str, float]:
    """The --threshold METRIC=VALUE pairs as numbers by metric."""
    out: dict[str, float] = {}
    for item in items:
        metric, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not metric.strip() or math.isnan(number):
            raise JudgeError(
                f"--threshold {item!r}: write it as METRIC=NUMBER, e.g. faithfulness=0.8"
            )
        out[metric.strip()] = number
    return out


def run_export_command(args: argparse.Namespace) -> int:
    """The `judge traces export` command."""
    from judge.traces.export import (
        evaluation_events,
        phoenix_evaluations,
        read_results,
        read_rows,
        send_otlp,
        trace_links,
        write_otlp_json,
        write_phoenix,
    )

    if not (args.otlp_json or args.export_otlp or args.phoenix):
        raise JudgeError("say where the scores go: give --otlp-json, --export-otlp or --phoenix")
    if args.phoenix and Path(args.phoenix).suffix != ".parquet":
        raise JudgeError(f"--phoenix {args.phoenix}: give a .parquet file")
    limits = threshold_map(args.threshold)
    links = trace_links(read_rows(args.rows), path=args.rows)
    if not any(links.values()):
        raise JudgeError(
            f"--rows {args.rows}: no row has a trace_id; give the rows `judge traces "
            "extract` wrote, which the run judged"
        )
    results = Path(args.results)
    results_file = results / "results.jsonl" if results.is_dir() else results
    events = evaluation_events(read_results(results), links, thresholds=limits)
    for note in events.notes():
        print(f"judge: note: {note}", file=sys.stderr)
    if not events.events:
        raise JudgeError(
            f"no result row of {args.results} matched a row of --rows {args.rows} by id: "
            "give the rows file the run judged"
        )
    # When judge judged: the results' time, so the same results give the same bytes.
    stamp = results_file.stat().st_mtime_ns
    rows = len({e.row_id for e in events})
    metrics = len({e.metric for e in events})
    what = f"{len(events)} evaluation events ({rows} rows, {metrics} metrics)"
    if args.otlp_json:
        write_otlp_json(events.events, args.otlp_json, time_unix_nano=stamp)
        print(f"wrote {what} to {args.otlp_json}")
    if args.phoenix:
        evaluations = phoenix_evaluations(events)
        write_phoenix(evaluations, args.phoenix)
        framed = sum(len(f) for f in evaluations.frames.values())
        framed_metrics = len(evaluations.frames)  # a metric without a score has no frame
        print(
            f"wrote {framed} Phoenix span evaluations ({framed_metrics} metrics) to {args.phoenix}"
        )
        if evaluations.without_span:
            print(
                f"judge: note: {evaluations.without_span} events left out of --phoenix: "
                "their rows have a trace_id but no span_id, or one that is not an "
                "OpenTelemetry span id (Phoenix evaluates spans)",
                file=sys.stderr,
            )
        if evaluations.without_score:
            print(
                f"judge: note: {evaluations.without_score} events without a score (undefined, "
                "or the judge failed) left out of --phoenix: Phoenix's client cannot send a "
                "null score; the OTLP events keep them with their reason",
                file=sys.stderr,
            )
    if args.export_otlp:
        sent = send_otlp(events.events, args.export_otlp, time_unix_nano=stamp)
        print(f"sent {sent} evaluation events to {args.export_otlp}")
    return 0
