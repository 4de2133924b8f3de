"""The test suite is laid out like the package: each test module at the top level of tests/
or in a folder named after a subpackage of judge/ (each folder a package, so that names
like test_integrity.py can repeat), and no module under tests/ imports a test module:
what tests share lives in tests/helpers/ or in conftest.py."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "judge"


def is_test_module(name: str) -> bool:
    return any(part.startswith("test_") for part in name.split("."))


def imported_test_modules(path: Path) -> list[str]:
    """The test modules that the module at `path` imports, anywhere in it: `import test_x`,
    `from tests.run.test_x import ...`, `from tests.run import test_x`, `from . import
    test_x`."""
    found = []
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if is_test_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if is_test_module(module):
                found.append(module)
            found += [f"{module}.{a.name}" for a in node.names if is_test_module(a.name)]
    return [f"{path.relative_to(TESTS.parent)}:{name}" for name in found]


def test_no_module_under_tests_imports_a_test_module():
    imports = [hit for path in sorted(TESTS.rglob("*.py")) for hit in imported_test_modules(path)]
    assert imports == [], "move what is shared into tests/helpers/ or a conftest.py fixture"


def test_test_modules_sit_at_the_top_or_in_a_folder_named_after_a_subpackage():
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    misplaced = [
        str(path.relative_to(TESTS.parent))
        for path in sorted(TESTS.rglob("test_*.py"))
        if path.parent != TESTS
        and not (path.parent.parent == TESTS and path.parent.name in subpackages)
    ]
    assert misplaced == [], f"a test module's folder is one of {sorted(subpackages)}"
    folders = {path.parent for path in TESTS.rglob("*.py")}
    without_init = sorted(
        str(folder.relative_to(TESTS.parent))
        for folder in folders
        if not (folder / "__init__.py").exists()
    )
    assert without_init == [], "each folder of tests/ needs an __init__.py (unique test ids)"


def test_ci_spreads_the_suite_over_parallel_workers():
    """CI must stay under 10 minutes: `.ci/run`'s pytest runs on pytest-xdist workers (the
    READMEs and CONTRIBUTING.md show the same command: tests/test_docs.py holds them)."""
    ci = (TESTS.parent / ".ci/run").read_text(encoding="utf-8").strip().splitlines()[-1]
    pytest_args = ci.rsplit("&&", 1)[-1].split()
    assert pytest_args[0] == ".venv/bin/pytest" and "-n" in pytest_args
