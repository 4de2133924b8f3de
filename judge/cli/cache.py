"""`judge cache export|import|stats`: managing a judgment cache file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from judge.errors import JudgeError


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the cache subcommand."""
    c = sub.add_parser("cache", help="export, import or inspect a judgment cache")
    c.add_argument("action", choices=["export", "import", "stats"])
    c.add_argument("cache", help="the SQLite cache file")
    c.add_argument("file", nargs="?", help="the JSONL file to write (export) or read (import)")
    c.set_defaults(func=run_cache)


def run_cache(args: argparse.Namespace) -> int:
    """The `judge cache` command."""
    from judge.llm.cache import Cache

    if args.action != "stats" and not args.file:
        raise JudgeError(f"judge cache {args.action} needs a JSONL file argument")
    if args.action == "import" and not Path(args.file).is_file():
        raise JudgeError(f"{args.file}: no such file")
    with Cache(args.cache) as cache:
        if args.action == "export":
            print(f"exported {cache.export_jsonl(args.file)} entries to {args.file}")
        elif args.action == "import":
            print(f"imported {cache.import_jsonl(args.file)} entries into {args.cache}")
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
