"""`judge plan RUN [RUN_B] --metric NAME --difference D` and `--half-width W`: how many
questions a comparison needs, and how many labels a label-corrected mean needs, from a pilot."""

from __future__ import annotations

import argparse
import json
from typing import Any

from judge.cli.output import output_options
from judge.cli.words import cli_words
from judge.errors import JudgeError
from judge.formatting import terminal_text

# the flags of each plan (their dest names)
QUESTION_FLAGS = ("power", "alpha", "pair_correlation", "tests")
LABEL_FLAGS = ("labels", "label", "judge_correlation", "confidence", "rows", "annotator")


def _probability(text: str) -> float:
    """--power, --alpha, --confidence: strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not strictly between 0 and 1")
    return value


def _number(text: str) -> float:
    """--difference, --half-width, the correlations: a number."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _count(text: str) -> int:
    """--tests: a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the plan subcommand."""
    p = sub.add_parser(
        "plan",
        help="how many questions a comparison needs, and how many labels (from a pilot)",
        description="Plan sample sizes from a pilot. With --difference D: the questions a "
        "paired comparison needs to detect a true difference of D in --metric with the "
        "--power asked at level --alpha (two-sided): from two runs RUN RUN_B of the same "
        "questions, the spread of their per-question differences; from one RUN, the "
        "spread of its scores and an assumed --pair-correlation of A's and B's scores "
        "(default 0: no benefit of pairing). Rows that are turns of conversations are "
        "planned by conversation (the between-conversation variance: a design effect). "
        "With --half-width W: the human labels (of a random sample of RUN's rows) for which "
        "judge estimate's PPI++ interval is W wide on each side: from a pilot --labels FILE "
        "(with --label), or an assumed --judge-correlation. Exit 0 done; 2 usage and input "
        "errors.",
    )
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="the pilot: RUN (a judge eval output folder or results.jsonl), and RUN_B, B's "
        "run of the same questions, for a paired pilot",
    )
    p.add_argument("--metric", required=True, metavar="NAME", help="the metric to plan for")
    p.add_argument(
        "--difference",
        type=_number,
        metavar="D",
        help="plan questions: the true mean difference B - A worth detecting (e.g. 0.05)",
    )
    p.add_argument(
        "--power",
        type=_probability,
        help="the probability of detecting D (default 0.8)",
    )
    p.add_argument("--alpha", type=_probability, help="the test's level (default 0.05)")
    p.add_argument(
        "--pair-correlation",
        type=_number,
        metavar="R",
        help="with one RUN: the assumed correlation of A's and B's scores of a question "
        "(default 0)",
    )
    p.add_argument(
        "--tests",
        type=_count,
        metavar="K",
        help="the tests judge compare will correct with Holm's method: the metrics "
        "compared, times the runs against the baseline; the plan is made at alpha / K "
        "(default: the metrics the pilot's runs share, as judge compare A B tests them)",
    )
    p.add_argument(
        "--half-width",
        type=_number,
        metavar="W",
        help="plan labels: the PPI interval's half-width wanted, on the labels' scale",
    )
    p.add_argument(
        "--labels",
        metavar="FILE",
        help="a pilot's labels of RUN's rows, as judge estimate reads them",
    )
    p.add_argument("--label", metavar="COLUMN", help="the labels' column")
    p.add_argument(
        "--judge-correlation",
        type=_number,
        metavar="R",
        help="without --labels: the assumed correlation of the judge's scores with people's labels",
    )
    p.add_argument(
        "--confidence",
        type=_probability,
        help="the PPI interval's coverage (default 0.95)",
    )
    p.add_argument(
        "--rows",
        type=int,
        metavar="N",
        help="the judged rows the labels will be drawn from (default: RUN's scored rows)",
    )
    p.add_argument(
        "--annotator",
        metavar="NAME",
        help="use this annotator's labels only (default: each row's annotators averaged)",
    )
    output_options(p)
    p.set_defaults(func=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    """The `judge plan` command."""
    from judge.comparison.plan import plan_questions
    from judge.labels.plan import plan_labels

    if len(args.runs) > 2:
        raise JudgeError(f"give one RUN, or two (RUN RUN_B), not {len(args.runs)}")
    if args.difference is None and args.half_width is None:
        raise JudgeError(
            "nothing to plan: give --difference D (the questions to detect a difference) "
            "and/or --half-width W (the labels for a PPI interval)"
        )
    # a flag of the plan not asked for is refused, not ignored
    for plan, asked, flags in (
        ("labels", args.half_width is not None, LABEL_FLAGS),
        ("questions", args.difference is not None, QUESTION_FLAGS),
    ):
        given = [flag for flag in flags if getattr(args, flag) is not None]
        if given and not asked:
            named = ", ".join("--" + f.replace("_", "-") for f in given)
            needs = "--half-width W" if plan == "labels" else "--difference D"
            raise JudgeError(
                f"{named} plan{'s' if len(given) == 1 else ''} {plan}: give {needs} too"
            )
    out: dict[str, Any] = {}
    texts = []
    if args.difference is not None:
        questions = plan_questions(
            args.runs[0],
            args.runs[1] if len(args.runs) > 1 else None,
            metric=args.metric,
            difference=args.difference,
            power=0.8 if args.power is None else args.power,
            alpha=0.05 if args.alpha is None else args.alpha,
            pair_correlation=args.pair_correlation,
            tests=args.tests,
        )
        out["questions"] = _cli_notes(questions.to_dict())
        texts.append(questions.text())
    if args.half_width is not None:
        labels = plan_labels(
            args.runs[0],
            metric=args.metric,
            half_width=args.half_width,
            labels=args.labels,
            label=args.label,
            judge_correlation=args.judge_correlation,
            confidence=0.95 if args.confidence is None else args.confidence,
            rows=args.rows,
            annotator=args.annotator,
        )
        out["labels"] = _cli_notes(labels.to_dict())
        texts.append(labels.text())
    if args.format == "json":
        print(terminal_text(json.dumps(out, indent=2, ensure_ascii=False)))
    else:
        print(terminal_text(cli_words("\n\n".join(texts))))
    return 0


def _cli_notes(data: dict[str, Any]) -> dict[str, Any]:
    """A plan's JSON with its notes in the CLI's words (flags, not keyword arguments)."""
    return {**data, "notes": [cli_words(note) for note in data["notes"]]}
