"""docs/reference/metrics.md names every metric and every NaN reason the code can produce.

The reasons are read from the source with `ast`, not from a list kept by hand: every reason
given to a `MetricScore` (a string, or a module constant naming one) in the metric and run
modules, and every string (or module constant) put into a row's `reasons` by the run code.
A new reason, or a new metric in the registry, fails this test until the page documents it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from judge.ir.measure_names import valid_names
from judge.metrics.registry import BUILTIN

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "metrics.md"
# Where MetricScore is made with a reason.
SCORING_MODULES = [
    "judge/metrics/registry.py",
    "judge/metrics/custom.py",
    "judge/run/score.py",
]
# Where rows get reasons of their own (unreadable rows, retrieval rows without judgments).
ROW_MODULES = ["judge/run/local.py"]


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level NAME = "text" assignments."""
    found = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def _parse(relative: str) -> ast.Module:
    return ast.parse((ROOT / relative).read_text(encoding="utf-8"))


def scorer_reasons() -> set[str]:
    """Every reason string passed to MetricScore (second argument or reason=)."""
    trees = [_parse(m) for m in SCORING_MODULES]
    constants: dict[str, str] = {}
    for tree in trees:
        constants.update(_constants(tree))
    reasons = set()
    for tree in trees:
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "MetricScore"
            ):
                continue
            given = node.args[1:2] + [k.value for k in node.keywords if k.arg == "reason"]
            for arg in given:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    reasons.add(arg.value)
                elif isinstance(arg, ast.Name) and arg.id in constants:
                    reasons.add(constants[arg.id])
                elif isinstance(arg, ast.Name):
                    continue  # a variable: a custom scorer's own reason, passed through
                else:
                    raise AssertionError(f"a reason this test cannot read: {ast.dump(arg)}")
    return reasons


def row_reasons() -> set[str]:
    """Strings the run code assigns into a row's reasons (`x.reasons = ...`,
    `x.reasons[k] = ...`)."""
    reasons = set()
    for module in ROW_MODULES:
        tree = _parse(module)
        constants = _constants(tree)  # a reason may be a module constant naming it
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign):
                continue
            targets = [t.value if isinstance(t, ast.Subscript) else t for t in node.targets]
            if not any(isinstance(t, ast.Attribute) and t.attr == "reasons" for t in targets):
                continue
            for leaf in ast.walk(node.value):
                if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str):
                    reasons.add(leaf.value)
                elif isinstance(leaf, ast.Name) and leaf.id in constants:
                    reasons.add(constants[leaf.id])
    return reasons


def all_reasons() -> set[str]:
    return scorer_reasons() | row_reasons()


def test_the_reasons_are_found() -> None:
    # The extraction itself: a refactor that hides the reasons from it must fail here,
    # not pass with an empty set.
    found = all_reasons()
    for known in ("empty_answer", "no_contexts", "no_claims", "judge_error", "row_error"):
        assert known in found, found
    assert "no_relevance_judgments" in found


@pytest.mark.parametrize("reason", sorted(all_reasons()))
def test_every_nan_reason_is_documented(reason: str) -> None:
    assert f"`{reason}`" in PAGE.read_text(encoding="utf-8"), (
        f"NaN reason {reason!r} is produced by the code but missing from {PAGE}"
    )


@pytest.mark.parametrize("name", [*BUILTIN, "context_ndcg@k", *valid_names()])
def test_every_metric_is_documented(name: str) -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert f"`{name}`" in text, f"metric {name!r} is missing from {PAGE}"


@pytest.mark.parametrize("name", list(BUILTIN))
def test_every_llm_metric_has_its_section(name: str) -> None:
    # A heading per metric, so other pages link ../reference/metrics.md#<name>.
    assert f"\n### {name}\n" in PAGE.read_text(encoding="utf-8")


def test_every_tool_call_metric_and_reason_is_documented() -> None:
    from judge.metrics.tools import REASONS, TOOL_METRICS
    from judge.run.local import INVALID_TOOL_CALLS

    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("\n## Tool-call metrics\n") :]
    for name in [*TOOL_METRICS, *REASONS, INVALID_TOOL_CALLS]:
        assert f"`{name}`" in section, f"{name!r} is missing from the tool-call metrics of {PAGE}"


def test_every_hops_reason_is_in_the_agents_guide() -> None:
    from judge.traces.hops import REASONS

    guide = (ROOT / "docs" / "guides" / "agents.md").read_text(encoding="utf-8")
    for reason in REASONS:
        assert f"| `{reason}` |" in guide, f"{reason!r} is missing from the agents guide"
