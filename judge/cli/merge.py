"""`judge merge OUT SHARD_DIR...`: join the outputs of `judge eval --shard I/N`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from judge.cli.eval import finish_run, gate_options, thresholds
from judge.errors import JudgeError

if TYPE_CHECKING:
    from judge.run.output_folder import OutputFolder


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the merge subcommand."""
    p = sub.add_parser(
        "merge",
        help="join the outputs of judge eval --shard I/N into one run's",
        description="Join the --out directories of `judge eval DATA --shard I/N` (every I "
        "from 1 to N, once) into OUT: results.jsonl in input order, summary.json and "
        "report.html, computed from the joined rows as an unsharded run's. Shards with "
        "other metrics, models, prompts, servers or data are refused. config.seconds and "
        "config.resumed_rows are summed over the shards, usage too. Exit codes as judge eval: "
        "0 passed; 1 a --fail-under threshold was missed; 2 an error; 3 over --max-error-rate.",
    )
    p.add_argument("out", metavar="OUT", help="output directory of the joined run")
    p.add_argument("shards", nargs="+", metavar="SHARD_DIR", help="a shard's --out directory")
    gate_options(p)
    p.set_defaults(func=run_merge)


def run_merge(args: argparse.Namespace) -> int:
    """The `judge merge` command."""
    from judge.run.output_folder import OutputFolder

    required = thresholds(args.fail_under, args.max_error_rate)
    with OutputFolder(args.out) as folder:
        return merge_into(folder, args.shards, required, args.max_error_rate)


def merge_into(
    folder: OutputFolder,
    shard_dirs: Sequence[str | Path],
    required: dict[str, float],
    max_error_rate: float,
) -> int:
    """Join the shards' outputs into the (open) output folder as `judge merge` does;
    returns the exit code."""
    from judge.run.merge import merge_shards

    out = folder.path
    if any(out.resolve() == Path(d).resolve() for d in shard_dirs):
        raise JudgeError(f"{out} is a shard's directory; give the merged run its own directory")
    # The joined lines are results.jsonl as it is (270 MB for 100,000 rows): written once,
    # under the name the folder publishes them from.
    with folder.writing("results.jsonl") as joined:
        result = merge_shards(shard_dirs, joined)
    return finish_run(result, folder, required, max_error_rate, results_written=True)
