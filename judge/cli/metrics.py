"""`judge metrics`: every metric judge can compute (built-in, custom, retrieval), side by side."""

from __future__ import annotations

import argparse

from judge.cli.eval import module_option


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the metrics subcommand."""
    m = sub.add_parser("metrics", help="list the metrics: built-in, retrieval and custom")
    module_option(m)
    m.set_defaults(func=run_metrics)


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
