"""`judge traces hops TRACES... --qrels FILE`: an agent's retrieval scored hop by hop, where
the gold documents were found and lost, and its tool calls against the expected ones."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from judge.cli.options import metric_option, metrics_of
from judge.errors import JudgeError
from judge.formatting import terminal_text
from judge.ir.measure_names import DEFAULT_METRICS
from judge.lines import not_a_file


def add_hops_parser(actions: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `judge traces hops`."""
    h = actions.add_parser(
        "hops",
        help="score each retrieval hop of agent traces against relevance labels, find where "
        "gold documents were lost, and score tool calls",
        description="Each retriever span of a trace is a hop, in start order. Every hop's "
        "documents are scored against the trace's relevance labels (--qrels by trace id, or "
        "--rows by question) with judge ir's exact metrics, and a table per hop index printed "
        "(the mean over the traces that have that hop). Per trace (--output): the first hop "
        "that retrieved a gold document, the hop after which a gold document was no longer "
        "passed on (absent from every later hop and from the generator's input: the last LLM "
        "span's input.documents, else the documents' contents found in its prompt), whether "
        "the generator saw a gold document, and, given expected tools, tool_call_precision, "
        "tool_call_recall, tool_argument_match and tool_call_order of the tool spans.",
    )
    h.add_argument("traces", nargs="+", metavar="TRACES", help="trace files, read in order")
    h.add_argument(
        "--qrels", metavar="FILE", help="TREC qrels whose query ids are trace ids: the gold"
    )
    h.add_argument(
        "--rows",
        metavar="FILE",
        help="a test set (JSONL, JSON, CSV, Parquet) whose rows give the labels by question "
        "(or by a trace_id column): a relevance column (relevant ids, or {id: grade}) and/or "
        "an expected_tools column ([{name, arguments}])",
    )
    h.add_argument(
        "--expected-tools",
        metavar="FILE",
        help="JSON lines {trace_id (or question), expected_tools: [{name, arguments}]}",
    )
    h.add_argument(
        "--results",
        metavar="RUN",
        help="a judge eval output (folder or results.jsonl) of the same traces, with "
        "faithfulness (or another metric that verifies the answer's claims): each claim is "
        "attributed to the hop whose document supported it",
    )
    metric_option(
        h,
        f"retrieval metric, repeatable or comma-separated (default: {','.join(DEFAULT_METRICS)})",
    )
    h.add_argument(
        "-l",
        "--relevance-level",
        type=int,
        default=1,
        metavar="LEVEL",
        help="smallest grade that counts as relevant, gold (default 1)",
    )
    h.add_argument(
        "-o", "--output", metavar="FILE", help="write one JSON line per trace (JSONL) here"
    )
    h.add_argument(
        "--trec-runs",
        metavar="DIR",
        help="write hop-N.run (qid = trace id) and hop-N.qrels per hop, and qrels, here: "
        "judge ir DIR/hop-N.qrels DIR/hop-N.run gives line N of the table; judge compare "
        "--qrels DIR/qrels DIR/hop-1.run DIR/hop-2.run compares two hops",
    )
    h.add_argument(
        "--from",
        dest="source",
        choices=["otlp", "phoenix", "langfuse"],
        help="the traces' format (default: told from each file's content)",
    )
    h.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="FIELD=ATTRIBUTE",
        help="read from span attributes of custom instrumentation (repeatable): "
        "question=ATTRIBUTE (the first span, from the root down, that has it) and "
        "retrieved_ids=ATTRIBUTE (every span that has it is a hop, its ranked ids)",
    )
    h.add_argument(
        "--linger",
        type=int,
        default=None,
        metavar="SPANS",
        help="spans read after a trace's root before the trace is complete (default 10000)",
    )
    h.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="what to print: text or JSON (default text)",
    )
    h.set_defaults(func=run_hops)


def run_hops(args: argparse.Namespace) -> int:
    """The `judge traces hops` command."""
    from judge.cli.options import trace_mapping
    from judge.traces.assemble import DEFAULT_LINGER
    from judge.traces.hops import (
        HOP_MAPPABLE,
        hop_table,
        hops,
        read_agent_traces,
        read_labels,
        summary_lines,
    )

    if all(p is None for p in (args.qrels, args.rows, args.expected_tools, args.results)):
        raise JudgeError(
            "give the labels to score the hops with: --qrels FILE (by trace id) or --rows "
            "FILE (by question), and/or --expected-tools FILE, and/or --results RUN"
        )
    for path in args.traces:
        if not Path(path).is_file():
            raise JudgeError(not_a_file(path, "trace file"))
    for flag, path in (
        ("--qrels", args.qrels),
        ("--rows", args.rows),
        ("--expected-tools", args.expected_tools),
    ):
        if path is not None and not Path(path).is_file():
            raise JudgeError(f"{flag} {path}: no such file")
    linger = DEFAULT_LINGER if args.linger is None else args.linger
    if linger < 0:
        raise JudgeError(f"--linger {args.linger}: give a number of spans, 0 or more")
    read = {
        Path(p).resolve() for p in [*args.traces, args.qrels, args.rows, args.expected_tools] if p
    }
    if args.output is not None and Path(args.output).resolve() in read:
        raise JudgeError(f"--output {args.output} is a file being read: write it elsewhere")
    if args.trec_runs is not None:
        folder = Path(args.trec_runs).resolve()
        if any(path.parent == folder for path in read):
            raise JudgeError(
                f"--trec-runs {args.trec_runs} holds a file being read: give the TREC files "
                "a folder of their own"
            )
        output = Path(args.output).resolve() if args.output is not None else None
        if (
            output is not None
            and output.parent == folder
            and re.fullmatch(r"qrels|hop-[0-9]+\.(run|qrels)", output.name)
        ):
            raise JudgeError(
                f"--output {args.output} is a name --trec-runs writes there: name it otherwise"
            )
    labels = read_labels(qrels=args.qrels, rows=args.rows, expected_tools=args.expected_tools)
    if args.results is not None:
        from judge.traces.hops import read_claims

        read_claims(args.results, labels)
    metrics = metrics_of(args) or list(DEFAULT_METRICS)
    mapping = trace_mapping(args.map)
    hops_only = [field for field in mapping if field not in HOP_MAPPABLE]
    if hops_only:
        raise JudgeError(
            f"--map {hops_only[0]}: judge traces hops reads {', '.join(HOP_MAPPABLE)} from "
            "span attributes, not the answer or contexts (those are judge traces extract's)"
        )
    traces = read_agent_traces(args.traces, source=args.source, linger=linger, mapping=mapping)
    report = hops(
        traces,
        labels,
        metrics,
        relevance_level=args.relevance_level,
        output=args.output,
        trec_runs=args.trec_runs,
        on_record=lambda record: None,  # written to --output, or not wanted: not kept
    )
    wrote = [args.output] if args.output is not None else []
    if args.trec_runs is not None:
        names = [
            "qrels",
            *(f"hop-{row.hop}.{k}" for row in report.per_hop for k in ("qrels", "run")),
        ]
        wrote.append(f"{Path(args.trec_runs) / names[0]}, " + ", ".join(names[1:]))
    if args.format == "json":
        json.dump(report.to_dict(), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    if report.per_hop:
        print(terminal_text(hop_table(report)))
    else:
        print("no labelled trace has a hop: nothing scored per hop")
    for line in summary_lines(report):
        print(terminal_text(line))
    if wrote:
        print(terminal_text(f"wrote {', '.join(wrote)}"))
    return 0
