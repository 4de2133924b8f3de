"""The library writes what the CLI writes: `EvaluationResult.write` gives a Python user the
folder `judge eval` writes, byte for byte (timings aside), and the same verdict."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import judge
from judge.cli.options import DEFAULT_MAX_ERROR_RATE as CLI_DEFAULT
from judge.errors import JudgeError, OutputError
from judge.run.gates import DEFAULT_MAX_ERROR_RATE, INCOMPLETE, PASSED, THRESHOLD_MISSED
from judge.run.outputs import RunOutcome
from judge.testing import heuristic_judge


def rows(n: int) -> list[dict]:
    out: list[dict] = [
        {
            "id": f"s{i}",
            "question": f"Who made tool {i}?",
            "answer": f"Ann made tool {i}." + (" It is fast." if i % 2 else ""),
            "contexts": [f"Tool {i} was made by Ann."],
            "ground_truth": f"Ann made tool {i}.",
            "retrieved_ids": [f"d{i}", "d0"],
            "relevance": [f"d{i}"],
        }
        for i in range(n)
    ]
    out[3] = {"answer": "no question"}  # unreadable, within max_error_rate 0.5
    return out


def timeless(text: str) -> str:
    """A file with its run's timings (config.seconds) taken out."""
    return re.sub(r"(&quot;|\")seconds\1: [0-9.]+", "SECONDS", text)


def test_python_writes_the_folder_judge_eval_writes(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    url = fake_llm_server.base_url
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows(8)), encoding="utf-8")
    metrics = ["faithfulness", "context_recall", "ndcg@10"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "judge",
            "eval",
            str(data),
            "--model",
            "openai/judge",
            "--api-base",
            url,
            "--api-key",
            "k",
            "--metrics",
            ",".join(metrics),
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--out",
            str(tmp_path / "cli"),
            "--no-progress",
            "--fail-under",
            "faithfulness=0.1",
            "--max-error-rate",
            "0.5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # The same run from Python, on a cache of its own: the same requests, the same usage.
    result = judge.evaluate(
        data,
        metrics=metrics,
        llm=judge.LLM("openai/judge", api_base=url, api_key="k"),
        cache=tmp_path / "py.sqlite",
        progress=False,
    )
    outcome = result.write(tmp_path / "py", fail_under={"faithfulness": 0.1}, max_error_rate=0.5)
    assert isinstance(outcome, RunOutcome) and outcome.passed and outcome.code == PASSED
    assert outcome.notes and "row 3: " in outcome.notes[0]  # the unreadable row, named
    for name in ("results.jsonl", "summary.json", "report.html"):
        cli = (tmp_path / "cli" / name).read_text(encoding="utf-8")
        py = (tmp_path / "py" / name).read_text(encoding="utf-8")
        py = py.replace(str(tmp_path / "py.sqlite"), str(tmp_path / "c.sqlite"))
        assert timeless(py) == timeless(cli), name
    assert json.loads((tmp_path / "py" / "summary.json").read_text())["thresholds"] == {
        "required": {"faithfulness": 0.1},
        "gates": ["faithfulness>=0.1"],
        "missed": [],
    }


def test_the_outcome_says_what_failed(tmp_path):
    retrieval = [
        {"question": f"q{i}", "retrieved_ids": ["a", "b"], "relevance": ["b"]} for i in range(4)
    ]
    result = judge.evaluate(retrieval, metrics=["mrr"], progress=False)
    missed = result.write(tmp_path / "a", fail_under={"mrr": 0.9})
    assert missed.code == THRESHOLD_MISSED and missed.missed == ("mrr = 0.5000 < 0.9",)
    bad = judge.evaluate([*retrieval, {"answer": "x"}], metrics=["mrr"], progress=False)
    incomplete = bad.write(tmp_path / "b", fail_under={"mrr": 0.9})
    assert incomplete.code == INCOMPLETE  # wins over the missed threshold
    assert [what for what, _ in incomplete.failures] == ["unreadable rows"]
    assert "max_error_rate 0.05" in incomplete.failures[0][1]  # Python's words
    with pytest.raises(JudgeError, match="a gate names recall, which the run does not compute"):
        result.write(tmp_path / "c", fail_under={"recall": 0.5})
    with pytest.raises(JudgeError, match="max_error_rate 2: give a share from 0 to 1"):
        result.write(tmp_path / "c", max_error_rate=2)
    assert not (tmp_path / "c").exists()  # refused before anything was written


def test_the_cli_default_error_rate_is_the_librarys():
    assert CLI_DEFAULT == DEFAULT_MAX_ERROR_RATE


def test_written_rows_read_back_from_the_published_file(tmp_path):
    result = judge.evaluate(
        [{"question": "q", "retrieved_ids": ["a"], "relevance": ["a"]}],
        metrics=["mrr"],
        progress=False,
    )
    result.write(tmp_path / "out")
    assert Path(tmp_path / "out" / "results.jsonl").is_file()
    assert result.rows[0].scores == {"mrr": 1.0}


def test_write_never_replaces_the_data_file(tmp_path):
    data = tmp_path / "results.jsonl"
    row = {"question": "a", "retrieved_ids": ["d1"], "relevance": {"d1": 1}}
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    before = data.read_bytes()
    result = judge.evaluate(data, metrics=["mrr"], progress=False)
    with pytest.raises(OutputError, match="another folder"):
        result.write(tmp_path)
    assert data.read_bytes() == before
    assert result.write(tmp_path / "out").passed
