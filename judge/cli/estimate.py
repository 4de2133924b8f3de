"""`judge estimate RESULTS --labels FILE --label COLUMN --metric NAME`: a run's judged mean
corrected by people's labels on a random few of its rows (prediction-powered inference)."""

from __future__ import annotations

import argparse
import json
import sys

from judge.cli.output import output_options
from judge.cli.words import cli_words
from judge.formatting import terminal_text


def _confidence(text: str) -> float:
    """--confidence: a coverage strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1 (0.95 for 95%)")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the estimate subcommand."""
    p = sub.add_parser(
        "estimate",
        help="correct a run's judged mean with human labels on a random sample (PPI)",
        description="Estimate the mean of people's labels over every row of RESULTS from the "
        "judge's scores of --metric on all rows and the labels in --labels on a random few: "
        "prediction-powered inference with power tuning (PPI++; Angelopoulos et al. 2023), "
        "printed beside the judge-only and labels-only estimates, each with its interval "
        "and n. Labels join rows by the row's id in results.jsonl. The interval holds only "
        "when the labelled rows are a random sample: a labels file that does not record one "
        "(each record's sample.method = random) is warned about, or refused with "
        "--require-random. Exit 0 done; 1 a --gate missed by the PPI interval; 2 usage "
        "and input errors.",
    )
    p.add_argument("results", metavar="RESULTS", help="a run's output folder or results.jsonl")
    p.add_argument(
        "--labels",
        required=True,
        metavar="FILE",
        help="labels: JSON lines (or .csv, .json, .parquet) with each labelled row's id and "
        "its label (judge annotate writes one)",
    )
    p.add_argument("--label", required=True, metavar="COLUMN", help="the labels' column")
    p.add_argument("--metric", required=True, metavar="NAME", help="the metric to correct")
    p.add_argument(
        "--confidence",
        type=_confidence,
        default=0.95,
        help="the intervals' coverage (default 0.95)",
    )
    p.add_argument(
        "--annotator",
        metavar="NAME",
        help="use this annotator's labels only (default: each row's annotators averaged)",
    )
    p.add_argument(
        "--require-random",
        action="store_true",
        help="refuse labels that do not record a random sample (default: warn)",
    )
    p.add_argument(
        "--gate",
        action="append",
        default=[],
        metavar="'METRIC>=VALUE'",
        help="exit 1 unless the whole PPI interval meets the bound: its lower end at least "
        "VALUE (METRIC>=VALUE), or its upper end at most VALUE (METRIC<=VALUE, a metric "
        "where lower is better); VALUE on the labels' scale (repeatable)",
    )
    output_options(p)
    p.set_defaults(func=run_estimate)


def run_estimate(args: argparse.Namespace) -> int:
    """The `judge estimate` command."""
    from judge.labels.estimate import estimate
    from judge.run.gates import CLI_WORDS, Gates

    result = estimate(
        args.results,
        labels=args.labels,
        label=args.label,
        metric=args.metric,
        confidence=args.confidence,
        annotator=args.annotator,
        require_random=args.require_random,
        gates=Gates.of(args.gate, words=CLI_WORDS),
    )
    if args.format == "json":
        print(terminal_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False)))
    else:
        print(terminal_text(result.table(warnings=False)))
    # on stderr, in either format: a CI log shows them, and they stay out of the JSON piped on
    for warning in result.warnings:
        print(terminal_text(f"judge: warning: {cli_words(warning)}"), file=sys.stderr)
    for line in result.missed:  # as judge eval says a missed gate
        print(terminal_text(f"FAILED threshold: {line}"), file=sys.stderr)
    return 1 if result.missed else 0
