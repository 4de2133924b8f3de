"""`judge probe DATA --model M ...`: stability probes of the judge on DATA."""

from __future__ import annotations

import argparse
import dataclasses

from judge.cli.options import data_options, metrics_given, model_config, model_options
from judge.cli.output import output_options, show
from judge.errors import JudgeError

EXIT_FAILED = 1  # a probe's expectation did not hold (2: usage)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the probe subcommand."""
    p = sub.add_parser(
        "probe",
        help="check that the judge is stable: repeats, context order, verbosity, granularity",
        description="Judge every row of DATA as given and perturbed, and check each "
        "probe's expectation: repeat (each row judged --repeats times with different seeds "
        "at temperature 0.7), order (contexts shuffled), verbosity (the answer padded with "
        "content-free filler), granularity (the answer's sentences joined into one, or one "
        "per line), and with --second-model the agreement of two judge models. Every run "
        "goes through the cache: a second probe makes no request. Exit 0 when every "
        "expectation held, 1 when one failed, 2 for usage and input errors.",
    )
    p.add_argument(
        "data",
        help=".jsonl, .json, .csv, .parquet, a saved dataset directory, or hf://OWNER/NAME[:SPLIT] "
        "for a dataset on the hub (only then is the hub asked)",
    )
    p.add_argument(
        "--probes",
        default="repeat,order,verbosity,granularity",
        help="comma-separated probes (default: repeat,order,verbosity,granularity)",
    )
    p.add_argument("--metrics", help="comma-separated metric names (default as judge eval)")
    p.add_argument("--second-model", metavar="MODEL", help="a second judge model, same server")
    p.add_argument("--repeats", type=int, default=3, help="judgments per row (default 3)")
    p.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        help="pass mark for the repeat crossings and kappa (default 0.5)",
    )
    p.add_argument("--seed", type=int, default=0, help="seeds shuffles and repeats (default 0)")
    model_options(p)
    output_options(p, "probe.json and probe.html")
    p.set_defaults(func=run_probe)


def run_probe(args: argparse.Namespace) -> int:
    """The `judge probe` command."""
    from judge.probes.html import write_probe
    from judge.probes.probe import probe

    metrics = metrics_given(args)
    llm, embeddings, cache = model_config(args)
    probes = [p.strip() for p in args.probes.split(",") if p.strip()]
    if not probes and not args.second_model:
        raise JudgeError("--probes is empty and there is no --second-model: nothing to probe")
    result = probe(
        args.data,
        llm=llm,
        probes=probes,
        metrics=metrics,
        second_llm=dataclasses.replace(llm, model=args.second_model) if args.second_model else None,
        repeats=args.repeats,
        threshold=args.threshold,
        seed=args.seed,
        embeddings=embeddings,
        cache=cache,
        **data_options(args),
    )
    show(result, args, "probe", write_probe)
    return EXIT_FAILED if result.failed else 0
