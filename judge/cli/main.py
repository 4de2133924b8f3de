"""The `judge` command line: one parser, a subcommand per module of `judge.cli`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from judge import __version__
from judge.errors import JudgeError


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `judge` command."""
    parser = argparse.ArgumentParser(
        prog="judge",
        description="Measure the quality of retrieval-augmented generation (RAG) systems.",
    )
    parser.add_argument("--version", action="version", version=f"judge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Each command module is imported here, not at the top: `judge ir` stays light.
    from judge.cli import (
        agreement,
        cache,
        compare,
        demo,
        eval,
        ir,
        merge,
        metrics,
        probe,
        testset,
    )

    for command in (ir, eval, merge, demo, compare, agreement, probe, metrics, cache, testset):
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `judge` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except JudgeError as exc:
        from judge.cli.words import cli_words  # the message in flags, not keyword arguments

        print(f"judge: error: {cli_words(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `judge ir ... | head` is fine
        return 0


if __name__ == "__main__":
    sys.exit(main())
