"""`judge merge OUT SHARD_DIR...`: join the outputs of `judge eval --shard I/N`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from judge.cli.eval import finish_run, gate_options, thresholds
from judge.errors import JudgeError


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
    required = thresholds(args.fail_under, args.max_error_rate)
    return merge_into(Path(args.out), args.shards, required, args.max_error_rate)


def merge_into(
    out: Path, shard_dirs: Sequence[str | Path], required: dict[str, float], max_error_rate: float
) -> int:
    """Join the shards' outputs into `out` as `judge merge` does; returns the exit code."""
    from judge.run.checkpoint import RowFile
    from judge.run.merge import merge_shards

    if any(out.resolve() == Path(d).resolve() for d in shard_dirs):
        raise JudgeError(f"{out} is a shard's directory; give the merged run its own directory")
    out.mkdir(parents=True, exist_ok=True)
    joined = out / ".merged.jsonl"
    try:
        result = merge_shards(shard_dirs, joined)
        # The joined lines are results.jsonl as it is: renamed, not copied (270 MB for
        # 100,000 rows), once every row is in.
        rows = result.rows
        assert isinstance(rows, RowFile)  # merge_shards reads the joined file lazily
        rows.move(out / "results.jsonl")
        return finish_run(result, out, required, max_error_rate, results_written=True)
    finally:
        joined.unlink(missing_ok=True)
