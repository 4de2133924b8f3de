"""The one resolver of the judge's settings (`judge.run.settings`): flags > environment >
pytest's ini options > [tool.judge] > the defaults of `judge.LLM`."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge.errors import JudgeError
from judge.llm.config import LLM
from judge.run.settings import resolve_settings


def pyproject(folder: Path, body: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text("[tool.judge]\n" + body, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("flag", "env", "ini", "project", "model", "origin"),
    [
        (None, None, None, None, None, "default"),
        (None, None, None, "openai/from-file", "openai/from-file", "pyproject"),
        (None, None, "openai/from-ini", "openai/from-file", "openai/from-ini", "ini"),
        (
            None,
            "openai/from-env",
            "openai/from-ini",
            "openai/from-file",
            "openai/from-env",
            "environment",
        ),
        (
            "openai/from-flag",
            "openai/from-env",
            "openai/from-ini",
            "openai/from-file",
            "openai/from-flag",
            "flag",
        ),
    ],
)
def test_each_level_overrides_the_one_below_for_the_model(
    tmp_path, flag, env, ini, project, model, origin
):
    path = pyproject(tmp_path, f'model = "{project}"\n' if project else "")
    settings = resolve_settings(
        {"model": flag},
        environ={"JUDGE_MODEL": env} if env else {},
        ini={"model": ini} if ini else {},
        pyproject=path,
    )
    assert settings.model == model
    assert settings.origin["model"] == origin


@pytest.mark.parametrize(
    ("flag", "env", "project", "concurrency"),
    [
        (None, None, None, LLM("openai/x").max_concurrency),
        (None, None, 3, 3),
        (None, "5", 3, 5),
        (7, "5", 3, 7),
    ],
)
def test_each_level_overrides_the_one_below_for_the_concurrency(
    tmp_path, flag, env, project, concurrency
):
    path = pyproject(tmp_path, f"concurrency = {project}\n" if project else "")
    settings = resolve_settings(
        {"concurrency": flag}, environ={"JUDGE_CONCURRENCY": env} if env else {}, pyproject=path
    )
    assert settings.concurrency == concurrency


def test_the_defaults_are_the_dataclasses_and_relative_paths_the_files(tmp_path):
    settings = resolve_settings({}, environ={}, pyproject=tmp_path / "pyproject.toml")
    default = LLM("openai/x")
    assert (settings.timeout, settings.max_retries) == (default.timeout, default.max_retries)
    assert settings.cache == str(tmp_path / ".judge" / "cache.sqlite")
    path = pyproject(tmp_path, 'cache = "recordings/judge.sqlite"\n')
    assert resolve_settings({}, environ={}, pyproject=path).cache == str(
        tmp_path / "recordings" / "judge.sqlite"
    )
    # A flag's path is the user's, relative to where they run.
    assert resolve_settings({"cache": "mine.sqlite"}, environ={}, pyproject=path).cache == (
        "mine.sqlite"
    )


def test_wrong_values_are_named_where_they_were_given(tmp_path):
    with pytest.raises(JudgeError, match=r"JUDGE_CONCURRENCY must be a whole number, not 'many'"):
        resolve_settings({}, environ={"JUDGE_CONCURRENCY": "many"}, pyproject=None)
    path = pyproject(tmp_path, "concurrency = true\nmodel = 3\n")
    with pytest.raises(JudgeError, match=r"\[tool.judge\] model must be a non-empty string"):
        resolve_settings({}, environ={}, pyproject=path)
    path = pyproject(tmp_path, 'api-key = "sk-1"\n')
    with pytest.raises(JudgeError, match="a key does not belong in a file"):
        resolve_settings({}, environ={}, pyproject=path)


def test_the_servers_of_a_file_are_left_out_when_asked(tmp_path):
    path = pyproject(tmp_path, 'model = "openai/m"\napi-base = "http://elsewhere/v1"\n')
    kept = resolve_settings({}, environ={}, pyproject=path)
    assert kept.api_base == "http://elsewhere/v1"
    left = resolve_settings({}, environ={}, pyproject=path, file_servers=False)
    assert (left.model, left.api_base) == ("openai/m", None)
    given = resolve_settings(
        {}, environ={"JUDGE_API_BASE": "http://mine/v1"}, pyproject=path, file_servers=False
    )
    assert given.api_base == "http://mine/v1"


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"JUDGE_CONCURRENCY": "0"}, r"JUDGE_CONCURRENCY must be at least 1, not '0'"),
        ({"JUDGE_CONCURRENCY": "-1"}, r"JUDGE_CONCURRENCY must be at least 1, not '-1'"),
        ({"JUDGE_TIMEOUT": "-1"}, r"JUDGE_TIMEOUT must be a finite number above 0"),
        ({"JUDGE_TIMEOUT": "nan"}, r"JUDGE_TIMEOUT must be a finite number above 0"),
        ({"JUDGE_TIMEOUT": "inf"}, r"JUDGE_TIMEOUT must be a finite number above 0"),
        ({"JUDGE_MAX_RETRIES": "-1"}, r"JUDGE_MAX_RETRIES must be at least 0, not '-1'"),
        ({"JUDGE_CONTEXT_WINDOW": "0"}, r"JUDGE_CONTEXT_WINDOW must be at least 1, not '0'"),
    ],
)
def test_a_value_out_of_range_is_named_where_it_was_given(env, said):
    """JUDGE_CONCURRENCY=0 ran with 1 request at a time, JUDGE_TIMEOUT=-1 and nan were
    taken, and JUDGE_CONTEXT_WINDOW=0 was refused as --context-window: the variable the
    user set is the one to name."""
    with pytest.raises(JudgeError, match=said):
        resolve_settings({}, environ=env, pyproject=None)


def test_a_file_or_flag_out_of_range_is_named_where_it_was_given(tmp_path):
    path = pyproject(tmp_path, "concurrency = 0\n")
    with pytest.raises(JudgeError, match=r"\[tool.judge\] concurrency must be at least 1"):
        resolve_settings({}, environ={}, pyproject=path)
    with pytest.raises(JudgeError, match=r"--concurrency must be at least 1, not 0"):
        resolve_settings({"concurrency": 0}, environ={}, pyproject=None)
    with pytest.raises(JudgeError, match=r"--judge-concurrency must be at least 1, not -2"):
        resolve_settings({"concurrency": -2}, environ={}, pyproject=None, flag_prefix="--judge-")


@pytest.mark.parametrize("body", ["tool = 3\n", "[tool]\njudge = [1]\n"])
def test_a_pyproject_whose_tool_is_not_a_table_is_an_error(tmp_path, body):
    path = tmp_path / "pyproject.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(JudgeError, match=r"must be a table"):
        resolve_settings({}, environ={}, pyproject=path)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("concurency = 2\n", r"concurency: no such setting \(did you mean concurrency\?\)"),
        ("max_retries = 1\n", r"max_retries: no such setting \(did you mean max-retries\?\)"),
    ],
)
def test_an_unknown_key_of_tool_judge_is_named_not_ignored(tmp_path, body, said):
    """A misspelt key (or the keyword's underscore for the key's dash) was ignored: the
    run went on with the default the user meant to change."""
    with pytest.raises(JudgeError, match=said):
        resolve_settings({}, environ={}, pyproject=pyproject(tmp_path, body))
    ok = pyproject(tmp_path, 'metrics-modules = ["m.py"]\nmax-retries = 1\n')
    assert resolve_settings({}, environ={}, pyproject=ok).max_retries == 1
