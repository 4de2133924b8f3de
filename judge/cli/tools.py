"""`judge metrics` and `judge cache`: listing the metrics, managing judgment caches."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from judge.cli.eval import module_option
from judge.errors import JudgeError


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the metrics and cache subcommands."""
    m = sub.add_parser("metrics", help="list the metrics: built-in, retrieval and custom")
    module_option(m)
    m.set_defaults(func=run_metrics)

    c = sub.add_parser("cache", help="export, import or inspect a judgment cache")
    c.add_argument("action", choices=["export", "import", "stats"])
    c.add_argument("cache", help="the SQLite cache file")
    c.add_argument("file", nargs="?", help="the JSONL file to write (export) or read (import)")
    c.set_defaults(func=run_cache)


def run_metrics(args: argparse.Namespace) -> int:
    """The `judge metrics` command: every metric judge can compute, side by side."""
    from judge.ir.measures import FAMILIES
    from judge.metrics.custom import load_metric_modules
    from judge.metrics.registry import BUILTIN

    rows = [(m.name, "LLM-judged", m.higher_is_better, m.description) for m in BUILTIN.values()]
    rows += [
        (m.name, f"custom ({m.version})", m.higher_is_better, m.description)
        for m in load_metric_modules(args.metrics_module).values()
    ]
    rows += [
        (
            f"{f}@k" if c == "required" else f"{f}[@k]" if c == "optional" else f,
            "retrieval",
            True,
            d,
        )
        for f, (c, d) in FAMILIES.items()
    ]
    for name, kind, up, description in rows:
        print(f"{name:<22} {kind:<24} {'higher' if up else 'lower':<7} {description}")
    return 0


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
            for entry in cache.entries():
                stats["by_kind"][entry.kind] = stats["by_kind"].get(entry.kind, 0) + 1
                label = f"{entry.prompt or entry.kind}@{entry.prompt_version or '-'}"
                stats["by_prompt"][label] = stats["by_prompt"].get(label, 0) + 1
            print(json.dumps(stats, indent=2))
    return 0
