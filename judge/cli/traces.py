"""`judge traces extract TRACES... -o rows.jsonl`: production traces as `judge eval` rows
(or, with --sessions, conversations), the traces that gave none in skipped.jsonl, and TREC
runs of their retrieval spans."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from judge.cli.options import runs_path, runs_path_option, trace_mapping, trace_source_options
from judge.cli.traces_export import add_export_parser
from judge.cli.traces_hops import add_hops_parser
from judge.errors import JudgeError
from judge.formatting import terminal_text
from judge.lines import not_a_file


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the traces subcommand and its actions."""
    p = sub.add_parser(
        "traces",
        help="read production traces (OTLP, Phoenix, Langfuse) as rows and TREC runs",
        description="Production RAG traces as judge's input: each trace one row (question, "
        "answer, contexts, retrieved ids and scores, trace and span ids, time, latency, "
        "models, tokens, session), and its retrieval spans as TREC runs.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    e = actions.add_parser(
        "extract",
        help="write the rows of trace files, the traces skipped, and TREC runs",
        description="Read trace files (the OpenTelemetry Collector's file exporter: "
        "OTLP/JSON lines, or protobuf; gzip of either; Phoenix's span export as parquet; "
        "Langfuse's observations as JSON) into one row per trace for judge eval. The "
        "question and answer are the input and output of the root span (the first span "
        "from the roots down that has an input); the contexts are the documents "
        "the generator saw (every retriever's documents in order, a reranker replacing what "
        "came before it with its output). A trace that gives no row (no retriever span, no "
        "output, no input, no root span) is written to --skipped with its reason and "
        "counted, never dropped silently. The files are streamed: memory does not grow "
        "with the number of traces.",
    )
    e.add_argument("traces", nargs="+", metavar="TRACES", help="trace files, read in order")
    e.add_argument("-o", "--out", required=True, metavar="PATH", help="the rows (JSONL) to write")
    e.add_argument(
        "--sessions",
        action="store_true",
        help="write conversations instead of rows: one line per session (session.id, "
        'gen_ai.conversation.id): {"id", "turns": [user question, assistant answer with '
        "contexts, retrieved_ids, trace_id, query], ...}, each trace one turn in start "
        "order; a trace without a session id is skipped (no_session). --since, --judged "
        "and --sample then choose sessions: a session kept has all its turns",
    )
    e.add_argument(
        "--run",
        metavar="PATH",
        help="write a TREC run of the documents the generator saw, per trace (qid = the "
        "trace id; ranked in the spans' order), for judge ir and judge compare",
    )
    e.add_argument(
        "--retriever-run",
        metavar="PATH",
        help="write the TREC run of the retriever spans' documents before any reranker "
        "(qid = the trace id): judge compare it with --run to see what the reranker changed",
    )
    e.add_argument(
        "--skipped",
        metavar="PATH",
        help="where to list the traces that gave no row, one JSON line each with trace_id, "
        "reason and message (default: skipped.jsonl beside --out)",
    )
    trace_source_options(e)
    e.add_argument(
        "--since",
        metavar="ISO",
        help="only traces whose root span started at or after this UTC date or time "
        "(e.g. 2026-12-04 or 2026-12-04T06:00:00Z)",
    )
    e.add_argument(
        "--judged",
        action="append",
        default=[],
        metavar="PATH|RUN",
        help="leave out the traces judged before: their ids (trace_id, else id) in a "
        "rows.jsonl or results.jsonl, a judge eval output folder, or a run of the run "
        "store by id, name or 'baseline' (repeatable)",
    )
    e.add_argument(
        "--judged-runs",
        action="store_true",
        help="leave out the traces of every run recorded in the run store (--runs): a daily "
        "job judges only traces no recorded run judged",
    )
    runs_path_option(e)
    e.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="keep N traces, stratified by day (each UTC day in proportion to its traces)",
    )
    e.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="the sample's seed: the same seed and traces give the same sample, whatever "
        "the order of the files (default 0)",
    )
    e.add_argument(
        "--linger",
        type=int,
        default=None,
        metavar="SPANS",
        help="spans read after a trace's root span (or, when no span says it is the root, "
        "after the trace's last span) before the trace is taken as complete (default "
        "10000): raise it when spans of a trace come long after its root",
    )
    e.set_defaults(func=run_extract)
    add_export_parser(actions)
    add_hops_parser(actions)


def judged_sources(args: argparse.Namespace) -> list[str]:
    """The files and folders of traces judged before: --judged as given when it is a
    path, else a run of the run store; with --judged-runs, every recorded run's output."""
    sources = [p for p in args.judged if Path(p).exists()]
    refs = [p for p in args.judged if not Path(p).exists()]
    if not refs and not args.judged_runs:
        return sources
    from judge.run.folder import RunFolder
    from judge.runs.store import open_existing

    needed = (
        f"--judged {refs[0]} is no file or folder, so a run, but there is "
        if refs
        else ("--judged-runs reads the run store, but there is ")
    )
    with open_existing(runs_path(args), needed) as store:
        sources += [store.get(ref).out_dir for ref in refs]
        if args.judged_runs:
            sources += [
                r.out_dir
                for r in store.runs()
                if not r.damaged and RunFolder(r.out_dir).results.is_file()
            ]
    return sources


def run_extract(args: argparse.Namespace) -> int:
    """The `judge traces extract` command."""
    from judge.traces.assemble import DEFAULT_LINGER
    from judge.traces.extract import extract, judged_ids, parse_since

    mapping = trace_mapping(args.map)
    if args.sample is not None and args.sample < 1:
        raise JudgeError(f"--sample {args.sample}: give a number of traces, at least 1")
    linger = DEFAULT_LINGER if args.linger is None else args.linger
    if linger < 0:
        raise JudgeError(f"--linger {args.linger}: give a number of spans, 0 or more")
    if args.since is not None:
        try:
            parse_since(args.since)
        except JudgeError:
            raise JudgeError(
                f"--since {args.since}: give an ISO 8601 date or time, e.g. 2026-12-04 or "
                "2026-12-04T06:00:00Z"
            ) from None
    for path in args.traces:
        if not Path(path).is_file():
            raise JudgeError(not_a_file(path, "trace file"))
    from judge.run.folder import RunFolder

    sources = judged_sources(args)
    judged = judged_ids(sources)
    skipped = args.skipped or str(RunFolder(Path(args.out).parent).skipped)
    summary = extract(
        args.traces,
        args.out,
        run=args.run,
        retriever_run=args.retriever_run,
        skipped=skipped,
        judged_from=sources,
        source=args.source,
        mapping=mapping,
        since=args.since,
        judged=judged,
        sample=args.sample,
        seed=args.seed,
        linger=linger,
        sessions=args.sessions,
    )
    for line in summary.lines():
        line = line.replace("before since", "before --since").replace("linger", "--linger")
        print(terminal_text(line))
    wrote = [args.out, *(p for p in (args.run, args.retriever_run) if p), skipped]
    print(terminal_text(f"wrote {', '.join(wrote)}"))
    if not summary.rows:
        what = "a turn of a session" if args.sessions else "a row"
        print(f"judge: note: no trace gave {what}: see the reasons above", file=sys.stderr)
    return 0
