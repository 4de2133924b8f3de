"""The command line's reference in Markdown, made from the parsers themselves.

`docs/reference/cli.md` holds one line, `<!-- judge-cli-reference -->`; the docs build
replaces it through the Python-Markdown extension below (named `judge.cli.reference` in
mkdocs.yml), so the reference can never drift from `judge --help`.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

PLACEHOLDER = "<!-- judge-cli-reference -->"


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """The (name, parser) of each subcommand, in the order `--help` lists them."""
    for action in parser._actions:  # argparse keeps no public list of subparsers
        if isinstance(action, argparse._SubParsersAction):
            seen: dict[int, tuple[str, argparse.ArgumentParser]] = {}
            for name, sub in action.choices.items():
                seen.setdefault(id(sub), (name, sub))  # an alias names the same parser
            return list(seen.values())
    return []


def _escape(text: str) -> str:
    """Text from a help string, safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def _invocation(action: argparse.Action) -> str:
    """How an option or positional is written: `--out DIR`, `-m, --metric M`, `DATA`."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    if action.nargs == 0:
        return ", ".join(f"`{o}`" for o in action.option_strings)
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    return ", ".join(f"`{o} {metavar}`" for o in action.option_strings)


def _help(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    """An action's help with argparse's %-placeholders filled, as `--help` shows it."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params: dict[str, Any] = dict(vars(action), prog=parser.prog)
    params["choices"] = ", ".join(map(str, action.choices)) if action.choices else ""
    try:
        return action.help % params
    except (KeyError, TypeError, ValueError):
        return action.help


def _section(parser: argparse.ArgumentParser, depth: int, out: list[str]) -> None:
    heading = "#" * depth
    out += [f"{heading} `{parser.prog}`", ""]
    if parser.description:
        out += [_escape(parser.description), ""]
    usage = re.sub(r"\s+", " ", parser.format_usage().removeprefix("usage: ").strip())
    out += ["```text", usage, "```", ""]
    subs = _subcommands(parser)
    rows = [
        a
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        and a.help != argparse.SUPPRESS
    ]
    if rows:
        out += ["| argument | default | what it does |", "|---|---|---|"]
        for action in rows:
            default = action.default
            shown = (
                ""
                if default in (None, False, argparse.SUPPRESS) or action.nargs == 0
                else f"`{default}`"
            )
            out.append(f"| {_invocation(action)} | {shown} | {_escape(_help(action, parser))} |")
        out.append("")
    for _, sub in subs:
        _section(sub, depth + 1, out)


def cli_markdown(parser: argparse.ArgumentParser | None = None, depth: int = 2) -> str:
    """The reference of every command, subcommand and option, as Markdown.

    Args:
        parser: the parser to describe; the `judge` command's when None.
        depth: the heading level of the top command.
    """
    if parser is None:
        from judge.cli.main import build_parser

        parser = build_parser()
    out: list[str] = []
    _section(parser, depth, out)
    return "\n".join(out)


def makeExtension(**kwargs: Any) -> Any:
    """The Python-Markdown extension that replaces the placeholder line with the reference."""
    from markdown import Extension  # only the docs build, with the `docs` extra, gets here
    from markdown.preprocessors import Preprocessor

    class CliReference(Preprocessor):  # type: ignore[misc]
        def run(self, lines: list[str]) -> list[str]:
            out: list[str] = []
            for line in lines:
                out += cli_markdown().splitlines() if line.strip() == PLACEHOLDER else [line]
            return out

    class CliReferenceExtension(Extension):  # type: ignore[misc]
        def extendMarkdown(self, md: Any) -> None:
            md.preprocessors.register(CliReference(md), "judge_cli_reference", 28)

    return CliReferenceExtension(**kwargs)
