"""`judge eval DATA --model M ...`: evaluate a dataset; write results, summary and report."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.cli.finish import (
    export_scores,
    finish_run,
    merge_into,
    record_run,
    say_damaged,
    say_notes,
)
from judge.cli.label_options import label_options, labels_of
from judge.cli.options import (
    JudgeOptions,
    check_destinations,
    check_retrieval_only,
    column_map,
    data_options,
    destination_options,
    destinations,
    gate_options,
    gates_of,
    judge_options,
    metrics_given,
    model_options,
    models_of,
    runs_options,
    trace_mapping,
    trace_source_options,
)
from judge.cli.output import DRY_RUN_FORMAT, output_options
from judge.errors import CacheStoreError, JudgeError, LLMConfigError
from judge.formatting import counted, shell_word, terminal_text

if TYPE_CHECKING:  # imported when a command runs: `judge ir` must not load litellm
    from judge.cache.store import Cache
    from judge.labels.estimate import Labels
    from judge.llm.config import LLM, Embeddings
    from judge.metrics.resolve import MetricLike
    from judge.run.dry_report import DryRun
    from judge.run.gates import Gates


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the eval subcommand."""
    p = sub.add_parser(
        "eval",
        help="evaluate a dataset of RAG samples (LLM-judged and retrieval)",
        description="Evaluate every row of DATA and write results, summary and "
        "report to --out. Exit codes: 0 passed; 1 a --gate (or --fail-under) was missed; "
        "2 a usage, input, configuration, cache or output error (a metric no row can "
        "score for want of its columns, API key missing or refused, unknown model, no "
        "server at --api-base, a full or read-only disk, another run on --out: the run "
        "stops at once, rows finished so far are kept and a rerun resumes them); 3 scores "
        "are missing: judges failed in more than --max-error-rate of the judged rows, rows "
        "could not be read in more than that share of all rows, or a --replay missed a "
        "judgment (3 wins over 1); 70 a bug in judge; 130 Ctrl-C; 143 SIGTERM.",
    )
    p.add_argument(
        "data",
        help=".jsonl, .json, .csv, .parquet, a saved dataset directory, or hf://OWNER/NAME[:SPLIT] "
        "for a dataset on the hub (only then is the hub asked). Columns: question, answer, "
        "contexts (a list of strings, in retrieval order), ground_truth, id; for retrieval "
        "metrics retrieved_ids (ranked doc ids) and relevance (relevant ids, or "
        "{doc_id: grade}); RAGAS's names work too, others map with --column. An OTLP trace "
        "file (see judge traces extract) is read as one row per trace",
    )
    _eval_options(p)
    p.set_defaults(func=run_eval)


def _eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics",
        help="comma-separated metric names (default: faithfulness, "
        "answer_relevancy if --embedding-model, context_precision, context_recall; "
        "plus judge ir's default retrieval metrics with retrieval columns)",
    )
    model_options(p)
    trace_source_options(p)
    destination_options(p)  # judge eval TRACES: the scores back beside the traces
    p.add_argument(
        "--out", default="judge-results", help="output directory (default: judge-results)"
    )
    gate_options(p)
    label_options(p)
    runs_options(p)
    p.add_argument(
        "--prompts",
        metavar="DIR",
        help="a prompt set: a folder of prompt files named after the built-in prompts they "
        "replace (verify.txt, ...), as judge align writes it; each file's hash is its version, "
        "so the run's fingerprint and cache keys are its own (default: the built-in prompts)",
    )
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="judge only shard I of N: the rows whose number modulo N is I-1 (row numbers "
        "stay the input's; conversations are split whole, by their number); run every I "
        "from 1 to N, then `judge merge OUT DIR...`",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="judge in N processes at once (N shards, then joined as judge merge joins "
        "them; same outputs): for more than one core's worth of judging, as a cached "
        "replay or a fast judge server needs (default 1; at most 4 per CPU core, and no "
        "more than there are rows)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="make no request and write nothing: read and check every row as a run would, "
        "say per metric how many rows it would score and why the others would be NaN "
        "(no_ground_truth, no_contexts, empty_answer, row_error, ...), and estimate the "
        "requests, tokens and cost (cost from --model's list price; without --model the "
        "data is still checked and counted). Exit 0 when the data is usable: every metric "
        "can run and score a row, and unreadable rows (and rows over the context window) "
        "are within --max-error-rate; else 2",
    )
    output_options(p, format_help=DRY_RUN_FORMAT)
    p.add_argument(
        "--ray",
        action="store_true",
        help="judge on Ray (needs judge[ray]): a pool of actors, each with its own session "
        "and its own cache file in the directory beside --cache (cache.sqlite -> cache.ray/); "
        "--concurrency is then per actor. Same outputs as a plain run",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster to join (e.g. 10.0.0.1:6379, as `ray start --head` prints); "
        "implies --ray; default: a local Ray started for the run",
    )
    p.add_argument(
        "--ray-actors",
        type=int,
        default=2,
        metavar="N",
        help="actors judging at once with --ray (default 2)",
    )


def run_eval(args: argparse.Namespace) -> int:
    """The `judge eval` command."""
    from judge.run.evaluate import evaluate
    from judge.run.folder import RunFolder
    from judge.run.output_folder import OutputFolder
    from judge.run.shard import parse_shard

    gates = gates_of(args)
    labels = labels_of(args)  # a labels file that cannot be used fails before any request
    if labels is not None and args.shard is not None:
        raise JudgeError(
            "--labels correct the whole run's mean, and --shard judges part of it: give "
            "--labels to judge merge, which joins the shards into the whole run (or to judge "
            "estimate on the merged run)"
        )
    traces = read_trace_rows(args)
    data = traces.rows if traces is not None else args.data
    if destinations(args):
        if traces is None:
            raise JudgeError(
                f"--otlp-json, --export-otlp and --phoenix send the scores back beside the "
                f"traces they judge, and {args.data} holds no traces: give a trace file, or "
                "run judge traces export on this run's output with the rows it judged"
            )
        check_destinations(args)
    if args.prompts is not None:  # a set that cannot be used fails before anything else
        from judge.metrics.prompts import load_prompt_set

        load_prompt_set(args.prompts)
    if args.dry_run:
        return run_dry(args, data, gates, labels)
    if args.format != "text":
        raise JudgeError("--format json goes with --dry-run (a run writes summary.json to --out)")
    if args.processes < 1:
        raise JudgeError(f"--processes {args.processes}: give at least 1")
    if args.processes > max_processes():
        raise JudgeError(
            f"--processes {args.processes}: give at most {max_processes()} (4 per CPU core "
            "of this machine); more processes than that only compete for the cores"
        )
    if labels is not None:  # labels that cannot correct the run fail before any request
        check_labels(args, data, gates, labels)
    if args.processes > 1:
        return run_in_processes(args, gates, labels)
    if args.ray or args.ray_address:
        return run_on_ray(args, gates, labels)
    shard = parse_shard(args.shard) if args.shard is not None else None
    options = data_options(args)  # a malformed --column fails before a cache is opened
    judge = judge_options(args)
    metrics, llm, embeddings, cache = _judge_setup(args, judge)
    # Locked for the whole run: the checkpoint lives in the folder too.
    with OutputFolder(args.out, inputs=_data_files(data)) as folder:
        checkpoint = RunFolder(folder.path).checkpoint
        try:
            result = evaluate(
                data,
                metrics=metrics,
                llm=llm,
                embeddings=embeddings,
                cache=cache,
                checkpoint=checkpoint,
                shard=shard,
                gates=gates,
                prompts=args.prompts,
                **options,
            )
        except (LLMConfigError, CacheStoreError) as exc:  # the run stopped: it cannot work
            kept = checkpoint.is_file() and checkpoint.stat().st_size > 0
            resume = "; the rows finished before it are kept: rerun to resume" if kept else ""
            raise type(exc)(f"{exc}{resume}") from None
        say_damaged(result, judge.cache, replay=judge.replay)
        say_notes(result)
        code = finish_run(result, folder, gates, labels=labels)
    record_run(args, folder.path, "eval")  # not a shard's: judge merge records those
    if traces is not None and destinations(args):  # whatever the gates said: the traces' news
        export_scores(args, folder.path, traces.links, f"the traces of {args.data}")
    return code


@dataclass(frozen=True)
class TraceRows:
    """The rows of a trace file given as DATA, one per trace, and their traces (empty
    when the scores are not sent back)."""

    rows: list[dict[str, Any]]
    links: dict[str, Any]


def read_trace_rows(args: argparse.Namespace) -> TraceRows | None:
    """With --from, or a trace file as DATA (OTLP, Phoenix, Langfuse): the rows read
    from the traces (`judge.traces.extract.read_rows`), one per trace, the traces that
    gave none counted on stderr; None when DATA holds no traces."""
    from judge.traces.export import trace_links
    from judge.traces.extract import ExtractSummary, read_rows, source_of

    # A rows file is none of these: their columns (traceId, context.span_id) differ.
    given = args.source is not None or args.map
    if not given and not (Path(str(args.data)).is_file() and source_of(args.data)):
        return None
    if args.processes > 1 or args.ray or args.ray_address or args.shard is not None:
        raise JudgeError(
            f"{args.data} holds traces: --processes, --shard and --ray read rows files; write "
            f"the rows first with: judge traces extract {shell_word(args.data)} -o rows.jsonl"
        )
    summary = ExtractSummary()
    rows = list(
        read_rows(args.data, source=args.source, mapping=trace_mapping(args.map), summary=summary)
    )
    for line in summary.lines():
        print(terminal_text(f"judge: traces: {line}"), file=sys.stderr)
    if summary.skipped:
        print(
            f"judge: traces: list the skipped traces and why with: judge traces extract "
            f"{shell_word(args.data)} -o rows.jsonl --skipped skipped.jsonl",
            file=sys.stderr,
        )
    if not rows:
        raise JudgeError(f"{args.data}: no trace gave a row (see the reasons above)")
    # Only the scores sent back need the links: a row of a trace read again too late (see
    # judge.traces.assemble) shares its trace's id, which trace_links refuses.
    links = trace_links(rows, path=str(args.data)) if destinations(args) else {}
    return TraceRows(rows, links)


def run_dry(args: argparse.Namespace, data: Any, gates: Gates, labels: Labels | None = None) -> int:
    """`judge eval --dry-run`: the data checked and the run estimated, nothing sent or
    written; 0 when the data is usable, else a `judge: error:` line (exit 2), as for a
    gate, or labels (--labels), the run would refuse."""
    from judge.metrics.registry import Metric
    from judge.run.dry_run import dry_run
    from judge.run.plan import own_lower_is_better

    llm, embeddings = models_of(args)
    metrics = metrics_given(args)
    result = dry_run(
        data,
        metrics=metrics,
        llm=llm,
        embeddings=embeddings,
        column_map=column_map(args),
        shard=args.shard,
        max_error_rate=args.max_error_rate,
    )
    own = [m for m in metrics or [] if isinstance(m, Metric)]
    gates.check_metrics([m.name for m in result.metrics], own_lower_is_better(own))
    code = show_dry_run(result, args.format)
    if labels is not None:
        try:
            check_labels(
                args,
                data,
                gates,
                labels,
                metrics=[m.name for m in result.metrics],
                lower_is_better=own_lower_is_better(own),
            )
        except JudgeError as exc:
            raise JudgeError(f"--dry-run: a run would refuse the labels: {exc}") from None
    return code


def show_dry_run(result: DryRun, form: str) -> int:
    """Print a dry run (`form` "text" or "json") in the command line's words; 0 when the
    data is usable, else a `judge: error:` line (exit 2), as for a gate the run would
    refuse."""
    import json

    from judge.cli.words import cli_words

    if form == "json":
        shown = result.to_dict()
        shown["problems"] = [cli_words(p) for p in shown["problems"]]
        shown["notes"] = [cli_words(n) for n in shown["notes"]]
        for metric in shown["metrics"]:
            if metric["cannot_run"] is not None:
                metric["cannot_run"] = cli_words(metric["cannot_run"])
        print(terminal_text(json.dumps(shown, indent=2, ensure_ascii=False)))
    else:
        print(terminal_text(cli_words(result.table())))
    if not result.usable:
        more = len(result.problems) - 1
        above = f" (and {counted(more, 'more problem')} above)" if more else ""
        raise JudgeError(f"--dry-run: a run would not work: {result.problems[0]}{above}")
    return 0


def check_labels(
    args: argparse.Namespace,
    data: Any,
    gates: Gates,
    labels: Labels,
    *,
    metrics: Sequence[str] | None = None,
    lower_is_better: Sequence[str] = (),
) -> None:
    """Refuse labels that cannot correct the run (`Labels.check_rows`) before any row is
    judged, rather than once the whole run is: the run's `metrics` (default: planned as
    the run plans them), and the input's row ids read in a pass of their own that keeps
    only the labelled ids it meets (memory stays flat however many rows there are)."""
    from judge.run.inputs import open_input
    from judge.run.plan import own_lower_is_better, plan_run

    rows = open_input(data, column_map(args))
    if metrics is None:
        given = metrics_given(args)
        llm, embeddings = models_of(args)
        if llm is None:
            check_retrieval_only(given)
        plan, _ = plan_run(
            rows,
            rows.columns,
            rows.source,
            metrics=given,
            llm=llm,
            embeddings=embeddings,
            metric_modules=args.metrics_module,
            gates=gates,
            prompts=args.prompts,
        )
        metrics, lower_is_better = plan.names, own_lower_is_better(plan.metrics.judged)
    labels.check_rows(
        rows.ids(),
        metrics=metrics,
        gates=gates,
        where=rows.source,
        lower_is_better=lower_is_better,
    )


def _judge_setup(
    args: argparse.Namespace, judge: JudgeOptions
) -> tuple[list[MetricLike] | None, LLM | None, Embeddings | None, Cache | None]:
    """(metrics, judge model, embedding model, opened cache) of `judge eval`'s options;
    without a model only retrieval metrics are allowed, and no cache is opened."""
    metrics = metrics_given(args)
    if not judge.settings.model:
        check_retrieval_only(metrics)
        return metrics, None, None, None
    llm, embeddings, cache = judge.open()
    return metrics, llm, embeddings, cache


def max_processes() -> int:
    """The most --processes takes: 4 per CPU core (more only compete for the cores, and
    each is an interpreter with its own open files)."""
    return 4 * (os.cpu_count() or 1)


def _data_files(data: object) -> list[str]:
    """The file DATA names, which no output may replace (none for a folder or hf://)."""
    return [str(data)] if isinstance(data, (str, os.PathLike)) and os.path.isfile(data) else []


def run_in_processes(args: argparse.Namespace, gates: Gates, labels: Labels | None = None) -> int:
    """`judge eval --processes N`: the run planned here, its N shards executed at once by
    `judge.run.processes`, then joined into --out as `judge merge` joins them; returns the
    exit code of the joined run."""
    import shutil

    from judge.run.output_folder import OutputFolder
    from judge.run.processes import SHARDS_DIR, plan_for_shards, run_shards, shard_jobs

    if args.shard is not None:
        raise JudgeError(
            "--processes splits the rows into shards itself: drop --shard (or drop "
            "--processes and run each --shard I/N, then judge merge)"
        )
    if args.ray or args.ray_address:
        raise JudgeError("--processes cannot be used with --ray: Ray has its own actors")
    options = data_options(args)  # a malformed --column fails before a cache is opened
    judge = judge_options(args)
    metrics, llm, embeddings, opened = _judge_setup(args, judge)
    cache: str | None = None
    if opened is not None:  # an older cache file upgraded once here, not in every shard
        opened.close()
        cache = judge.cache
    plan, rows = plan_for_shards(
        args.data,
        options["column_map"],
        metrics=metrics,
        llm=llm,
        embeddings=embeddings,
        gates=gates,
        prompts=args.prompts,
        metric_modules=args.metrics_module,
    )
    # A shard holds at least one row (or conversation): no process judges nothing.
    units = rows.units()
    count = min(args.processes, units)
    if count < args.processes:
        print(
            f"judge: note: --processes {args.processes}: {counted(units, rows.unit)}, so "
            f"judging in {counted(count, 'process', 'processes')}",
            file=sys.stderr,
        )
    # each shard locks its own folder below it
    with OutputFolder(args.out, inputs=_data_files(args.data)) as folder:
        jobs = shard_jobs(
            plan,
            args.data,
            folder.path,
            count,
            column_map=options["column_map"],
            cache=cache,
            cache_mode=judge.cache_mode,
            progress=options["progress"],
            progress_interval=options["progress_interval"],
            identity=rows.records.identity(),
            unit=rows.unit,
        )
        if options["progress"]:
            print(
                f"judging in {counted(count, 'process', 'processes')}; "
                "the progress shown is shard 1's",
                file=sys.stderr,
            )
        run_shards(jobs)
        code = merge_into(
            folder,
            [job.out for job in jobs],
            gates,
            cache=judge.cache,
            replay=judge.replay,
            labels=labels,
        )
        shutil.rmtree(folder.path / SHARDS_DIR)  # joined: results.jsonl holds every row
    record_run(args, folder.path, "eval")  # one run, however many processes judged it
    return code


def run_on_ray(args: argparse.Namespace, gates: Gates, labels: Labels | None = None) -> int:
    """`judge eval --ray`: the rows judged by Ray actors and written as a plain run's;
    returns the exit code."""
    from judge.ray.evaluate import require_ray
    from judge.ray.file_eval import evaluate_on_ray
    from judge.run.options import RunSpec
    from judge.run.output_folder import OutputFolder

    if args.shard is not None:
        raise JudgeError(
            "--shard cannot be used with --ray: Ray spreads the rows over its actors "
            "itself; drop --shard (or drop --ray and merge the shards with judge merge)"
        )
    if args.prompts is not None:
        raise JudgeError("--prompts cannot be used with --ray yet: drop --ray (or --prompts)")
    if args.ray_actors < 1:
        raise JudgeError(f"--ray-actors {args.ray_actors}: give at least 1")
    require_ray()  # before reading the data: say at once that the extra is missing
    judge = judge_options(args)
    # The actors open the caches: here only its path (the actors read it, never create it).
    llm, embeddings, _ = dataclasses.replace(judge, no_cache=True).open()
    spec = RunSpec(
        metrics=metrics_given(args),
        llm=llm,
        embeddings=embeddings,
        cache=None if judge.no_cache else judge.cache,
        progress=not args.no_progress,
        gates=gates,
    )
    # only once the options are known to be good
    with OutputFolder(args.out, inputs=_data_files(args.data)) as folder:
        result = evaluate_on_ray(
            args.data,
            spec,
            actors=args.ray_actors,
            address=args.ray_address,
            work=folder.path,
            cache_mode=judge.cache_mode,
            column_map=column_map(args),
        )
        code = finish_run(result, folder, gates, labels=labels)
    record_run(args, folder.path, "eval")
    return code
