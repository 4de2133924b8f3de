"""`judge traces export RESULTS --rows ROWS ...`: a run's scores back beside the traces it
judged, as OpenTelemetry `gen_ai.evaluation.result` events (an OTLP JSON file, an OTLP/HTTP
endpoint) and as Phoenix span evaluations (parquet)."""

from __future__ import annotations

import argparse
from pathlib import Path

from judge.cli.finish import export_scores
from judge.cli.options import check_destinations, destination_options, destinations
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
        "the run judged, or the sessions file, whose turns name their traces). An "
        "undefined score becomes an event without a score value, its reason as the "
        "explanation. Rows without a trace are counted and named, not sent.",
    )
    p.add_argument(
        "results", help="the --out folder of the `judge eval` run (or its results.jsonl)"
    )
    p.add_argument(
        "--rows",
        required=True,
        metavar="FILE",
        help="the rows the run judged, a .jsonl with id, trace_id and span_id columns (as "
        "`judge traces extract` writes them), or the conversations it judged (`judge traces "
        "extract --sessions`: each turn's trace_id and span_id)",
    )
    destination_options(p)
    p.set_defaults(func=run_export_command)


def run_export_command(args: argparse.Namespace) -> int:
    """The `judge traces export` command."""
    from judge.traces.export import read_rows, trace_links

    if not destinations(args):
        raise JudgeError("say where the scores go: give --otlp-json, --export-otlp or --phoenix")
    check_destinations(args)
    links = trace_links(read_rows(args.rows), path=args.rows, named=f"--rows {args.rows}")
    if not any(links.values()):
        raise JudgeError(
            f"--rows {args.rows}: no row has a trace_id (nor any turn of a conversation); give "
            "the rows `judge traces extract` wrote (or the conversations of `judge traces "
            "extract --sessions`), which the run judged"
        )
    export_scores(args, Path(args.results), links, f"--rows {args.rows}")
    return 0
