"""`judge eval DATA --model M ...`: evaluate a dataset; write results, summary and report."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.errors import CacheStoreError, JudgeError, LLMConfigError
from judge.run.progress import DEFAULT_INTERVAL

if TYPE_CHECKING:  # imported when a command runs: `judge ir` must not load litellm
    from judge.llm.cache import Cache
    from judge.llm.config import LLM, Embeddings
    from judge.run.output_folder import OutputFolder

# The default of --max-error-rate: see judge.report.outputs (kept in step by a test).
DEFAULT_MAX_ERROR_RATE = 0.05


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the eval subcommand."""
    p = sub.add_parser(
        "eval",
        help="evaluate a dataset of RAG samples (LLM-judged and retrieval)",
        description="Evaluate every row of DATA and write results, summary and "
        "report to --out. Exit codes: 0 passed; 1 a --fail-under threshold was missed; "
        "2 a usage, input, configuration, cache or output error (API key missing or "
        "refused, unknown model, no server at --api-base, a full or read-only disk, "
        "another run on --out: the run stops at once, rows finished so far are kept and "
        "a rerun resumes them); 3 scores are missing: judges failed in more than "
        "--max-error-rate of the judged rows, rows could not be read in more than that "
        "share of all rows, or a --replay missed a judgment (3 wins over 1); 70 a bug in "
        "judge; 130 Ctrl-C; 143 SIGTERM.",
    )
    p.add_argument(
        "data",
        help=".jsonl, .json, .csv, .parquet, a saved dataset directory, or hf://OWNER/NAME[:SPLIT] "
        "for a dataset on the hub (only then is the hub asked)",
    )
    _eval_options(p)
    # keep_checkpoint: no option; set for the shards that --processes runs (cli.processes)
    p.set_defaults(func=run_eval, keep_checkpoint=False)


def gate_options(p: argparse.ArgumentParser) -> None:
    """Add --fail-under and --max-error-rate, the gates of a finished run (exit 1 and 3)."""
    p.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="exit 1 if the metric's mean is below VALUE (repeatable)",
    )
    p.add_argument(
        "--max-error-rate",
        type=float,
        default=DEFAULT_MAX_ERROR_RATE,
        metavar="RATE",
        help="exit 3 if judges failed (after retries) in more than this share of the "
        "judged rows, or rows could not be read in more than this share of all rows: "
        f"their scores are then missing from the means (default {DEFAULT_MAX_ERROR_RATE}; "
        "1 turns the check off; a --replay that misses fails whatever this says)",
    )


def _eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics",
        help="comma-separated metric names (default: faithfulness, "
        "answer_relevancy if --embedding-model, context_precision, context_recall; "
        "plus judge ir's default retrieval metrics with retrieval columns)",
    )
    model_options(p)
    p.add_argument("--out", default="judge-results", help="output directory")
    gate_options(p)
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="judge only shard I of N: the rows whose number modulo N is I-1 (row numbers "
        "stay the input's); run every I from 1 to N, then `judge merge OUT DIR...`",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="judge in N processes at once (N shards, then joined as judge merge joins "
        "them; same outputs): for more than one core's worth of judging, as a cached "
        "replay or a fast judge server needs (default 1)",
    )
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


def model_options(p: argparse.ArgumentParser) -> None:
    """The judge model, server, cache, request and column options of every judging command."""
    llm_options(p)
    column_option(p)
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress on stderr (default: a live bar on a terminal, else a status line "
        "every --progress-interval seconds)",
    )
    p.add_argument(
        "--progress-interval",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"seconds between status lines when stderr is not a terminal, as in CI "
        f"(default {DEFAULT_INTERVAL:g})",
    )
    module_option(p)


def llm_options(p: argparse.ArgumentParser) -> None:
    """The model, server, cache (--replay) and request options of every LLM command."""
    p.add_argument("--model", help="judge model, any litellm name (e.g. openai/gpt-4o-mini)")
    p.add_argument("--api-base", help="server URL, e.g. http://localhost:8000/v1 for vLLM")
    p.add_argument("--api-key", help="API key (default: the provider's environment variable)")
    p.add_argument("--embedding-model", help="embedding model (needed for answer_relevancy)")
    p.add_argument("--embedding-api-base", help="embedding server URL (default --api-base)")
    p.add_argument(
        "--cache",
        default=".judge/cache.sqlite",
        help="judgment cache (default .judge/cache.sqlite)",
    )
    cache_use = p.add_mutually_exclusive_group()
    cache_use.add_argument(
        "--replay",
        action="store_true",
        help="strict cache-only: never call a model; a missing judgment is an error",
    )
    cache_use.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the cache"
    )
    p.add_argument(
        "--cache-as",
        metavar="NAME",
        help="the server's identity in cache keys instead of its URL: the name a cache was "
        "recorded under, to replay it against a server at another address ('unknown' for "
        "entries from before servers were recorded; see `judge cache stats`)",
    )
    p.add_argument("--concurrency", type=int, default=16, help="requests in flight (default 16)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    p.add_argument(
        "--max-retries",
        type=int,
        default=6,
        help="retries of a rate-limited, failed or timed-out request (default 6)",
    )


def column_option(p: argparse.ArgumentParser) -> None:
    """Add --column FIELD=COLUMN, the mapping of input columns to judge's fields."""
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help="map a column, e.g. --column question=query (repeatable)",
    )


def module_option(p: argparse.ArgumentParser) -> None:
    """Add --metrics-module, the route to custom metrics in a file or module, and
    --trust-project-metrics, the opt-in to those of ./pyproject.toml."""
    p.add_argument(
        "--metrics-module",
        action="append",
        default=[],
        metavar="MODULE",
        help="a Python file or module defining custom metrics "
        "(judge.metrics.custom.judged_metric); repeatable; a .toml file stands for the "
        "modules its [tool.judge] metrics-modules names; also read from the environment "
        "variable JUDGE_METRICS_MODULES. Installed plugins (entry-point group judge.metrics) "
        "need no option",
    )
    p.add_argument(
        "--trust-project-metrics",
        dest="metrics_module",
        action="append_const",
        const="pyproject.toml",
        help="also load the metrics modules named in ./pyproject.toml ([tool.judge] "
        "metrics-modules): code of the folder you run in, never run without this option",
    )


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise JudgeError(f"{what} {item!r}: write it as NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def thresholds(items: list[str], max_error_rate: float) -> dict[str, float]:
    """The --fail-under thresholds by metric, after checking them and --max-error-rate."""
    if not 0 <= max_error_rate <= 1:  # also rejects nan
        raise JudgeError(f"--max-error-rate {max_error_rate}: give a share from 0 to 1")
    try:
        return {k: float(v) for k, v in _pairs(items, "--fail-under").items()}
    except ValueError as exc:
        raise JudgeError(f"--fail-under needs a number: {exc}") from None


def run_eval(args: argparse.Namespace) -> int:
    """The `judge eval` command."""
    from judge.run.evaluate import evaluate
    from judge.run.output_folder import OutputFolder
    from judge.run.shard import parse_shard

    required = thresholds(args.fail_under, args.max_error_rate)
    if args.processes < 1:
        raise JudgeError(f"--processes {args.processes}: give at least 1")
    if args.processes > 1:
        from judge.cli.processes import run_in_processes

        return run_in_processes(args, required)
    if args.ray or args.ray_address:
        return run_on_ray(args, required)
    shard = parse_shard(args.shard) if args.shard is not None else None
    metrics = metric_names(args)
    llm: LLM | None = None
    embeddings: Embeddings | None = None
    cache: Cache | None = None
    if args.model:
        llm, embeddings, cache = model_config(args)
    else:
        check_retrieval_only(metrics)  # then no judge model, and no cache to open
    # Locked for the whole run: the checkpoint lives in the folder too.
    with OutputFolder(args.out) as folder:
        checkpoint = folder.path / ".checkpoint.jsonl"
        try:
            result = evaluate(
                args.data,
                metrics=metrics,
                llm=llm,
                embeddings=embeddings,
                cache=cache,
                checkpoint=checkpoint,
                shard=shard,
                **data_options(args),
            )
        except (LLMConfigError, CacheStoreError) as exc:  # the run stopped: it cannot work
            kept = checkpoint.is_file() and checkpoint.stat().st_size > 0
            resume = "; the rows finished before it are kept: rerun to resume" if kept else ""
            raise type(exc)(f"{exc}{resume}") from None
        damaged = result.config.get("cache_damaged")
        if damaged:
            done = "their rows have errors" if args.replay else "they were asked for again"
            print(
                f"judge: {damaged} damaged entries of the cache {args.cache} were not used "
                f"({done}); check it with: judge cache verify {args.cache}",
                file=sys.stderr,
            )
        # --processes runs its shards with keep_checkpoint: the first alone speaks for them
        say_notes(result, quiet=args.keep_checkpoint and not str(args.shard).startswith("1/"))
        return finish_run(
            result, folder, required, args.max_error_rate, keep_checkpoint=args.keep_checkpoint
        )


def run_on_ray(args: argparse.Namespace, required: dict[str, float]) -> int:
    """`judge eval --ray`: the rows judged by Ray actors and written as a plain run's;
    returns the exit code."""
    from judge.ray.caches import ActorCaches
    from judge.ray.evaluate import require_ray
    from judge.ray.run import evaluate_file
    from judge.run.output_folder import OutputFolder

    if args.shard is not None:
        raise JudgeError(
            "--shard cannot be used with --ray: Ray spreads the rows over its actors "
            "itself; drop --shard (or drop --ray and merge the shards with judge merge)"
        )
    if args.ray_actors < 1:
        raise JudgeError(f"--ray-actors {args.ray_actors}: give at least 1")
    require_ray()  # before reading the data: say at once that the extra is missing
    llm, embeddings, _ = model_config(argparse.Namespace(**{**vars(args), "no_cache": True}))
    cache = Path(args.cache)
    options = {k: v for k, v in data_options(args).items() if k in ("column_map", "custom")}
    with OutputFolder(args.out) as folder:  # only once the options are known to be good
        result = evaluate_file(
            args.data,
            metrics=metric_names(args),
            llm=llm,
            embeddings=embeddings,
            caches=ActorCaches.of(
                None if args.no_cache else cache.with_name(cache.stem + ".ray"),
                "replay" if args.replay else "read-write",
                [] if args.no_cache else [cache],
            ),
            actors=args.ray_actors,
            address=args.ray_address,
            rows_dir=folder.path,
            progress=not args.no_progress,
            **options,
        )
        return finish_run(result, folder, required, args.max_error_rate)


def model_config(args: argparse.Namespace) -> tuple[LLM, Embeddings | None, Cache | None]:
    """(LLM, Embeddings or None, Cache or None) from the `model_options` arguments."""
    from judge.llm.cache import Cache
    from judge.llm.config import LLM, Embeddings

    if not args.model:
        raise JudgeError("--model is required (the judge model; there is no default)")
    if args.embedding_api_base and not args.embedding_model:
        raise JudgeError("--embedding-api-base needs --embedding-model (the embedding model)")
    key = args.api_key or os.environ.get("JUDGE_API_KEY")
    llm = LLM(
        model=args.model,
        api_base=args.api_base,
        api_key=key,
        timeout=args.timeout,
        max_retries=args.max_retries,
        max_concurrency=max(1, args.concurrency),
        cache_as=args.cache_as,
    )
    embeddings = (
        Embeddings(
            model=args.embedding_model,
            api_base=args.embedding_api_base or args.api_base,
            api_key=key,
            cache_as=args.cache_as,
        )
        if args.embedding_model
        else None
    )
    if args.replay and not args.no_cache and not Path(args.cache).is_file():
        # Nothing to replay from; creating an empty file would only hide the mistake.
        raise JudgeError(
            f"--cache {args.cache} does not exist: --replay reads judgments recorded before. "
            "Give the --cache that holds them, or record them first with a run without --replay"
        )
    cache = (
        None if args.no_cache else Cache(args.cache, mode="replay" if args.replay else "read-write")
    )
    return llm, embeddings, cache


def check_retrieval_only(metrics: list[str] | None) -> None:
    """Without --model only retrieval metrics can be computed: an error naming the
    metrics that need a judge model, if any are asked for (or the default is)."""
    from judge.run.evaluate import split_metrics

    judged = split_metrics(metrics, has_retrieval=True)[0]
    if judged is None:
        raise JudgeError(
            "--model is required: the default metrics are LLM-judged (there is no default "
            "judge model); for a retrieval-only run give only retrieval metrics, e.g. "
            "--metrics ndcg@10,recall@10"
        )
    if judged:
        raise JudgeError(
            f"--model is required: {', '.join(map(str, judged))} "
            f"{'is' if len(judged) == 1 else 'are'} LLM-judged (there is no default judge "
            "model); for a retrieval-only run give only retrieval metrics, e.g. --metrics "
            "ndcg@10,recall@10"
        )


def say_notes(result: Any, *, quiet: bool = False) -> None:
    """The run's notes (what the default metrics left out, where replay misses were
    recorded) in the CLI's words: on stderr unless quiet, and in summary.json."""
    from judge.cli.words import cli_words

    notes = [cli_words(note) for note in result.config.get("notes", [])]
    result.config["notes"] = notes
    for note in [] if quiet else notes:
        print(f"judge: note: {note}", file=sys.stderr)


def metric_names(args: argparse.Namespace) -> list[str] | None:
    """The comma-separated --metrics, or None (the default metrics) when none is given."""
    return [m for m in (args.metrics or "").split(",") if m.strip()] or None


def column_map(args: argparse.Namespace) -> dict[str, str] | None:
    """The --column FIELD=COLUMN pairs as a mapping, or None when none was given."""
    return _pairs(args.column, "--column") or None


def data_options(args: argparse.Namespace) -> dict[str, Any]:
    """column_map, progress and custom metrics (modules, plugins) for `judge.evaluate`."""
    from judge.metrics.plugins import extra_metrics

    return {
        "column_map": column_map(args),
        "progress": not args.no_progress,
        "progress_interval": args.progress_interval,
        "custom": {n: x.metric for n, x in extra_metrics(args.metrics_module).items()},
    }


def finish_run(
    result: Any,
    folder: OutputFolder | Path,
    thresholds: dict[str, float],
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    *,
    results_written: bool = False,
    keep_checkpoint: bool = False,
) -> int:
    """Write the run's folder and apply its gates (`judge.report.outputs.write_outputs`,
    what `EvaluationResult.write` does), print the table and the verdict, return the exit
    code. With results_written, the rows were joined into `folder.temporary(
    "results.jsonl")` already (judge merge). The run's checkpoint is deleted unless
    keep_checkpoint (a shard of --processes keeps it until the shards are joined)."""
    from judge.cli.words import cli_words
    from judge.report.outputs import write_outputs

    outcome = write_outputs(
        result,
        folder,
        fail_under=thresholds,
        max_error_rate=max_error_rate,
        results_written=results_written,
    )
    out = outcome.folder
    checkpoint = out / ".checkpoint.jsonl"
    if checkpoint.exists() and not keep_checkpoint:
        checkpoint.unlink()  # the run is complete: results.jsonl has every row
    print(result.table())
    diagnosis = outcome.summary["diagnosis"]
    if diagnosis:
        print("\ndiagnosis (retrieval first):")
        print("\n".join(f"  - {finding}" for finding in diagnosis))
    print(
        f"\n{len(result.rows)} rows, {result.rows_with_errors} with errors; "
        f"wrote {out}/results.jsonl, summary.json, report.html"
    )
    if result.rows_with_judge_errors:
        print(
            f"judge errors in {result.rows_with_judge_errors} of {result.judged_rows} judged "
            f"rows ({result.judge_error_rate:.1%}; --max-error-rate {max_error_rate:g})"
        )
    for note in outcome.notes:
        print(cli_words(note), file=sys.stderr)
    for line in outcome.missed:
        print(f"FAILED threshold: {line}", file=sys.stderr)
    for what, why in outcome.failures:
        print(f"FAILED {what}: {cli_words(why)}", file=sys.stderr)
    return outcome.code
