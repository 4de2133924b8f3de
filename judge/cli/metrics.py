"""`judge metrics`: every metric judge can compute (built-in, plugin, custom, retrieval)."""

from __future__ import annotations

import argparse

from judge.cli.options import module_option


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the metrics subcommand."""
    m = sub.add_parser(
        "metrics",
        help="list the metrics: built-in, retrieval, tool calls, plugins and custom",
        description="List every metric judge can compute: the built-in LLM-judged ones, "
        "the retrieval ones (parameterised as ndcg@10), the tool-call ones, installed plugins "
        "and the metrics "
        "of --metrics-module, each with its definition.",
    )
    module_option(m)
    m.set_defaults(func=run_metrics)


def run_metrics(args: argparse.Namespace) -> int:
    """The `judge metrics` command: every metric judge can compute, side by side."""
    from judge.ir.measure_names import FAMILIES
    from judge.metrics.plugins import extra_metrics
    from judge.metrics.registry import BUILTIN
    from judge.metrics.tools import DESCRIPTIONS

    rows = [(m.name, "LLM-judged", m.higher_is_better, m.description) for m in BUILTIN.values()]
    extra = extra_metrics(args.metrics_module).values()
    rows += [
        (
            x.metric.name,
            f"plugin {x.distribution}" if x.kind == "plugin" else f"custom ({x.metric.version})",
            x.metric.higher_is_better,
            x.metric.description,
        )
        for x in extra
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
    rows += [(name, "tool calls", True, text) for name, text in DESCRIPTIONS.items()]
    for name, kind, up, description in rows:
        print(f"{name:<22} {kind:<24} {'higher' if up else 'lower':<7} {description}")
    return 0
