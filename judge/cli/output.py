"""--format and --out of the commands that print a result (and may write it to a folder)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from judge.formatting import terminal_text


class Shown(Protocol):
    """A result that `show` prints and writes: agreement, probe."""

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON values."""

    def table(self) -> str:
        """The result as a text table."""

    def write_json(self, path: Path) -> None:
        """Write the result's JSON file."""


R = TypeVar("R", bound=Shown)


def written(folder: str | os.PathLike[str], *names: str) -> str:
    """The files written to a folder as printed: `DIR/first, second, ...`, one slash after
    the folder however it was given (`--out agreement/` prints `agreement/agreement.json`)."""
    first, *rest = names
    return ", ".join([str(Path(folder) / first), *rest])


# --format's help where it is the format of a --dry-run estimate (judge eval, experiment).
DRY_RUN_FORMAT = "with --dry-run: print the estimate as a text table or as JSON (default text)"


def output_options(
    p: argparse.ArgumentParser,
    files: str | None = None,
    *,
    format_help: str = "what to print: text or JSON (default text)",
) -> None:
    """Add --format text|json (helped by `format_help`) and, when the command writes
    `files`, --out DIR."""
    p.add_argument("--format", choices=["text", "json"], default="text", help=format_help)
    if files is not None:
        p.add_argument("--out", help=f"also write {files} here")


def write_files(
    out: str | os.PathLike[str], files: Sequence[tuple[str, Callable[[Path], None]]]
) -> None:
    """Write each (name, writer) into the folder `out`: locked, each file written whole
    under a temporary name, then all published in this order, no debris."""
    from judge.run.output_folder import OutputFolder

    with OutputFolder(out) as folder:
        for name, write in files:
            with folder.writing(name) as path:
                write(path)
        folder.publish([name for name, _ in files])


def show(
    result: R, args: argparse.Namespace, name: str, write_html: Callable[[R, Path], None]
) -> None:
    """Write NAME.json and NAME.html to --out when given, then print the result as --format
    says (with the files written, after a table)."""
    if args.out:
        write_files(
            args.out,
            [
                (f"{name}.html", lambda html: write_html(result, html)),
                (f"{name}.json", result.write_json),
            ],
        )
    if args.format == "json":
        print(terminal_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False)))
    else:
        print(terminal_text(result.table()))
        if args.out:
            print(terminal_text(f"\nwrote {written(args.out, f'{name}.json', f'{name}.html')}"))
