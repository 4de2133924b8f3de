"""judge.cli.output: --format and --out defined once for ir, compare, agreement and probe,
and the writing and printing of agreement's and probe's results."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from judge.cli.main import build_parser
from judge.cli.options import metrics_of
from judge.cli.output import show


def options(command: str) -> dict[str, argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {s: a for a in sub.choices[command]._actions for s in a.option_strings}


@pytest.mark.parametrize(
    ("command", "files"),
    [
        ("ir", None),
        ("compare", "comparison.json and compare.html"),
        ("agreement", "agreement.json and agreement.html"),
        ("probe", "probe.json and probe.html"),
    ],
)
def test_format_and_out_are_the_shared_ones(command, files):
    found = options(command)
    shown = found["--format"]
    assert (shown.choices, shown.default) == (["text", "json"], "text")
    assert shown.help == options("ir")["--format"].help
    if files is None:
        assert "--out" not in found
    else:
        assert found["--out"].help == f"also write {files} here"


class Result:
    def to_dict(self) -> dict[str, Any]:
        return {"kappa": 0.5, "name": "é"}

    def table(self) -> str:
        return "kappa 0.5"

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict()), "utf-8")


def write_html(result: Result, path: Path) -> None:
    path.write_text(f"<p>{result.table()}</p>", "utf-8")


def test_show_writes_the_folder_then_prints_a_table(tmp_path, capsys):
    out = tmp_path / "new" / "dir"
    show(Result(), argparse.Namespace(out=str(out), format="text"), "probe", write_html)
    assert json.loads((out / "probe.json").read_text("utf-8"))["kappa"] == 0.5
    assert (out / "probe.html").read_text("utf-8") == "<p>kappa 0.5</p>"
    assert capsys.readouterr().out == f"kappa 0.5\n\nwrote {out}/probe.json, probe.html\n"


def test_show_prints_json_and_writes_nothing_without_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    show(Result(), argparse.Namespace(out=None, format="json"), "agreement", write_html)
    printed = capsys.readouterr().out
    assert json.loads(printed) == {"kappa": 0.5, "name": "é"} and "é" in printed
    assert list(tmp_path.iterdir()) == []


def test_ir_and_compare_read_metrics_alike():
    for command in ("ir", "compare"):
        metric = options(command)["-m"]
        assert (metric.option_strings, metric.dest, metric.metavar) == (
            ["-m", "--metric"],
            "metrics",
            "METRIC",
        )
    parser = build_parser()
    for command in (["ir", "q", "r"], ["compare", "a", "b"]):
        args = parser.parse_args([*command, "-m", "ndcg@10,P@5", "-m", "mrr,", "--metric", "map"])
        assert metrics_of(args) == ["ndcg@10", "P@5", "mrr", "map"]
        assert metrics_of(parser.parse_args(command)) == []


def test_a_folder_given_with_a_trailing_slash_is_printed_with_one(tmp_path, capsys):
    out = tmp_path / "agreement"
    show(Result(), argparse.Namespace(out=f"{out}/", format="text"), "agreement", write_html)
    printed = capsys.readouterr().out
    assert printed == f"kappa 0.5\n\nwrote {out}/agreement.json, agreement.html\n"
    assert "//" not in printed
