"""`judge view`: the run history as a static web page in a folder (opens from file://)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from judge.errors import InputFormatError, JudgeError


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the view subcommand."""
    p = sub.add_parser(
        "view",
        help="write the run history as a web page: metrics across runs, runs, differences",
        description="Write the run history as a static web page into --out: a chart of "
        "each metric's mean across runs in time order (the 95% interval as a band, the "
        "baseline marked), the runs table, and for any two runs chosen in it the "
        "per-question scores, differences and answers. The folder needs no server and "
        "fetches nothing (Chart.js is shipped inside it): open index.html, keep the "
        "folder as a CI artifact, or send it.",
    )
    p.add_argument(
        "--records",
        metavar="FILE",
        required=True,
        help="the runs, as a JSON list of run records (`judge runs list --json`)",
    )
    p.add_argument("--out", default="judge-view", help="the folder to write (default: judge-view)")
    p.add_argument(
        "--open", action="store_true", help="open the page in the web browser once written"
    )
    p.set_defaults(func=run_view)


def load_records(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The run records to show: for now the JSON list of --records."""
    path = Path(args.records)
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise JudgeError(
            f"--records {path}: no such file; give a JSON list of run records"
        ) from None
    except ValueError as exc:
        raise InputFormatError(
            f"not JSON ({exc}); give a JSON list of run records", path=str(path)
        ) from None
    if not isinstance(records, list):
        raise InputFormatError("not a JSON list; give a JSON list of run records", path=str(path))
    return records


def run_view(args: argparse.Namespace) -> int:
    """The `judge view` command: write the page, print where it is, open it if asked."""
    from judge.view import build_view

    index = build_view(load_records(args), args.out).resolve()
    print(f"wrote {index}")
    if args.open:
        import webbrowser

        if not webbrowser.open(index.as_uri()):
            print(f"judge: note: no web browser to open; open {index} yourself")
    return 0
