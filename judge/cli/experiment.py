"""`judge experiment DATA --app TARGET ...`: run the user's RAG app on a test set, keep its
outputs, judge them; write what `judge eval` writes, plus app_outputs.jsonl and run.trec."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.cli.finish import finish_run, record_run, say_damaged, say_notes
from judge.cli.options import (
    check_retrieval_only,
    column_map,
    data_options,
    gate_options,
    gates_of,
    judge_options,
    metrics_given,
    model_options,
    models_of,
    runs_options,
    runs_path,
)
from judge.cli.output import DRY_RUN_FORMAT, output_options
from judge.errors import JudgeError
from judge.formatting import counted, terminal_text

if TYPE_CHECKING:  # imported when the command runs
    from judge.run.gates import Gates


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the experiment subcommand."""
    p = sub.add_parser(
        "experiment",
        help="run your RAG app on a test set, then judge its outputs",
        description="Ask --app every question of DATA (concurrently, each call with a "
        "timeout), write its outputs to --out/app_outputs.jsonl (a judge eval input: judge "
        "again without asking the app again), then judge them as judge eval does. With "
        "retrieved_ids from the app and relevance labels in DATA, also the retrieval "
        "metrics, and --out/run.trec with --out/qrels.txt for judge ir. A stopped "
        "experiment rerun with the same --out and app resumes: answered questions are "
        "not asked again. Exit codes as judge eval's; a question the app failed on "
        "counts against --max-error-rate as an unreadable row.",
    )
    p.add_argument(
        "data",
        help="the test set: a `judge testset build` folder (its testset.jsonl, with "
        "qrels.txt as relevance labels), or a .jsonl/.json/.csv/.parquet file, a saved "
        "dataset folder or hf://OWNER/NAME[:SPLIT] with a question column (id, "
        "ground_truth and relevance are used when present), or of conversations, one "
        "per line, whose user messages are played in order",
    )
    p.add_argument(
        "--app",
        required=True,
        metavar="TARGET",
        help="your app: module:function or path/to/file.py:function (a dotted attribute "
        "works: module:pipeline.ask). It takes the question (a string), or the test "
        "set's row (a dict of its columns) when its one parameter is named row, and returns "
        "{'answer': str, 'contexts': [str, ...]}, optionally with 'retrieved_ids' (rank "
        "order), 'retrieved_scores' and more keys (kept as columns); sync or async, a "
        "callable object, a LangChain runnable or a LlamaIndex query engine. When DATA "
        "holds conversations (one per line), the app is asked each user message in order "
        "with the messages before it, through its parameter named history (app(question, "
        "history)), or is given the conversation ending with the question as its one "
        "parameter, messages",
    )
    p.add_argument(
        "--app-concurrency",
        type=int,
        default=8,
        metavar="N",
        help="app calls in flight at once (default 8; the judge's are --concurrency)",
    )
    p.add_argument(
        "--app-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="seconds one app call may take; a slower one is that question's app error "
        "(default 120)",
    )
    p.add_argument(
        "--qrels",
        metavar="FILE",
        help="TREC qrels of the questions' ids: relevance labels for the retrieval metrics "
        "(default: DATA's qrels.txt for a test set folder, else DATA's relevance column); "
        "use qrels_docs.txt when the app returns document ids",
    )
    p.add_argument(
        "--metrics",
        help="comma-separated metric names (default: as judge eval: the core LLM-judged "
        "metrics with --model, plus mrr, ndcg@10 and recall@10 when the app returns "
        "retrieved ids and DATA has relevance labels; without --model, judge ir's "
        "default retrieval metrics)",
    )
    model_options(p)
    p.add_argument(
        "--out",
        default="judge-experiment",
        help="output directory (default: judge-experiment)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="call neither the app nor the judge and write nothing: estimate the judging of "
        "the experiment as judge eval --dry-run does, each question (or conversation turn) "
        "taken as answered with an assumed reply (--assume-answer-chars, --assume-contexts, "
        "--assume-context-chars); the questions, ground truths, labels and conversations "
        "are the test set's. The app's module is imported, never called. Exit 0 when the "
        "test set is usable for the metrics, else 2",
    )
    output_options(p, format_help=DRY_RUN_FORMAT)
    p.add_argument(
        "--assume-answer-chars",
        type=int,
        default=300,
        metavar="N",
        help="with --dry-run: the length of the app's answers, in characters (default 300)",
    )
    p.add_argument(
        "--assume-contexts",
        type=int,
        default=4,
        metavar="N",
        help="with --dry-run: the contexts the app retrieves per question (default 4)",
    )
    p.add_argument(
        "--assume-context-chars",
        type=int,
        default=800,
        metavar="N",
        help="with --dry-run: the length of each context, in characters (default 800)",
    )
    gate_options(p)
    # people's labels of the answers cannot exist before the run makes them: say the route
    p.add_argument("--labels", metavar="FILE", help=argparse.SUPPRESS)
    runs_options(p)
    p.set_defaults(func=run_experiment_command)


def run_experiment_command(args: argparse.Namespace) -> int:
    """The `judge experiment` command: `judge.experiments.aexperiment` with the command
    line's options, its gates applied and its verdict printed as the run is written."""
    from judge.aio import run_sync
    from judge.experiments.experiment import aexperiment
    from judge.run.output_folder import OutputFolder
    from judge.run.results import EvaluationResult

    gates = gates_of(args)
    if args.labels is not None:
        raise JudgeError(
            f"--labels {args.labels}: judge experiment judges the answers its run makes, which "
            "no one can have labelled before it: label them once it is done (judge annotate "
            "OUT --labels FILE), then correct its mean with judge estimate OUT --labels FILE "
            "--label COLUMN --metric NAME, or judge again with judge eval OUT/app_outputs.jsonl "
            "--labels FILE --label COLUMN (the app is not asked again)"
        )
    if args.dry_run:
        return run_dry_experiment(args, gates)
    if args.format != "text":
        raise JudgeError("--format json goes with --dry-run (a run writes summary.json to --out)")
    if args.app_concurrency < 1:
        raise JudgeError(f"--app-concurrency {args.app_concurrency}: give at least 1")
    if not args.app_timeout > 0:
        raise JudgeError(f"--app-timeout {args.app_timeout}: give a positive number of seconds")
    options = data_options(args)
    # Every path resolved once, before the app runs: an app may change the working directory.
    out = Path(os.path.abspath(args.out))
    runs = runs_path(args).absolute()
    judge = judge_options(args).absolute()
    metrics = metrics_given(args)
    llm = embeddings = cache = None
    if judge.settings.model:
        llm, embeddings, cache = judge.open()
    elif metrics is not None:
        check_retrieval_only(metrics)
    streams = _KeptStreams()
    codes: list[int] = []

    def write(result: EvaluationResult, folder: OutputFolder) -> None:
        """The run written with the command's gates, once the app and the judge are done."""
        streams.restore()
        if cache is not None:
            cache.close()
        say_damaged(result, judge.cache, replay=judge.replay)
        say_notes(result)
        codes.append(finish_run(result, folder, gates))

    try:
        result = run_sync(
            aexperiment(
                args.app,
                args.data,
                out=out,
                metrics=metrics,
                llm=llm,
                embeddings=embeddings,
                cache=cache,
                column_map=options["column_map"],
                qrels=args.qrels,
                app_concurrency=args.app_concurrency,
                app_timeout=args.app_timeout,
                concurrency=judge.settings.concurrency,
                progress=options["progress"],
                progress_interval=options["progress_interval"],
                gates=gates,
                write=write,
                record=False,  # recorded below, in the store --runs names
            )
        )
    finally:
        streams.restore()
        if cache is not None:
            cache.close()
    record_run(args, out, "experiment", runs=runs)
    if result.config.app is not None:
        print(terminal_text(app_line(result.config.app)), file=sys.stderr)
    return codes[0]


def run_dry_experiment(args: argparse.Namespace, gates: Gates) -> int:
    """`judge experiment --dry-run`: the experiment's judging estimated with the app and the
    judge never called, nothing written; 0 when the test set is usable, else exit 2."""
    from judge.cli.eval import show_dry_run
    from judge.experiments.dry_run import Assumed, dry_run_experiment
    from judge.metrics.registry import Metric
    from judge.run.plan import own_lower_is_better

    assumed = Assumed(args.assume_answer_chars, args.assume_contexts, args.assume_context_chars)
    for flag, value, least in (
        ("--assume-answer-chars", assumed.answer_chars, 1),
        ("--assume-contexts", assumed.contexts, 0),
        ("--assume-context-chars", assumed.context_chars, 1),
    ):
        if value < least:
            raise JudgeError(f"{flag} {value}: give at least {least}")
    llm, embeddings = models_of(args)
    metrics = metrics_given(args)
    result = dry_run_experiment(
        args.app,
        args.data,
        metrics=metrics,
        llm=llm,
        embeddings=embeddings,
        column_map=column_map(args),
        qrels=args.qrels,
        assumed=assumed,
        max_error_rate=args.max_error_rate,
    )
    own = [m for m in metrics or [] if isinstance(m, Metric)]
    gates.check_metrics([m.name for m in result.metrics], own_lower_is_better(own))
    return show_dry_run(result, args.format)


def app_line(app: dict[str, Any]) -> str:
    """One line on the app's calls: asked, reused, errors by type, latency."""
    latency = app["latency_s"]
    errors = app["errors"]
    failed = sum(errors.values())
    kinds = ", ".join(f"{kind} {count}" for kind, count in errors.items())
    asked = counted(app["questions"], "question")
    if "conversations" in app:  # a test set of conversations: its turns were asked
        asked = (
            f"{counted(app['conversations'], 'conversation')}, {counted(app['questions'], 'turn')}"
        )
    parts = [
        f"judge: app {app['target']}: {asked} "
        f"({app['asked']} asked, {app['reused']} answered before)",
        counted(failed, "app error")
        + (f" ({kinds}; see app_error in app_outputs.jsonl)" if kinds else ""),
    ]
    if latency["p50"] is not None:
        parts.append(f"latency p50 {latency['p50']:.3g} s, p95 {latency['p95']:.3g} s")
    return "; ".join(parts)


class _KeptStreams:
    """stdout and stderr kept from the app: copies of file descriptors 1 and 2, taken
    before it runs and put back after, so that the run's table, the gates' words and the
    exit code they decide reach the user whatever the app closed (sys.stdout, sys.stderr,
    or descriptor 1 or 2, which a file opened since may then hold). While it runs, judge's
    own stderr (the progress line, warnings) is a copy of descriptor 2 of its own: one the
    app closing descriptor 2 does not close, and no file opened since can take."""

    def __init__(self) -> None:
        self.copies: dict[int, int] = {}
        for fd in (1, 2):
            with contextlib.suppress(OSError):  # not open: nothing to keep
                self.copies[fd] = os.dup(fd)
        self.stderr = sys.stderr
        self.during: _Unclosed | None = None
        if 2 in self.copies and _is_fd(sys.stderr, 2):
            self.during = _Unclosed(
                io.FileIO(os.dup(2), "w"),
                encoding=getattr(sys.stderr, "encoding", None) or "utf-8",
                errors=getattr(sys.stderr, "errors", None) or "strict",
                line_buffering=True,
            )
            sys.stderr = self.during

    def restore(self) -> None:
        """Put stdout and stderr back as they were before the app ran (once; later calls
        do nothing)."""
        if self.during is not None:
            if sys.stderr is self.during:
                sys.stderr = self.stderr
            with contextlib.suppress(OSError, ValueError):  # nowhere to flush to
                self.during.close_now()
        for fd, copy in self.copies.items():
            try:
                same = os.path.sameopenfile(fd, copy)
            except OSError:  # the descriptor is closed
                same = False
            if not same:
                os.dup2(copy, fd)
            os.close(copy)
            name = "stdout" if fd == 1 else "stderr"
            stream = getattr(sys, name)
            if stream is None or stream.closed or not same:
                setattr(sys, name, _text_stream(fd, getattr(sys, f"__{name}__"), closefd=False))
        self.copies.clear()
        self.during = None


class _Unclosed(io.TextIOWrapper):
    """judge's stderr while the app runs, which the app's sys.stderr.close() only flushes:
    the progress line and judge's messages go on being written."""

    def close(self) -> None:
        self.flush()

    def close_now(self) -> None:
        """Close it, once the app has run."""
        super().close()


def _is_fd(stream: Any, fd: int) -> bool:
    """Whether stream writes to file descriptor fd (not pytest's capture, say)."""
    try:
        return bool(stream.fileno() == fd)
    except (AttributeError, OSError, ValueError):
        return False


def _text_stream(fd: int, like: Any, *, closefd: bool) -> io.TextIOWrapper:
    """A line-buffered text stream on fd, with the encoding and errors of `like`."""
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=closefd),
        encoding=getattr(like, "encoding", None) or "utf-8",
        errors=getattr(like, "errors", None) or "strict",
        line_buffering=True,
    )
