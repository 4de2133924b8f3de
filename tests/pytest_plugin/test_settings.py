"""The plugin's settings through the resolver the command line uses (flags > JUDGE_* >
ini options > [tool.judge] > judge.LLM's defaults), and its report's config derived as
`judge eval`'s is: the same settings give the same run fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.llm.config import LLM
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.pytester import load_judged_modules

load_judged_modules()  # before any pytester run (tests/helpers/pytester.py)

SHOW = """
def test_show(rag_judge):
    print("SETTINGS", rag_judge.llm.model, rag_judge.llm.max_concurrency)
"""


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("JUDGE_MODEL", "JUDGE_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return monkeypatch


def shown(pytester: pytest.Pytester, *flags: str) -> str:
    result = pytester.runpytest("-s", "-p", "no:randomly", *flags)
    result.assert_outcomes(passed=1)
    line = next(x for x in result.outlines if "SETTINGS " in x)
    return line.split("SETTINGS ", 1)[1]


def test_model_and_concurrency_each_level_overriding_the_one_below(
    pytester: pytest.Pytester, clean_env: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_show=SHOW)
    default = LLM("openai/x").max_concurrency
    pytester.makepyprojecttoml('[tool.judge]\nmodel = "openai/from-file"\n')
    assert shown(pytester) == f"openai/from-file {default}"
    pytester.makepyprojecttoml('[tool.judge]\nmodel = "openai/from-file"\nconcurrency = 3\n')
    assert shown(pytester) == "openai/from-file 3"
    pytester.makeini("[pytest]\njudge_model = openai/from-ini\njudge_concurrency = 4\n")
    assert shown(pytester) == "openai/from-ini 4"
    clean_env.setenv("JUDGE_MODEL", "openai/from-env")
    clean_env.setenv("JUDGE_CONCURRENCY", "5")
    assert shown(pytester) == "openai/from-env 5"
    flags = ("--judge-model", "openai/from-flag", "--judge-concurrency", "7")
    assert shown(pytester, *flags) == "openai/from-flag 7"


JUDGED = """
def test_judged(rag_judge):
    rag_judge.score(
        "Who created Python?",
        "Guido van Rossum created Python.",
        ["Python was created by Guido van Rossum."],
        metrics=["faithfulness", "context_precision"],
        sample_id="s0",
    )
"""


def test_the_report_has_the_fingerprint_judge_eval_gives_the_same_settings(
    pytester: pytest.Pytester,
    clean_env: pytest.MonkeyPatch,
    fake_llm_server: FakeLLMServer,
    tmp_path: Path,
) -> None:
    fake_llm_server.chat = heuristic_judge
    pytester.makepyfile(test_judged=JUDGED)
    report = tmp_path / "report"
    result = pytester.runpytest(
        "-p",
        "no:randomly",
        "--judge-model",
        "openai/judge",
        "--judge-api-base",
        fake_llm_server.base_url,
        "--judge-cache",
        str(tmp_path / "cache.sqlite"),
        "--judge-report",
        str(report),
    )
    result.assert_outcomes(passed=1)
    data = tmp_path / "data.jsonl"
    sample = {
        "id": "s0",
        "question": "Who created Python?",
        "answer": "Guido van Rossum created Python.",
        "contexts": ["Python was created by Guido van Rossum."],
    }
    data.write_text(json.dumps(sample) + "\n", encoding="utf-8")
    done = run(
        "eval",
        data,
        "--model",
        "openai/judge",
        "--api-base",
        fake_llm_server.base_url,
        "--cache",
        tmp_path / "cache.sqlite",
        "--metrics",
        "faithfulness,context_precision",
        "--out",
        tmp_path / "eval",
        "--no-progress",
        "--no-record",
    )
    assert done.returncode == 0, done.stderr
    ours = json.loads((report / "summary.json").read_text())["config"]
    theirs = json.loads((tmp_path / "eval" / "summary.json").read_text())["config"]
    for key in ("run", "metrics", "model", "embeddings", "prompts", "cache_mode"):
        assert ours[key] == theirs[key], (key, ours, theirs)
