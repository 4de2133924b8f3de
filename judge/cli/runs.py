"""`judge runs list|show|tag|rm|baseline`: the run history kept in the run store."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.cli.options import runs_path, runs_path_option
from judge.cli.words import cli_words
from judge.errors import JudgeError
from judge.formatting import counted, terminal_text
from judge.runs.store import RECORDED_THERE

if TYPE_CHECKING:
    from judge.runs.store import RunRecord, RunStore

MAX_METRIC_COLUMNS = 5  # metrics shown in `list`; `show` and `--json` have all of them
DATA_WIDTH = 32  # characters of the data path shown in `list`
MISSING = "-"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the runs subcommand."""
    r = sub.add_parser(
        "runs",
        help="list, show, tag, forget recorded runs and pin a baseline",
        description="The run history: every finished judge eval, judge merge and judge "
        "experiment is recorded in the run store (default: $JUDGE_RUNS if set, else "
        ".judge/runs.sqlite). A run is named by its id, the start of its id (4 characters "
        "or more), its name (the latest run of that name) or 'baseline'. See "
        "`judge runs ACTION --help`.",
    )
    actions = r.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="the recorded runs, oldest first",
        description="The recorded runs, oldest first: id, name, time, command, judge "
        "model, data, rows, the means of the first metrics, tags; * marks the baseline.",
    )
    listing.add_argument("--json", action="store_true", help="a JSON list of every record")
    listing.set_defaults(func=run_list)
    show = actions.add_parser(
        "show", help="one run's record", description="Everything recorded of one run."
    )
    show.add_argument("ref", metavar="REF", help="a run's id, id prefix, name or 'baseline'")
    show.add_argument("--json", action="store_true", help="the record as JSON")
    show.set_defaults(func=run_show)
    tag = actions.add_parser(
        "tag", help="tag a run (or --remove tags)", description="Add tags to a run."
    )
    tag.add_argument("ref", metavar="REF", help="a run's id, id prefix, name or 'baseline'")
    tag.add_argument("tags", nargs="+", metavar="TAG", help="a tag")
    tag.add_argument("--remove", action="store_true", help="remove the tags instead")
    tag.set_defaults(func=run_tag)
    rm = actions.add_parser(
        "rm",
        help="forget a run (its output folder and the cache stay)",
        description="Forget a run: its record leaves the run store; its output folder and "
        "the judgment cache are not touched.",
    )
    rm.add_argument("ref", metavar="REF", help="a run's id, id prefix, name or 'baseline'")
    rm.set_defaults(func=run_rm)
    baseline = actions.add_parser(
        "baseline",
        help="show, pin or --clear the baseline run",
        description="Pin a run as the baseline (at most one: the one before is unpinned); "
        "with no REF, show the baseline; --clear unpins it.",
    )
    baseline.add_argument("ref", nargs="?", metavar="REF", help="the run to pin")
    baseline.add_argument("--clear", action="store_true", help="unpin the baseline")
    baseline.set_defaults(func=run_baseline)
    for action in (listing, show, tag, rm, baseline):
        runs_path_option(action)


def _open(args: argparse.Namespace) -> RunStore:
    """The run store of --runs; an error, not a new file, when there is none."""
    from judge.runs.store import open_existing

    return open_existing(runs_path(args))


def run_list(args: argparse.Namespace) -> int:
    """`judge runs list`."""
    path = runs_path(args)
    records = []
    if path.exists():  # an absent store is an empty history: no file is made to say so
        with _open(args) as store:
            records = store.runs()
    if args.json:
        print(_json_text([r.to_dict() for r in records]))
    elif not records:
        print(terminal_text(cli_words(f"no runs recorded in {path} yet: {RECORDED_THERE}")))
    else:
        print(runs_table(records))
    return 0


def _json_text(value: Any) -> str:
    """JSON for the terminal: control and bidi characters of names and tags as escapes."""
    return terminal_text(json.dumps(value, indent=2, ensure_ascii=False))


def _mean(record: RunRecord, metric: str) -> str:
    value = (record.summary.get(metric) or {}).get("mean")
    return MISSING if value is None or math.isnan(value) else f"{value:.3f}"


def _short(text: str, width: int) -> str:
    """text, or its end after '...' when longer than width (a path's file name shows)."""
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def runs_table(records: list[RunRecord]) -> str:
    """The table of `judge runs list`."""
    metrics: list[str] = []
    for record in records:
        metrics.extend(m for m in record.metrics if m not in metrics)
    shown = metrics[:MAX_METRIC_COLUMNS]
    header = ["", "id", "name", "created", "command", "model", "data", "rows", *shown, "tags"]
    lines = [
        [
            "*" if r.baseline else "",
            r.id,
            r.name or MISSING,
            r.created,
            r.command,
            r.model or MISSING,
            _short(r.data, DATA_WIDTH),
            str(r.rows),
            *(_mean(r, m) for m in shown),
            ",".join(r.tags) or MISSING,
        ]
        if not r.damaged
        else ["*" if r.baseline else "", r.id, r.name or MISSING, "(damaged: see below)"]
        for r in records
    ]
    lines = [line + [""] * (len(header) - len(line)) for line in lines]
    if not any(r.baseline for r in records):  # no mark to show: no column for it
        header, lines = header[1:], [line[1:] for line in lines]
    lines = [[terminal_text(cell, one_line=True) for cell in line] for line in lines]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    text = "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *lines]
    )
    notes = []
    if any(r.baseline for r in records):
        notes.append("* the baseline")
    if len(metrics) > len(shown):
        notes.append(
            f"{counted(len(metrics) - len(shown), 'more metric')} "
            f"({', '.join(metrics[len(shown) :])}): "
            "see judge runs show REF or judge runs list --json"
        )
    notes.extend(
        f"run {r.id} is damaged ({r.damaged}): forget it with judge runs rm {r.id}"
        for r in records
        if r.damaged
    )
    return "\n".join([text, *(terminal_text(note) for note in notes)])


def describe(record: RunRecord) -> str:
    """The text of `judge runs show`: every field, and the metrics with their intervals."""
    from judge.run.folder import RunFolder

    gone = "  (not there now: moved or deleted)"
    changed = "  (changed since recorded: its results.jsonl is a later run's now)"
    fields: list[tuple[str, str]] = [
        ("id", record.id + ("  (the baseline)" if record.baseline else "")),
        ("name", record.name or MISSING),
        ("created", record.created),
        ("command", record.command),
        (
            "outputs",
            record.out_dir
            + (gone if not Path(record.out_dir).is_dir() else "")
            + (changed if RunFolder(record.out_dir).results_changed(record.results_sha256) else ""),
        ),
        ("data", f"{record.data} (sha256 {record.data_sha256[:16]})"),
        ("rows", str(record.rows)),
        ("model", record.model or MISSING),
        ("embeddings", record.embeddings or MISSING),
        ("prompts", ", ".join(f"{k} {v}" for k, v in sorted(record.prompts.items())) or MISSING),
        ("git", _git_text(record.git)),
        ("app", _app_text(record.app)),
        ("tags", ", ".join(record.tags) or MISSING),
    ]
    width = max(len(k) for k, _ in fields)
    lines = [f"{k.ljust(width)}  {terminal_text(v, one_line=True)}" for k, v in fields]
    if record.metrics:
        name_width = max(len(terminal_text(m, one_line=True)) for m in record.metrics)
        lines.append("")
        lines.append(f"{'metric'.ljust(name_width)}  {'mean':>6}  95% CI            scored")
        for metric in record.metrics:
            s: dict[str, Any] = record.summary.get(metric) or {}
            low, high = s.get("ci_low"), s.get("ci_high")
            ci = MISSING if low is None or high is None else f"[{low:.3f}, {high:.3f}]"
            scored = s.get("scored")
            lines.append(
                f"{terminal_text(metric, one_line=True).ljust(name_width)}  "
                f"{_mean(record, metric):>6}  {ci:<16}  "
                f"{MISSING if scored is None else scored}"
            )
    return "\n".join(lines)


def _git_text(git: dict[str, Any] | None) -> str:
    if git is None:
        return "(not in a git repository)"
    dirty = " with uncommitted changes" if git.get("dirty") else ""
    return f"{git.get('commit')}{dirty} in {git.get('root')}"


def _app_text(app: dict[str, Any] | None) -> str:
    if app is None:
        return MISSING
    return ", ".join(f"{k} {v}" for k, v in app.items())


def _print_record(record: RunRecord, as_json: bool) -> None:
    if as_json:
        print(_json_text(record.to_dict()))
    else:
        print(describe(record))


def run_show(args: argparse.Namespace) -> int:
    """`judge runs show REF`."""
    with _open(args) as store:
        _print_record(store.get(args.ref), args.json)  # a damaged record is refused
    return 0


def run_tag(args: argparse.Namespace) -> int:
    """`judge runs tag REF TAG... [--remove]`."""
    with _open(args) as store:
        record = store.tag(args.ref, args.tags, remove=args.remove)
    tags = terminal_text(", ".join(record.tags), one_line=True)
    print(f"run {record.id}: tags {tags or '(none)'}")
    return 0


def run_rm(args: argparse.Namespace) -> int:
    """`judge runs rm REF`."""
    with _open(args) as store:
        record = store.remove(args.ref)
    print(terminal_text(f"forgot run {record.id}; its outputs stay in {record.out_dir}"))
    return 0


def run_baseline(args: argparse.Namespace) -> int:
    """`judge runs baseline [REF] [--clear]`."""
    if args.clear and args.ref is not None:
        raise JudgeError("judge runs baseline: give a REF to pin or --clear, not both")
    with _open(args) as store:
        if args.clear:
            before = store.baseline()
            store.set_baseline(None)
            print(f"unpinned the baseline {before.id}" if before else "no baseline was pinned")
            return 0
        if args.ref is None:
            found = store.baseline()
            if found is None:
                print("no baseline is pinned: pin one with judge runs baseline REF")
            else:
                print(describe(store.check(found)))
            return 0
        pinned = store.set_baseline(args.ref)
    assert pinned is not None  # a REF that names no run raised RunNotFound
    print(f"pinned run {pinned.id} as the baseline")
    return 0
