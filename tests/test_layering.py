"""The package layering of CONTRIBUTING.md's Layout section, held by walking imports with ast.

Imports inside ``if TYPE_CHECKING:`` blocks are skipped by the layer check: they are not
executed, and annotating with a higher package's type is not a dependency on it. The circle
check counts them: two modules naming each other's types are one job split in two, and a
circle hidden behind ``TYPE_CHECKING`` becomes an import error the day one of its imports is
needed at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import judge

ROOT = Path(judge.__file__).parent

# Lowest first. A module may import its own package and any package in a lower layer;
# packages in one layer do not import each other. Top-level modules count as packages.
LAYERS: list[set[str]] = [
    {"errors", "json_values", "version"},
    {
        "aio",
        "formatting",
        "threads",
        "fields",
        "spreadsheet",
        "samples",
        "signals",
        "lines",
        "locks",
    },
    {"stats", "conversations"},
    {"cache"},
    {"llm"},
    {"ir"},
    {"metrics"},
    {"runs"},  # the run store: `judge.run.folder` records runs in it
    {"run"},
    {"ray"},  # judge eval --ray's executor, which `judge monitor --ray` hands batches to
    {"comparison", "labels", "testset", "experiments", "traces"},
    {"monitor"},  # `judge monitor` reads traces as `judge.traces` does
    {"probes", "view", "annotate"},
    {"testing"},
    {"cli"},
    {"pytest_plugin"},
    {"__init__", "__main__"},
]
RANK = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def walked_nodes(tree: ast.AST, *, type_checking: bool) -> list[ast.AST]:
    """Every node, those under an ``if TYPE_CHECKING:`` block only when `type_checking`."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        found.append(node)
        for child in ast.iter_child_nodes(node):
            if not type_checking and isinstance(child, ast.If) and is_type_checking(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)
    return found


def imported_modules(
    name: str, package: str, source: str, modules: set[str], *, type_checking: bool = False
) -> set[str]:
    """The judge modules one module imports, at module level or inside functions, and with
    `type_checking` also those imported for type checkers alone."""
    targets: set[str] = set()
    for node in walked_nodes(ast.parse(source), type_checking=type_checking):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            submodules = {f"{base}.{alias.name}" for alias in node.names}
            found = submodules & modules
            targets.update(found)
            if len(found) < len(submodules):
                targets.add(base)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            targets.add(node.args[0].value)
    resolved = set()
    for target in targets:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def import_graph(*, type_checking: bool = False) -> dict[str, set[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    graph = {}
    for path in paths:
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        source = path.read_text("utf-8")
        graph[name] = imported_modules(name, package, source, modules, type_checking=type_checking)
    return graph


def package_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_package_has_a_layer() -> None:
    packages = {package_of(module) for module in import_graph()}
    assert packages - RANK.keys() == set(), "add the new package to LAYERS and CONTRIBUTING.md"


def test_the_contributing_layout_names_every_package() -> None:
    guide = (ROOT.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    layout = guide[guide.index("## Layout\n") + 1 :]
    layout = layout[: layout.index("\n## ")] if "\n## " in layout else layout
    named = {
        package
        for package in RANK
        if f"`judge/{package}/`" in layout
        or f"`{package}.py`" in layout
        or f"`judge/{package}.py`" in layout
    }
    assert set(RANK) - named - {"__main__"} == set()


def test_no_module_imports_a_circle() -> None:
    assert cycles(import_graph()) == []


def test_no_circle_hides_behind_type_checking() -> None:
    assert cycles(import_graph(type_checking=True)) == []


def test_no_arrow_runs_up_or_across_a_layer() -> None:
    wrong = []
    for module, targets in import_graph().items():
        source = package_of(module)
        for target in targets:
            goal = package_of(target)
            if goal != source and RANK[goal] >= RANK[source] and goal != "__init__":
                wrong.append(f"{module} -> {target}")
            if goal == "__init__" and source != "__init__":
                wrong.append(f"{module} -> {target}")
    assert sorted(wrong) == []


def test_the_walker_sees_imports_inside_functions_and_skips_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from judge.cli import main\n"
        "def f():\n    from judge.run import score\n"
        "import judge.llm.transport\n"
        "from .. import errors\n"
        "from ..ir import trec\n"
    )
    modules = {
        "judge",
        "judge.cli",
        "judge.cli.main",
        "judge.run",
        "judge.run.score",
        "judge.llm",
        "judge.llm.transport",
        "judge.errors",
        "judge.ir",
        "judge.ir.trec",
        "judge.metrics.custom",
    }
    found = imported_modules("judge.metrics.custom", "judge.metrics", source, modules)
    assert found == {"judge.run.score", "judge.llm.transport", "judge.errors", "judge.ir.trec"}
    typed = imported_modules(
        "judge.metrics.custom", "judge.metrics", source, modules, type_checking=True
    )
    assert typed == found | {"judge.cli.main"}


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
