"""`judge merge OUT SHARD_DIR...`: join the outputs of `judge eval --shard I/N`."""

from __future__ import annotations

import argparse

from judge.cli.finish import merge_into, record_run
from judge.cli.label_options import label_options, labels_of
from judge.cli.options import gate_options, gates_of, runs_options


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the merge subcommand."""
    p = sub.add_parser(
        "merge",
        help="join the outputs of judge eval --shard I/N into one run's",
        description="Join the --out directories of `judge eval DATA --shard I/N` (every I "
        "from 1 to N, once) into OUT: results.jsonl in input order, summary.json and "
        "report.html, computed from the joined rows as an unsharded run's. Shards with "
        "other metrics, models, prompts, servers or data are refused. config.seconds and "
        "config.resumed_rows are summed over the shards, usage too. With --labels, the "
        "joined run's labelled metric is corrected by them as judge eval --labels corrects a "
        "run (the shards cannot take labels). Exit codes as judge eval: "
        "0 passed; 1 a --gate (or --fail-under) was missed; 2 an error; 3 over --max-error-rate.",
    )
    p.add_argument("out", metavar="OUT", help="output directory of the joined run")
    p.add_argument("shards", nargs="+", metavar="SHARD_DIR", help="a shard's --out directory")
    gate_options(p)
    label_options(p)  # a sharded run cannot take them: the joined one can, as judge eval's
    runs_options(p)
    p.set_defaults(func=run_merge)


def run_merge(args: argparse.Namespace) -> int:
    """The `judge merge` command."""
    from judge.run.output_folder import OutputFolder

    gates = gates_of(args)
    labels = labels_of(args)  # a labels file that cannot be used fails before the join
    with OutputFolder(args.out) as folder:
        code = merge_into(folder, args.shards, gates, labels=labels)
    record_run(args, folder.path, "merge")
    return code
