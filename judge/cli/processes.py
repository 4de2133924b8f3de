"""`judge eval --processes N`: one command judging on N cores, as N shards and a merge.

The rows are split as `--shard I/N` splits them. Each shard is a `judge eval` in a fresh
process of its own, writing to OUT/.shards/I-of-N, all of them sharing the cache file; the
outputs are then joined as `judge merge` joins them, so results.jsonl, summary.json and
report.html are those of an unsharded run (`config.seconds` is the shards' summed time).
A stopped run resumes: each shard keeps its checkpoint until the merge has succeeded,
then the shards' directory is removed. The gates (--fail-under, --max-error-rate) are
checked once, on the joined run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from judge.errors import JudgeError

SHARDS_DIR = ".shards"
_POLL_SECONDS = 0.2


def run_in_processes(args: argparse.Namespace, required: dict[str, float]) -> int:
    """Judge args.data in args.processes shards at once, then join them into args.out;
    returns the exit code of the joined run."""
    from judge.cli.eval import model_config
    from judge.cli.merge import merge_into

    count = args.processes
    if args.shard is not None:
        raise JudgeError(
            "--processes splits the rows into shards itself: drop --shard (or drop "
            "--processes and run each --shard I/N, then judge merge)"
        )
    if args.ray or args.ray_address:
        raise JudgeError("--processes cannot be used with --ray: Ray has its own actors")
    # Checks the options before any process starts, and upgrades an older cache file
    # once here rather than in every shard at the same time.
    _, _, cache = model_config(args)
    if cache is not None:
        cache.close()
    out = Path(args.out)
    dirs = [out / SHARDS_DIR / f"{i}-of-{count}" for i in range(1, count + 1)]
    if not args.no_progress:
        print(f"judging in {count} processes; the progress shown is shard 1's", file=sys.stderr)
    # Fresh interpreters ("spawn"): a forked copy of this one would share its open files.
    with multiprocessing.get_context("spawn").Pool(count) as pool:
        pending = [
            pool.apply_async(judge_shard, (child_options(args, i, count, d),))
            for i, d in enumerate(dirs, start=1)
        ]
        while pending:  # the first shard to fail stops the others (leaving `with` kills them)
            for job in [j for j in pending if j.ready()]:
                failure = job.get()
                if failure is not None:
                    raise JudgeError(f"{failure}; the rows finished so far are kept: rerun")
                pending.remove(job)
            if pending:
                time.sleep(_POLL_SECONDS)
    code = merge_into(out, dirs, required, args.max_error_rate)
    shutil.rmtree(out / SHARDS_DIR)  # joined: results.jsonl holds every row
    return code


def child_options(args: argparse.Namespace, index: int, count: int, out: Path) -> dict[str, Any]:
    """The options of shard `index` of `count`: the run's own, with its shard and output
    directory, no gates (the joined run is gated), and progress from shard 1 alone."""
    options = {k: v for k, v in vars(args).items() if k != "func"}
    options.update(
        shard=f"{index}/{count}",
        out=str(out),
        processes=1,
        fail_under=[],
        max_error_rate=1.0,
        no_progress=args.no_progress or index != 1,
    )
    return options


def judge_shard(options: dict[str, Any]) -> str | None:
    """Run one shard (in a pool's process); None when done, else what failed."""
    from judge.cli.eval import run_eval

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the joined run prints the table
            run_eval(argparse.Namespace(**options))
    except JudgeError as exc:  # sent back as text: an exception's own fields may not pickle
        return f"shard {options['shard']}: {exc}"
    return None
