"""The pytest plugin judges with a prompt set (`--judge-prompts DIR`, or `judge_prompts` in
the ini options), as `judge eval --prompts` does: the set's prompts are the ones sent, and
the report records their versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.metrics.prompts import load_prompt, load_prompt_set
from judge.testing import FakeLLMServer
from tests.helpers.prompt_sets import MARK, edited_verify, verify_systems
from tests.helpers.pytester import FAITHFUL, judge_args, judging, load_judged_modules

load_judged_modules()  # before any pytester run (tests/helpers/pytester.py)


@pytest.fixture
def server(fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    return judging(fake_llm_server, monkeypatch)


@pytest.mark.parametrize("given", ["flag", "ini"])
def test_the_plugin_judges_with_the_prompt_set(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path, given: str
):
    pytester.makepyfile(test_rag="import judge\n" + FAITHFUL)
    folder = edited_verify(pytester.path / "aligned" / "prompts")
    args = [*judge_args(server, tmp_path / "cache.sqlite"), "--judge-report", str(tmp_path / "r")]
    if given == "flag":
        args += ["--judge-prompts", str(folder)]
    else:
        pytester.makeini("[pytest]\njudge_prompts = aligned/prompts\n")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    systems = verify_systems(server)
    assert systems and all(MARK in s for s in systems)
    config = json.loads((tmp_path / "r" / "summary.json").read_text())["config"]
    assert config["prompts"]["verify"] == load_prompt_set(folder)["verify"].version
    assert config["prompts"]["verify"] != load_prompt("verify").version
