"""The documentation site builds in strict mode, every code block of the README and the docs
is run or says why not (tests/helpers/docs.py runs them), and the CLI reference is made
from the parsers."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from judge.cli.main import build_parser
from judge.cli.reference import PLACEHOLDER, cli_markdown
from tests.helpers.docs import (
    PARSED_LANGUAGES,
    RUN_LANGUAGES,
    SHOWN_LANGUAGES,
    doc_files,
    fence_languages,
)

ROOT = Path(__file__).resolve().parents[1]
ZENSICAL = Path(sys.executable).parent / "zensical"
ABSOLUTE_PATH = re.compile(r"(?<![\w:/.~-])/(?:data|tmp|home|Users|var|etc|opt|mnt|srv|root)\b")


def build_site(config_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ZENSICAL), "build", "--strict", "--clean"],
        cwd=config_dir,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )


def copy_site_sources(to: Path) -> None:
    shutil.copytree(ROOT / "docs", to / "docs")
    shutil.copy(ROOT / "mkdocs.yml", to / "mkdocs.yml")
    (to / "judge").symlink_to(ROOT / "judge")  # mkdocstrings reads the package's sources


def test_the_site_builds_in_strict_mode(tmp_path):
    copy_site_sources(tmp_path)
    built = build_site(tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    cli = (tmp_path / "site/reference/cli/index.html").read_text()
    assert "judge eval" in cli and "--fail-under" in cli and PLACEHOLDER not in cli
    api = (tmp_path / "site/reference/python-api/index.html").read_text()
    assert "aevaluate" in api and "EvaluationResult" in api


def test_a_broken_link_fails_the_strict_build(tmp_path):
    copy_site_sources(tmp_path)
    page = tmp_path / "docs/get-started.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md#nothing).\n")
    built = build_site(tmp_path)
    assert built.returncode != 0
    said = re.sub(r"\x1b\[[0-9;]*m", "", built.stdout + built.stderr)  # colour, even so
    assert "page does not exist" in said and "get-started.md:" in said


TEST_COMMAND_BLOCK = re.compile(
    r'<!-- skip: next "this is the test command itself \(\.ci/run\)" -->\n```sh\n(.*?)\n```'
)


def shown_test_command(text: str) -> list[str]:
    """The test command blocks of a Markdown text (each marked as `.ci/run`'s command)."""
    return TEST_COMMAND_BLOCK.findall(text)


def test_the_shown_test_command_is_the_one_ci_runs():
    """README.md, README.zh-CN.md and CONTRIBUTING.md say they show `.ci/run`'s command."""
    ci = (ROOT / ".ci/run").read_text().strip().splitlines()[-1]
    for name in ("README.md", "README.zh-CN.md", "CONTRIBUTING.md"):
        assert shown_test_command((ROOT / name).read_text()) == [ci], name


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if f": {p}" not in nav] == []


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_runs_or_is_data(path):
    known = RUN_LANGUAGES | PARSED_LANGUAGES | SHOWN_LANGUAGES
    fences = fence_languages(path.read_text())
    unknown = [(line, lang) for line, lang in fences if lang not in known]
    assert unknown == [], f"give each block one of {sorted(known)} (line, language)"


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_example_names_an_absolute_path(path):
    """Examples write into the reader's current directory, never to /data or /tmp."""
    hits = [m.group(0) for m in ABSOLUTE_PATH.finditer(path.read_text())]
    assert hits == []


def test_fence_languages_reads_nested_fences():
    text = "```sh\na\n```\n\n````text\n```python\nx\n```\n````\n~~~json\n{}\n~~~\n"
    assert fence_languages(text) == [(1, "sh"), (5, "text"), (10, "json")]


def all_options(parser: argparse.ArgumentParser) -> set[str]:
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= all_options(sub)
        elif action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
            found.update(action.option_strings)
    return found


def test_the_cli_reference_names_every_command_and_option():
    text = cli_markdown()
    parser = build_parser()
    missing = [o for o in sorted(all_options(parser)) if f"`{o}" not in text]
    assert missing == []
    for command in ("ir", "eval", "merge", "demo", "compare", "agreement", "probe", "metrics"):
        assert f"### `judge {command}`" in text
    assert "#### `judge cache verify`" in text and "#### `judge testset build`" in text


def test_the_cli_reference_keeps_table_cells_whole():
    parser = argparse.ArgumentParser(prog="x", description="d")
    parser.add_argument("--pipe", default="a", help="one | two <b>")
    text = cli_markdown(parser)
    assert "| `--pipe PIPE` | `a` | one \\| two &lt;b> |" in text
