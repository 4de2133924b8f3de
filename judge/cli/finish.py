"""What a command does once the rows are judged: join shards, write the run's folder,
print the table, the notes and the verdict, and give the exit code."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.cli.options import runs_path, threshold_map
from judge.errors import JudgeError
from judge.formatting import counted, shell_word, terminal_text

if TYPE_CHECKING:
    from judge.run.corrected import Corrector
    from judge.run.gates import Gates
    from judge.run.output_folder import OutputFolder


def say_notes(result: Any) -> None:
    """The run's notes (what the default metrics left out, where replay misses were
    recorded) in the CLI's words: on stderr, and in summary.json."""
    from judge.cli.words import cli_words

    notes = [cli_words(note) for note in result.config.notes]
    result.config = dataclasses.replace(result.config, notes=notes)
    for note in notes:
        print(terminal_text(f"judge: note: {note}"), file=sys.stderr)


def say_damaged(result: Any, cache: str, *, replay: bool) -> None:
    """The damaged cache entries a run found and did not use, on stderr."""
    damaged = result.config.cache_damaged
    if damaged:
        done = "their rows have errors" if replay else "they were asked for again"
        print(
            terminal_text(
                f"judge: {counted(damaged, 'damaged entry', 'damaged entries')} of the cache "
                f"{cache} not used ({done}); check it with: judge cache verify "
            )
            + shell_word(cache),
            file=sys.stderr,
        )


def finish_run(
    result: Any,
    folder: OutputFolder | Path,
    gates: Gates,
    *,
    results_written: bool = False,
    labels: Corrector | None = None,
) -> int:
    """Write the run's folder and apply its gates (`judge.run.outputs.write_outputs`,
    what `EvaluationResult.write` does), print the table and the verdict, return the exit
    code. With results_written, the rows were joined into `folder.temporary(
    "results.jsonl")` already (judge merge). With labels (--labels), the labelled
    metric's corrected mean is printed under the table and its warnings on stderr. The
    run's checkpoint is deleted: the run is complete."""
    from judge.cli.words import cli_words
    from judge.run.folder import RunFolder
    from judge.run.outputs import write_outputs

    try:
        outcome = write_outputs(
            result, folder, gates=gates, results_written=results_written, labels=labels
        )
    except JudgeError as exc:
        # Labels can fail only once the rows are judged (the labelled rows unscored):
        # the folder is left as it was, and its checkpoint keeps every judged row.
        kept = RunFolder(folder if isinstance(folder, Path) else folder.path).checkpoint
        if labels is None or not kept.exists():
            raise
        raise JudgeError(
            f"{exc}; the judged rows are kept ({kept}): the same command without --labels, "
            "or with labels that can correct the run, writes it and judges nothing again"
        ) from None
    out = outcome.folder
    checkpoint = RunFolder(out).checkpoint
    if checkpoint.exists():
        checkpoint.unlink()  # results.jsonl has every row
    print(terminal_text(result.table()))
    if outcome.corrected is not None:
        print(terminal_text(f"\n{outcome.corrected.line}"))
        if outcome.corrected.metric in gates.metrics:
            print(f"gates on {outcome.corrected.metric}: checked on its corrected interval")
    for warning in outcome.warnings:  # as judge estimate says them
        print(terminal_text(f"judge: warning: {cli_words(warning)}"), file=sys.stderr)
    diagnosis = outcome.summary["diagnosis"]
    if diagnosis:
        print("\ndiagnosis (retrieval first):")
        print("\n".join(f"  - {finding}" for finding in diagnosis))
    print(
        terminal_text(
            f"\n{counted(len(result.rows), 'row')}, {result.rows_with_errors} with errors; "
            f"wrote {out}/results.jsonl, summary.json, report.html"
        )
    )
    if result.rows_with_judge_errors:
        print(
            f"judge errors in {result.rows_with_judge_errors} of "
            f"{counted(result.judged_rows, 'judged row')} ({result.judge_error_rate:.1%}; "
            f"--max-error-rate {gates.max_error_rate:g})"
        )
    for note in outcome.notes:
        print(terminal_text(cli_words(note)), file=sys.stderr)
    for line in outcome.missed:
        print(terminal_text(f"FAILED threshold: {line}"), file=sys.stderr)
    for what, why in outcome.failures:
        print(terminal_text(f"FAILED {what}: {cli_words(why)}"), file=sys.stderr)
    return outcome.code


def merge_into(
    folder: OutputFolder,
    shard_dirs: Sequence[str | Path],
    gates: Gates,
    *,
    cache: str | None = None,
    replay: bool = False,
    labels: Corrector | None = None,
) -> int:
    """Join the shards' outputs into the (open) output folder as `judge merge` does;
    returns the exit code. The joined run's notes (every shard's) are said as a plain run
    says them; with `cache` (`judge eval --processes`: the shards' cache), its damaged
    cache entries too."""
    from judge.run.folder import RESULTS
    from judge.run.merge import merge_shards

    out = folder.path
    if any(out.resolve() == Path(d).resolve() for d in shard_dirs):
        raise JudgeError(f"{out} is a shard's directory; give the merged run its own directory")
    # The joined lines are results.jsonl as it is (270 MB for 100,000 rows): written once,
    # under the name the folder publishes them from.
    with folder.writing(RESULTS) as joined:
        result = merge_shards(shard_dirs, joined)
        if cache is not None:
            say_damaged(result, cache, replay=replay)
        say_notes(result)
    return finish_run(result, folder, gates, results_written=True, labels=labels)


def record_run(
    args: argparse.Namespace, out: Path, command: str, *, runs: Path | None = None
) -> None:
    """Record the finished run of the folder `out` in the run store (`runs`, default
    --runs), and say so on stderr; nothing with --no-record or for one shard (`judge
    merge` records the joined run). A store that cannot take the record is a warning:
    the run's outputs are written, and its exit code stays the run's."""
    import sqlite3

    from judge.cli.words import cli_words
    from judge.run.folder import record_folder
    from judge.runs.store import RunStore

    if getattr(args, "no_record", False) or getattr(args, "shard", None) is not None:
        return
    path = runs if runs is not None else runs_path(args)
    try:
        with RunStore(path) as store:
            record = record_folder(store, out, command=command, name=getattr(args, "name", None))
    except (JudgeError, OSError, sqlite3.Error) as exc:
        print(
            terminal_text(
                f"judge: warning: the run's outputs are written in {out}, but the run was "
                f"not recorded in the run store {path}: {cli_words(str(exc))}"
            ),
            file=sys.stderr,
        )
        return
    print(terminal_text(f"judge: recorded run {record.id} in {path}"), file=sys.stderr)


def export_scores(
    args: argparse.Namespace, results: Path, links: dict[str, Any], rows_named: str
) -> None:
    """Write or send the events of a run's results (a folder or results.jsonl) linked to
    their traces, to every destination the command line gives."""
    from judge.run.folder import RunFolder
    from judge.traces.export import (
        evaluation_events,
        phoenix_evaluations,
        read_results,
        send_otlp,
        write_otlp_json,
        write_phoenix,
    )

    limits = threshold_map(args.threshold)
    results_file = RunFolder(results).results if results.is_dir() else results
    lower = RunFolder.of(results).lower_is_better()
    events = evaluation_events(
        read_results(results), links, thresholds=limits, lower_is_better=lower
    )
    for note in events.notes():
        print(terminal_text(f"judge: note: {note}"), file=sys.stderr)
    if not events.events:
        raise JudgeError(
            f"no result row of {results} matched a row of {rows_named} by id: "
            "give the rows file the run judged"
        )
    # When judge judged: the results' time, so the same results give the same bytes.
    stamp = results_file.stat().st_mtime_ns
    rows = events.linked_rows
    metrics = len({e.metric for e in events})
    what = (
        f"{counted(len(events), 'evaluation event')} ({counted(rows, 'row')}, "
        f"{counted(metrics, 'metric')})"
    )
    if args.otlp_json:
        write_otlp_json(events.events, args.otlp_json, time_unix_nano=stamp)
        print(terminal_text(f"wrote {what} to {args.otlp_json}"))
    if args.phoenix:
        evaluations = phoenix_evaluations(events)
        write_phoenix(evaluations, args.phoenix)
        framed = sum(len(f) for f in evaluations.frames.values())
        framed_metrics = len(evaluations.frames)  # a metric without a score has no frame
        print(
            terminal_text(
                f"wrote {counted(framed, 'Phoenix span evaluation')} "
                f"({counted(framed_metrics, 'metric')}) to {args.phoenix}"
            )
        )
        if evaluations.without_span:
            print(
                f"judge: note: {counted(evaluations.without_span, 'event')} left out of --phoenix: "
                "their rows have a trace_id but no span_id, or one that is not an "
                "OpenTelemetry span id (Phoenix evaluates spans)",
                file=sys.stderr,
            )
        if evaluations.without_score:
            print(
                f"judge: note: {counted(evaluations.without_score, 'event')} without a score "
                "(undefined, "
                "or the judge failed) left out of --phoenix: Phoenix's client cannot send a "
                "null score; the OTLP events keep them with their reason",
                file=sys.stderr,
            )
    if args.export_otlp:
        sent = send_otlp(events.events, args.export_otlp, time_unix_nano=stamp)
        print(terminal_text(f"sent {counted(sent, 'evaluation event')} to {args.export_otlp}"))
