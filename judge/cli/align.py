"""`judge align LABELS --metric faithfulness --out DIR`: tune the judge on people's labels,
measured on held-out rows, and write the chosen prompts as a prompt set."""

from __future__ import annotations

import argparse

from judge.cli.options import data_options, model_config, model_options
from judge.cli.output import write_files
from judge.errors import JudgeError


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the align subcommand."""
    p = sub.add_parser(
        "align",
        help="tune the judge on human labels, measured on held-out rows",
        description="Split the labelled rows of LABELS (stratified by label, seeded) into "
        "tune and held-out rows; judge the tune rows and turn the ones the judge got wrong "
        "into few-shot examples (a data block of the metric's prompt); measure every "
        "candidate (the built-in prompt, each number of --examples, each of --candidates) on "
        "the held-out rows only: balanced accuracy and Cohen's kappa with 95%% bootstrap "
        "intervals, the difference from the built-in judge with a paired interval and test "
        "(said to be within noise when it is), judgments and prompt characters per row. The "
        "best candidate's prompts are written to DIR/prompts, a prompt set for judge eval "
        "--prompts. Exit 2 for usage and input errors.",
    )
    p.add_argument("labels", help="rows with question, answer, contexts and a 0/1 label column")
    p.add_argument("--metric", required=True, help="the metric to tune: faithfulness")
    p.add_argument("--label", default="label", help="the column of people's labels (default label)")
    p.add_argument(
        "--held-out",
        type=float,
        default=0.3,
        metavar="SHARE",
        help="the share of each label's rows held out for measuring (default 0.3)",
    )
    p.add_argument("--seed", type=int, default=0, help="the split's seed (default 0)")
    p.add_argument(
        "--group",
        metavar="COLUMN",
        help="split the rows sharing a value of COLUMN together (a question's id when its "
        "good and bad answers are two rows), so no held-out row shares its question with an "
        "example",
    )
    p.add_argument(
        "--examples",
        default="4,8",
        metavar="N,...",
        help="numbers of few-shot examples to try, each a candidate (default 4,8)",
    )
    p.add_argument(
        "--candidates",
        default="",
        metavar="C,...",
        help="other judges to measure: a prompt file (verify.txt) or a prompt set's folder, "
        "else a judge model's name (asked at --api-base)",
    )
    model_options(p)
    p.add_argument(
        "--format", choices=["text", "json"], default="text", help="what to print (default text)"
    )
    p.add_argument(
        "--out",
        required=True,
        help="folder for align.json, align.html, prompts/ (the chosen prompt set) and candidates/",
    )
    p.set_defaults(func=run_align)


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise JudgeError(f"--examples {text}: give whole numbers, e.g. 4,8") from None
    if not counts or any(k < 1 for k in counts):
        raise JudgeError(f"--examples {text}: give numbers of examples of 1 or more, e.g. 4,8")
    return counts


def run_align(args: argparse.Namespace) -> int:
    """The `judge align` command."""
    import json

    from judge.formatting import terminal_text
    from judge.labels.align import align, write_align

    if not 0 < args.held_out < 1:
        raise JudgeError(f"--held-out {args.held_out}: give a share between 0 and 1, e.g. 0.3")
    examples = _counts(args.examples)
    llm, embeddings, cache = model_config(args)
    result = align(
        args.labels,
        metric=args.metric,
        out=args.out,
        label=args.label,
        llm=llm,
        held_out=args.held_out,
        seed=args.seed,
        examples=examples,
        candidates=[c.strip() for c in args.candidates.split(",") if c.strip()],
        group=args.group,
        embeddings=embeddings,
        cache=cache,
        **data_options(args),
    )
    write_files(
        args.out,
        [("align.html", lambda path: write_align(result, path)), ("align.json", result.write_json)],
    )
    if args.format == "json":
        print(terminal_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False)))
    else:
        print(terminal_text(result.table()))
    return 0
