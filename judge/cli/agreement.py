"""`judge agreement LABELS --metric M --label COLUMN ...`: how far a metric agrees with people."""

from __future__ import annotations

import argparse

from judge.cli.options import (
    chosen_metrics,
    custom_metrics,
    data_options,
    model_config,
    model_options,
)
from judge.cli.output import output_options, show


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the agreement subcommand."""
    p = sub.add_parser(
        "agreement",
        help="measure how far a metric agrees with human labels",
        description="Score every row of LABELS with --metric (through the cache: a second "
        "run makes no request) and compare the scores with the people's labels in --label. "
        "binary: 1 = faithful/relevant, 0 = not; graded: numbers, higher = better; pairwise: "
        "rows sharing a --pair id, the preferred one labelled 1 and the other 0. Labels are "
        "checked before any request. Exit 2 for usage and input errors.",
    )
    p.add_argument("labels", help="data with a label column: .jsonl, .json, .csv, .parquet, ...")
    p.add_argument("--metric", required=True, help="the metric to check, e.g. faithfulness")
    p.add_argument("--label", required=True, help="the column of people's labels")
    p.add_argument(
        "--kind",
        choices=["binary", "graded", "pairwise"],
        help="the kind of label (default: pairwise with --pair, else binary)",
    )
    p.add_argument("--by", metavar="COLUMN", help="break the measures down by this column")
    p.add_argument(
        "--pair",
        metavar="COLUMN",
        help="pairwise: the column of pair ids; --label marks each pair's preferred row with 1",
    )
    model_options(p)
    output_options(p, "agreement.json and agreement.html")
    p.add_argument(
        "--disagreements",
        type=int,
        default=10,
        metavar="N",
        help="worst disagreements kept, with the judge's evidence (default 10)",
    )
    p.set_defaults(func=run_agreement)


def run_agreement(args: argparse.Namespace) -> int:
    """The `judge agreement` command."""
    from judge.labels.agreement import agreement
    from judge.labels.html import write_agreement

    metrics = chosen_metrics([args.metric], custom_metrics(args))
    llm, embeddings, cache = model_config(args)
    result = agreement(
        args.labels,
        metric=metrics[0] if metrics else args.metric,
        label=args.label,
        kind=args.kind,
        by=args.by,
        pair=args.pair,
        llm=llm,
        embeddings=embeddings,
        cache=cache,
        disagreements=max(0, args.disagreements),
        **data_options(args),
    )
    show(result, args, "agreement", write_agreement)
    return 0
