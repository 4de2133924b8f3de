"""The command line's judge settings, read once (`judge.cli.options.judge_options`) by the
one resolver the plugin uses too: flags > JUDGE_* > ./pyproject.toml [tool.judge] >
judge.LLM's defaults."""

from __future__ import annotations

import json

import pytest

from judge.cli.main import build_parser
from judge.cli.options import judge_options
from judge.llm.config import LLM
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import dataset, run


def options(*flags: str):
    args = build_parser().parse_args(["eval", "data.jsonl", *flags])
    return judge_options(args)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("JUDGE_MODEL", "JUDGE_CONCURRENCY", "JUDGE_API_BASE", "JUDGE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_model_and_concurrency_each_level_overriding_the_one_below(project, monkeypatch):
    default = options().settings
    assert default.model is None
    assert default.concurrency == LLM("openai/x").max_concurrency
    (project / "pyproject.toml").write_text(
        '[tool.judge]\nmodel = "openai/from-file"\nconcurrency = 3\n', encoding="utf-8"
    )
    assert (options().settings.model, options().settings.concurrency) == ("openai/from-file", 3)
    monkeypatch.setenv("JUDGE_MODEL", "openai/from-env")
    monkeypatch.setenv("JUDGE_CONCURRENCY", "5")
    assert (options().settings.model, options().settings.concurrency) == ("openai/from-env", 5)
    given = options("--model", "openai/from-flag", "--concurrency", "7").settings
    assert (given.model, given.concurrency) == ("openai/from-flag", 7)
    llm, _ = options("--concurrency", "7").models()
    assert llm is not None and (llm.model, llm.max_concurrency) == ("openai/from-env", 7)


def test_parsing_leaves_the_namespace_as_parsed(project):
    args = build_parser().parse_args(["eval", "data.jsonl"])
    before = dict(vars(args))
    judge_options(args)
    assert vars(args) == before


def test_judge_eval_judges_with_the_model_of_tool_judge(project, fake_llm_server: FakeLLMServer):
    fake_llm_server.chat = heuristic_judge
    data = dataset(project / "data.jsonl", 2)
    (project / "pyproject.toml").write_text(
        '[tool.judge]\nmodel = "openai/file-model"\ncache = "recordings/c.sqlite"\n'
        f'api-base = "{fake_llm_server.base_url}"\n',
        encoding="utf-8",
    )
    common = ["--metrics", "faithfulness", "--no-progress", "--no-record"]
    # The file's api-base is not used: a folder's file does not choose where the key goes
    # (a dry run: nothing is sent).
    done = run("eval", data, "--dry-run", *common, cwd=project, env=_env())
    assert "[tool.judge] api-base is not used" in done.stderr
    done = run(
        "eval",
        data,
        "--out",
        "out",
        "--api-base",
        fake_llm_server.base_url,
        *common,
        cwd=project,
        env=_env(),
    )
    assert done.returncode == 0, done.stderr
    assert {r.body["model"] for r in fake_llm_server.requests} == {"file-model"}
    summary = json.loads((project / "out" / "summary.json").read_text())
    assert summary["config"]["model"] == "openai/file-model"
    assert (project / "recordings" / "c.sqlite").is_file()  # relative to the file's folder


def _env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
    env["OPENAI_API_KEY"] = "test-key"
    return env
