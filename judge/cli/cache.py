"""`judge cache export|import|stats|merge|verify|repair`: managing judgment cache files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from judge.errors import JudgeError
from judge.formatting import counted, terminal_text


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the cache subcommand."""
    c = sub.add_parser(
        "cache",
        help="export, import, inspect, merge, verify or repair judgment caches",
        description="Work on judgment caches (SQLite files of readable JSON): export them "
        "to JSONL and import them back, count their entries, merge files, verify them and "
        "repair a damaged one. See `judge cache ACTION --help`.",
    )
    actions = c.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, about in (
        ("export", "write every entry to a sorted JSONL file"),
        ("import", "add the entries of a JSONL export"),
        ("stats", "count the entries by kind, server and prompt"),
    ):
        a = actions.add_parser(action, help=about, description=about)
        a.add_argument("cache", help="the SQLite cache file")
        if action != "stats":
            a.add_argument(
                "file", nargs="?", help="the JSONL file to write (export) or read (import)"
            )
        if action == "export":
            a.add_argument(
                "--reproducible",
                action="store_true",
                help="write each entry's recording time (created) as 0, so the same "
                "judgments recorded again export to the same bytes (for files kept in git)",
            )
        a.set_defaults(func=run_cache, file=None, reproducible=False)
    merge = actions.add_parser(
        "merge",
        help="merge caches (of shards, of machines) into a new one",
        description="Merge caches into a new file -o. A key held by two caches must hold "
        "the same response, else nothing is written and the error names the key.",
    )
    merge.add_argument("caches", nargs="+", metavar="CACHE", help="a cache file to merge")
    merge.add_argument("-o", "--output", required=True, help="the merged cache (a new file)")
    merge.set_defaults(func=run_merge)
    verify = actions.add_parser(
        "verify",
        help="check a cache: SQLite's integrity check and every entry's checksums",
        description="Check a cache file: SQLite's integrity check and the checksums of every "
        "entry. Exit 0 when nothing is damaged, 2 when something is (one line per kind).",
    )
    verify.add_argument("cache", help="the SQLite cache file")
    verify.set_defaults(func=run_verify)
    repair = actions.add_parser(
        "repair",
        help="drop the damaged entries of a cache (a read-write run asks for them again)",
        description="Drop every damaged entry of a cache file (and rebuild the file when "
        "SQLite finds its pages damaged); a read-write run asks for them again.",
    )
    repair.add_argument("cache", help="the SQLite cache file")
    repair.set_defaults(func=run_repair)


def run_verify(args: argparse.Namespace) -> int:
    """The `judge cache verify` command: 0 when clean, 2 when anything is damaged."""
    from judge.cache.integrity import verify_file
    from judge.cache.migrations import SCHEMA_VERSION

    if not Path(args.cache).is_file():
        raise JudgeError(f"{args.cache}: no such cache file")
    found = verify_file(args.cache)  # read-only: an older format is not upgraded
    if found.format < SCHEMA_VERSION:
        entries = counted(found.entries, "entry", "entries")
        shown = entries if found.counted else "entries not countable"
        print(
            terminal_text(
                f"{args.cache}: cache format {found.format}, {shown}; per-entry "
                f"checksums exist only from format {SCHEMA_VERSION} (opening it with judge "
                "upgrades it and adds them), so only SQLite's integrity check was made"
            )
        )
    else:
        print(
            terminal_text(
                f"{args.cache}: {counted(found.entries, 'entry', 'entries')}, "
                f"{found.damaged_count} damaged"
            )
        )
    for kind, rowids in sorted(found.damaged.items()):
        print(terminal_text(f"  {len(rowids)} {kind}"))
    if found.integrity:
        more = f" (and {len(found.integrity) - 1} more)" if len(found.integrity) > 1 else ""
        print(terminal_text(f"  SQLite integrity check: {found.integrity[0]}{more}"))
    if found.clean:
        return 0
    print(
        terminal_text(
            f"drop them with `judge cache repair {args.cache}` (it keeps every entry still "
            "readable); a read-write run asks for them again"
        )
    )
    return 2


def run_repair(args: argparse.Namespace) -> int:
    """The `judge cache repair` command."""
    from judge.cache.repair import repair_file

    if not Path(args.cache).is_file():
        raise JudgeError(f"{args.cache}: no such cache file")
    dropped, kept = repair_file(args.cache)  # an older format is rebuilt in the current one
    if dropped is None:  # an older file whose table SQLite could not count
        print(
            terminal_text(f"{args.cache}: dropped every unreadable or damaged entry, {kept} kept")
        )
    else:
        print(
            terminal_text(
                f"{args.cache}: dropped {counted(dropped, 'damaged entry', 'damaged entries')}, "
                f"{kept} kept"
            )
        )
    return 0


def run_merge(args: argparse.Namespace) -> int:
    """The `judge cache merge` command."""
    from judge.cache.merge import merge_caches

    written, skipped = merge_caches(args.caches, args.output)
    print(
        terminal_text(
            f"merged {counted(len(args.caches), 'cache')} into {args.output}: "
            f"{counted(written, 'entry', 'entries')}"
            f"{f' ({skipped} held by more than one, identical)' if skipped else ''}"
        )
    )
    return 0


def run_cache(args: argparse.Namespace) -> int:
    """The `judge cache` command."""
    from judge.cache.store import Cache

    if args.action != "stats" and not args.file:
        raise JudgeError(f"judge cache {args.action} needs a JSONL file argument")
    if args.action == "import" and not Path(args.file).is_file():
        raise JudgeError(f"{args.file}: no such file")
    with Cache(args.cache) as cache:
        if args.action == "export":
            exported = cache.export_jsonl(args.file, reproducible=args.reproducible)
            print(terminal_text(f"exported {counted(exported, 'entry', 'entries')} to {args.file}"))
        elif args.action == "import":
            imported = cache.import_jsonl(args.file)
            print(
                terminal_text(f"imported {counted(imported, 'entry', 'entries')} into {args.cache}")
            )
        else:
            stats: dict[str, Any] = {"entries": len(cache), "by_kind": {}, "by_prompt": {}}
            stats["by_server"] = {}  # the names --cache-as takes
            for entry in cache.entries():
                stats["by_kind"][entry.kind] = stats["by_kind"].get(entry.kind, 0) + 1
                server = str(entry.request.get("server"))
                stats["by_server"][server] = stats["by_server"].get(server, 0) + 1
                label = f"{entry.prompt or entry.kind}@{entry.prompt_version or '-'}"
                stats["by_prompt"][label] = stats["by_prompt"].get(label, 0) + 1
            print(json.dumps(stats, indent=2))
    return 0
