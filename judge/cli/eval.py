"""`judge eval DATA --model M ...`: evaluate a dataset; write results, summary and report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from judge.cli.finish import finish_run, say_notes
from judge.cli.options import (
    check_retrieval_only,
    data_options,
    gate_options,
    metric_names,
    model_config,
    model_options,
    thresholds,
)
from judge.errors import CacheStoreError, JudgeError, LLMConfigError

if TYPE_CHECKING:  # imported when a command runs: `judge ir` must not load litellm
    from judge.cache.store import Cache
    from judge.llm.config import LLM, Embeddings


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


def run_eval(args: argparse.Namespace) -> int:
    """The `judge eval` command."""
    from judge.run.evaluate import evaluate
    from judge.run.output_folder import OutputFolder
    from judge.run.shard import parse_shard

    required = thresholds(args.fail_under, args.max_error_rate)
    if args.processes < 1:
        raise JudgeError(f"--processes {args.processes}: give at least 1")
    if args.processes > 1:
        from judge.run.processes import run_in_processes

        return run_in_processes(args, required)
    if args.ray or args.ray_address:
        return run_on_ray(args, required)
    shard = parse_shard(args.shard) if args.shard is not None else None
    metrics = metric_names(args)
    llm: LLM | None = None
    embeddings: Embeddings | None = None
    cache: Cache | None = None
    options = data_options(args)  # custom metrics loaded once, to tell a typo from them
    if args.model:
        llm, embeddings, cache = model_config(args)
    else:
        check_retrieval_only(metrics, options["custom"])  # no judge model, no cache to open
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
                **options,
            )
        except (LLMConfigError, CacheStoreError) as exc:  # the run stopped: it cannot work
            kept = checkpoint.is_file() and checkpoint.stat().st_size > 0
            resume = "; the rows finished before it are kept: rerun to resume" if kept else ""
            raise type(exc)(f"{exc}{resume}") from None
        damaged = result.config.cache_damaged
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
    from judge.ray.file_eval import evaluate_file
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
