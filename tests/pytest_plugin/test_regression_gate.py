"""The regression gate in a test: parametrised over a test set, judged, and held to a
baseline run (a folder, or the run store's pinned baseline) by a paired test."""

from __future__ import annotations

import json

import pytest

from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.pytester import load_judged_modules

load_judged_modules()  # before any pytester run (tests/helpers/pytester.py)


GOLDEN = [
    {
        "id": f"tower-{n}",
        "question": f"How tall is tower {n}?",
        "answer": f"Tower {n} is tall and old.",
        "contexts": [f"Tower {n} is tall and old.", "The river is wide."],
    }
    for n in range(12)
]

TESTS = """
import os
import judge
import pytest
from judge.pytest_plugin import cases

GOLDEN = "golden.jsonl"
WORSE = int(os.environ.get("WORSE_ROWS", "0"))


@pytest.mark.parametrize("case", cases(GOLDEN))
def test_each_case(rag_judge, case):
    rag_judge.assert_scores(case, faithfulness=0.5)


def test_no_regression(rag_judge):
    rows = [dict(case.values[0]) for case in cases(GOLDEN)]
    for row in rows[:WORSE]:
        row["answer"] = "Bananas are yellow fruit."
    result = rag_judge.evaluate(rows, metrics=["faithfulness"])
    judge.assert_evaluation(result, fail_under={"faithfulness": 0.3})
    judge.assert_no_regression(result, os.environ.get("BASELINE"), alpha=0.05)
"""


@pytest.fixture
def project(
    pytester: pytest.Pytester, fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    fake_llm_server.chat = heuristic_judge
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    (pytester.path / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GOLDEN))
    pytester.makepyfile(test_quality=TESTS)
    pytester.makepyprojecttoml(
        f"""
        [tool.judge]
        model = "openai/judge-model"
        api-base = "{fake_llm_server.base_url}"
        """
    )
    # the baseline: judge eval of the test set, recorded in the run store (JUDGE_RUNS)
    done = run(
        "eval",
        pytester.path / "golden.jsonl",
        "--model",
        "openai/judge-model",
        "--api-base",
        fake_llm_server.base_url,
        "--metrics",
        "faithfulness",
        "--cache",
        pytester.path / ".judge" / "cache.sqlite",
        "--out",
        pytester.path / "baseline",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    return pytester


def test_the_cases_are_named_by_their_ids(project: pytest.Pytester) -> None:
    result = project.runpytest("--collect-only", "-q", "-p", "no:randomly")
    result.stdout.fnmatch_lines(
        [
            "test_quality.py::test_each_case[[]tower-0[]]",
            "test_quality.py::test_each_case[[]tower-11[]]",
        ]
    )


def test_an_equal_run_passes_the_gate_against_a_baseline_folder(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BASELINE", "baseline")
    result = project.runpytest("-p", "no:randomly", "-rP")
    result.assert_outcomes(passed=13)
    result.stdout.fnmatch_lines(
        [
            "judge regression gate: 12 shared questions, alpha 0.05 (Holm across 1 metric), "
            "baseline *baseline*results.jsonl",
            "  faithfulness: 1.000 -> 1.000, Δ +0.000 *",
        ]
    )


def test_a_worse_run_fails_the_gate_against_the_pinned_baseline(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = run("runs", "list", "--json")
    baseline_id = json.loads(listed.stdout)[0]["id"]
    assert run("runs", "baseline", baseline_id).returncode == 0
    monkeypatch.delenv("BASELINE", raising=False)  # None: the store's pinned baseline
    monkeypatch.setenv("WORSE_ROWS", "8")
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=12, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ScoreAssertionError: 1 metric significantly worse than the baseline",
            "*faithfulness: 1.000 -> 0.333, Δ -0.667 [[]*], p_holm 0.00* (significantly worse)",
        ]
    )
