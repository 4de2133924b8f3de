"""The options that correct a judged mean with people's labels: `judge eval --labels FILE
--label COLUMN` (one run) and `judge compare A B --labels-a FILE --labels-b FILE --label
COLUMN` (the paired difference B - A), read into `judge.labels.estimate.Labels`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from judge.errors import JudgeError

if TYPE_CHECKING:
    from judge.labels.estimate import Labels

# how messages of judge.labels.estimate name the metric under these commands
KEYWORD = "label_metric"


def label_options(p: argparse.ArgumentParser, *, pair: bool = False) -> None:
    """Add --labels FILE (or, with `pair`, --labels-a and --labels-b), --label,
    --label-metric and --require-random."""
    files = "people's labels of some rows: JSON lines (or .csv, .json, .parquet) with each "
    files += "labelled row's id and its label, as judge annotate writes them"
    if pair:
        p.add_argument(
            "--labels-a",
            metavar="FILE",
            help=f"{files}, of A's outputs: with --labels-b, the labelled metric's paired "
            "difference B - A corrected by them (PPI), beside the judge's",
        )
        p.add_argument("--labels-b", metavar="FILE", help=f"{files}, of B's outputs")
        # argparse would take --labels for an ambiguous prefix of the two: say what to give
        p.add_argument("--labels", metavar="FILE", help=argparse.SUPPRESS)
    else:
        p.add_argument(
            "--labels",
            metavar="FILE",
            help=f"{files}: the labelled metric's mean corrected by them (PPI) goes into "
            "summary.json and the report, and its --gate is held to the corrected interval "
            "(a floor by its lower end, a cap by its upper end)",
        )
    p.add_argument("--label", metavar="COLUMN", help="the labels' column (with --labels)")
    p.add_argument(
        "--label-metric",
        metavar="NAME",
        help="the metric the labels are of (default: the one the labels' metric field "
        "names, as judge annotate records it; else the only "
        + ("--metric given" if pair else "gated metric")
        + "; else the run's only metric)",
    )
    p.add_argument(
        "--require-random",
        action="store_true",
        help="with labels: refuse labels that do not record a random sample (default: warn)",
    )


def labels_of(args: argparse.Namespace) -> Labels | None:
    """`judge eval`'s labels (read and checked now: a bad file fails before any row is
    judged), or None without --labels."""
    from judge.labels.estimate import Labels

    if args.labels is None:
        _nothing_else(args, "--labels FILE")
        return None
    if args.label is None:
        raise JudgeError(f"--labels {args.labels}: name the labels' column with --label COLUMN")
    labels = Labels(
        args.labels,
        label=args.label,
        metric=args.label_metric,
        require_random=args.require_random,
        keyword=KEYWORD,
    )
    # read once, before any request: the run is corrected with these labels, not with
    # what the file holds when it ends
    return labels.read_now()


def pair_of(args: argparse.Namespace) -> tuple[str, str] | None:
    """`judge compare`'s labels of A's and of B's outputs, or None without any; one side
    alone is refused: a paired difference needs both."""
    if args.labels is not None:
        raise JudgeError(
            f"--labels {args.labels}: judge compare takes one labels file per run: "
            "--labels-a FILE (people's labels of A's outputs) and --labels-b FILE (of B's)"
        )
    given = {"--labels-a": args.labels_a, "--labels-b": args.labels_b}
    if not any(given.values()):
        _nothing_else(args, "--labels-a FILE --labels-b FILE")
        return None
    missing = [flag for flag, value in given.items() if value is None]
    if missing:
        other = "A" if missing[0] == "--labels-a" else "B"
        raise JudgeError(
            f"{missing[0]} is missing: the label-corrected difference B - A needs people's "
            f"labels of both runs' outputs on the same rows; give {missing[0]} FILE with the "
            f"labels of {other}'s outputs, or leave the labels out"
        )
    if args.label is None:
        raise JudgeError("--labels-a and --labels-b: name the labels' column with --label COLUMN")
    return args.labels_a, args.labels_b


def _nothing_else(args: argparse.Namespace, needed: str) -> None:
    """Refuse the label options given without the labels themselves."""
    for flag, value in (
        ("--label", args.label),
        ("--label-metric", args.label_metric),
        ("--require-random", args.require_random or None),
    ):
        if value is not None:
            raise JudgeError(f"{flag} goes with {needed}: give the labels file")
