"""`judge annotate RESULTS --labels FILE`: label a run's rows in a local web page."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from judge.errors import JudgeError, OutputError
from judge.formatting import terminal_text


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the annotate subcommand."""
    p = sub.add_parser(
        "annotate",
        help="label a run's rows in a local web page; the labels feed agreement and estimate",
        description="Serve a page on 127.0.0.1 (its URL, with a random token, is printed) "
        "that shows the run's rows one at a time: the question, the contexts with the "
        "judge's grades, the answer with each claim's verdict and reason. Keys: y / n "
        "label the row (for faithfulness: is every claim supported?), 1-9 flip a claim's "
        "verdict, s skips, arrows move. Each key is appended to --labels and synced to disk "
        "at once: stop the server at any time and start it again to go on where you "
        "stopped. The rows are a seeded random sample of the run's rows (so the labels "
        "serve judge estimate; judge estimate leaves out the labels of rows the judge "
        "could not score), unless --order disagreements. With --agreement or --export "
        "nothing is served.",
    )
    p.add_argument("results", help="the run's folder or its results.jsonl")
    p.add_argument("--labels", required=True, help="the labels file (JSON lines; made if absent)")
    p.add_argument(
        "--metric",
        help="the metric whose verdict people label (default: faithfulness when the run "
        "has it, else its first metric; a labels file already begun keeps its own)",
    )
    p.add_argument(
        "--annotator",
        help="who labels (default: your user name); with --export, whose labels to export",
    )
    p.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="label N rows drawn at random (default: every row, in a random order)",
    )
    p.add_argument("--seed", type=int, help="the seed of the draw (default 0)")
    p.add_argument(
        "--order",
        choices=["random", "disagreements"],
        help="random (default): a seeded random sample, as judge estimate needs; "
        "disagreements: the rows whose score is nearest 0.5 first, labels that are NOT a "
        "random sample (the labels file says so)",
    )
    p.add_argument("--port", type=int, default=0, help="the port (default: any free one)")
    p.add_argument("--open", action="store_true", help="open the page in the web browser")
    p.add_argument(
        "--agreement",
        action="store_true",
        help="print how far the annotators agree (Cohen's kappa for two, Fleiss' for more) "
        "and exit",
    )
    p.add_argument(
        "--export",
        metavar="OUT",
        help="write the labelled rows to OUT (JSON lines: the row's id and inputs, `label`, "
        "each annotator's `labels` and `sample`), one per row as judge agreement reads them, "
        "and exit",
    )
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="what --agreement prints: text or JSON (default text)",
    )
    p.set_defaults(func=run_annotate)


def _annotator(args: argparse.Namespace) -> str:
    if args.annotator:
        return str(args.annotator)
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name in the environment or the password file
        raise JudgeError("cannot tell who you are: give --annotator NAME") from None


def run_annotate(args: argparse.Namespace) -> int:
    """The `judge annotate` command."""
    from judge.annotate import Annotation, Choice

    if args.agreement and args.export:
        raise JudgeError("--agreement and --export are two commands: give one of them")
    if not 0 <= args.port <= 65535:
        raise JudgeError(f"--port {args.port}: give a port from 0 to 65535 (0: any free one)")
    reading = args.agreement or args.export
    annotator = args.annotator if reading else _annotator(args)
    annotation = Annotation(
        args.results,
        args.labels,
        annotator=annotator or "-",
        choice=Choice(metric=args.metric, order=args.order, seed=args.seed, sample=args.sample),
    )
    if reading and not annotation.log.labels:
        raise JudgeError(
            f"{args.labels} holds no labels yet: label rows with judge annotate RESULTS "
            f"--labels {args.labels} first"
        )
    for problem in annotation.log.problems:
        print(terminal_text(f"judge: warning: {problem}"), file=sys.stderr)
    if args.agreement:
        return _print_agreement(annotation, args.format)
    if args.export:
        return _export(annotation, args.export, args.annotator)
    from judge.annotate.server import serve

    token = secrets.token_urlsafe(24)
    annotation.open()
    try:
        asyncio.run(serve(annotation, token, port=args.port, ready=lambda url: _ready(url, args)))
    finally:
        annotation.close()
        for line in annotation.summary():
            print(terminal_text(line), flush=True)
    return 0


def _ready(url: str, args: argparse.Namespace) -> None:
    print(f"judge annotate: label the rows at {url}", flush=True)
    print("judge annotate: each label is saved as you give it; Ctrl-C stops the server", flush=True)
    if args.open:
        import webbrowser

        if not webbrowser.open(url):
            print("judge: note: no web browser to open; open the URL yourself", flush=True)


def _print_agreement(annotation: Any, form: str) -> int:
    agreement = annotation.agreement()
    if form == "json":
        print(json.dumps(agreement.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(terminal_text(agreement.text()))
        for measure in (agreement.kappa, agreement.agreement):
            if measure.note:
                print(terminal_text(f"  note: {measure.note}"))
    return 0


def _export(annotation: Any, out: str, annotator: str | None) -> int:
    rows, note = annotation.export(annotator)
    path = Path(out)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
        os.replace(temporary, path)
    except OSError as exc:
        raise OutputError(
            f"cannot write {path}: {exc.strerror or exc}; give another --export"
        ) from None
    finally:
        temporary.unlink(missing_ok=True)
    print(terminal_text(f"wrote {len(rows)} labelled rows to {path} ({annotation.draw.sampled()})"))
    if note:
        print(terminal_text(f"judge: note: {note}"), file=sys.stderr)
    return 0
