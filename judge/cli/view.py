"""`judge view`: the run history as a static web page in a folder (opens from file://);
with --monitor STATE, a monitor state's windows, baseline and alerts instead."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from judge.cli.options import runs_path, runs_path_option
from judge.errors import JudgeError
from judge.formatting import terminal_text


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
        "folder as a CI artifact, or send it. With --monitor STATE, the page of a judge "
        "monitor state instead: each metric's window means with their intervals, the "
        "baseline, the windows that raised an alert, and each alert's worst traces with the "
        "judge's evidence (the state is read, never written: a running monitor goes on).",
    )
    runs_path_option(p)
    p.add_argument(
        "--monitor",
        metavar="STATE",
        help="show this judge monitor state (the folder given to judge monitor --state) "
        "instead of the run history",
    )
    p.add_argument(
        "--out",
        help="the folder to write (default: judge-view, or judge-monitor-view with --monitor)",
    )
    p.add_argument(
        "--open", action="store_true", help="open the page in the web browser once written"
    )
    p.set_defaults(func=run_view)


def load_records(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The runs of the run store (--runs), oldest first, as the page reads them."""
    from judge.runs.store import open_existing

    path = runs_path(args)
    with open_existing(path) as store:
        records = []
        for record in store.runs():
            if record.damaged:
                print(
                    terminal_text(
                        f"judge: warning: run {record.id} in {path} is damaged "
                        f"({record.damaged}) and is left out of the page: forget it with "
                        f"judge runs rm {record.id}"
                    ),
                    file=sys.stderr,
                )
            else:
                records.append(record.to_dict())
    if not records:
        raise JudgeError(
            f"the run store {path} holds no runs yet: run judge eval or judge experiment"
        )
    return records


def run_view(args: argparse.Namespace) -> int:
    """The `judge view` command: write the page, print where it is, open it if asked."""
    from judge.view import build_monitor_view, build_view

    if args.monitor is not None:
        if args.runs is not None:
            raise JudgeError("--runs and --monitor: give one (a monitor's page has no runs)")
        index = build_monitor_view(args.monitor, args.out or "judge-monitor-view").resolve()
    else:
        index = build_view(load_records(args), args.out or "judge-view").resolve()
    print(terminal_text(f"wrote {index}"))
    if args.open:
        import webbrowser

        if not webbrowser.open(index.as_uri()):
            print(terminal_text(f"judge: note: no web browser to open; open {index} yourself"))
    return 0
