"""Every command's --help says what it does; eval's names the input columns and --out's default."""

from __future__ import annotations

import pytest

from judge.cli.main import build_parser

COMMANDS = [
    "ir",
    "eval",
    "experiment",
    "merge",
    "demo",
    "compare",
    "agreement",
    "probe",
    "metrics",
    "cache",
]


@pytest.mark.parametrize("command", [*COMMANDS, "testset", "view", "runs", "traces"])
def test_each_command_has_a_description_line(command: str) -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    page = sub.choices[command]  # type: ignore[index]
    assert page.description, f"judge {command} --help has no description"
    assert page.description.strip().split()[0][0].isupper()


def test_eval_help_lists_the_input_columns_and_the_default_out() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = sub.choices["eval"].format_help()  # type: ignore[index]
    for column in ("question", "answer", "contexts", "ground_truth", "retrieved_ids", "relevance"):
        assert column in text, column
    assert "default: judge-results" in " ".join(text.split())
