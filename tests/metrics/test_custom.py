"""Custom metrics: the examples replayed from recorded judgments, and the errors users make."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

import judge
from judge.cache.store import Cache
from judge.errors import InputFormatError, JudgeError
from judge.metrics.custom import judged_metric
from judge.testing import FIXTURE_SERVER, FakeLLMServer, recorded_chat
from tests.helpers.cli import run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))

from domain_accuracy import domain_accuracy  # noqa: E402
from rubric import support_tone  # noqa: E402

ENTRIES = [json.loads(x) for x in (EXAMPLES / "judgments.jsonl").read_text().splitlines()]
# Worked out from the hand-written judgments in fixtures/recorders/record_example_judgments.py.
EXPECTED = {
    "refund-1": {"domain_accuracy": 5 / 5, "support_tone": 4 / 4},
    "refund-2": {"domain_accuracy": 1 / 5, "support_tone": 3 / 4},
    "warranty-1": {"domain_accuracy": 5 / 5, "support_tone": 4 / 4},
    "password-1": {"domain_accuracy": 4 / 5, "support_tone": 1 / 4},
    "invoice-1": {"domain_accuracy": 5 / 5, "support_tone": 4 / 4},
}


def llm(server: FakeLLMServer) -> judge.LLM:
    return judge.LLM(
        "openai/judge-fixture", api_base=server.base_url, api_key="x", cache_as=FIXTURE_SERVER
    )


def test_examples_are_one_short_file_each():
    for name in ("domain_accuracy.py", "rubric.py"):
        assert len((EXAMPLES / name).read_text().splitlines()) < 40


@pytest.mark.parametrize("reject", [set(), {"json_schema"}])
def test_examples_replayed_through_the_fake_server(reject):
    with FakeLLMServer(chat=recorded_chat(ENTRIES)) as server:
        server.reject_response_format = reject
        result = judge.evaluate(
            EXAMPLES / "data.jsonl",
            metrics=[domain_accuracy, support_tone],
            llm=llm(server),
            progress=False,
        )
    assert {r.id: r.scores for r in result.rows} == EXPECTED
    assert result.rows[3].evidence["support_tone"]["reason"].startswith("Condescending")
    assert result.summary["domain_accuracy"].mean == pytest.approx(0.8)


def test_examples_replay_from_the_cache_without_requests(tmp_path):
    cache = Cache(tmp_path / "c.sqlite")
    cache.import_jsonl(EXAMPLES / "judgments.jsonl")
    cache.mode = "replay"
    with FakeLLMServer() as server:  # no chat handler: any request would fail
        result = judge.evaluate(
            EXAMPLES / "data.jsonl",
            metrics=[domain_accuracy, support_tone],
            llm=llm(server),
            cache=cache,
            progress=False,
        )
        assert server.count() == 0
    assert {r.id: r.scores for r in result.rows} == EXPECTED


def test_cli_metrics_module_thresholds_and_compare(tmp_path):
    (tmp_path / "c.sqlite").unlink(missing_ok=True)
    Cache(tmp_path / "c.sqlite").import_jsonl(EXAMPLES / "judgments.jsonl")
    command = [
        sys.executable,
        "-m",
        "judge",
        "eval",
        str(EXAMPLES / "data.jsonl"),
        "--model",
        "openai/judge-fixture",
        "--replay",
        "--cache-as",  # the recording's server identity: replay it with no server named
        FIXTURE_SERVER,
        "--cache",
        str(tmp_path / "c.sqlite"),
        "--metrics-module",
        str(EXAMPLES / "domain_accuracy.py"),
        "--metrics-module",
        str(EXAMPLES / "rubric.py"),
        "--metrics",
        "domain_accuracy,support_tone",
        "--no-progress",
    ]
    ok = subprocess.run(
        [*command, "--out", str(tmp_path / "a"), "--fail-under", "domain_accuracy=0.75"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert "domain_accuracy" in ok.stdout and "support_tone" in ok.stdout
    low = subprocess.run(
        [*command, "--out", str(tmp_path / "b"), "--fail-under", "support_tone=0.9"],
        capture_output=True,
        text=True,
    )
    assert low.returncode == 1 and "support_tone = 0.8000 < 0.9" in low.stderr
    compared = subprocess.run(
        [
            sys.executable,
            "-m",
            "judge",
            "compare",
            str(tmp_path / "a"),
            str(tmp_path / "b"),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
    )
    assert json.loads(compared.stdout)["metrics"]["support_tone"]["delta"] == 0.0
    report = (tmp_path / "a" / "report.html").read_text()
    assert "support_tone" in report and "Condescending" in report


def test_a_prompt_variable_the_data_lacks(tmp_path):
    needs_domain = judged_metric(
        "domain_fit",
        prompt="<<<system>>>\nRate.\n<<<user>>>\n{{answer}} {{domain}}",
        output=Empty,
        score=lambda r: 1.0,
    )
    with FakeLLMServer() as server:
        with pytest.raises(InputFormatError, match="'domain_fit' reads domain, which the data"):
            judge.evaluate(EXAMPLES / "data.jsonl", metrics=[needs_domain], llm=llm(server))
        result = judge.score("q", "a", ["c"], metrics=[needs_domain], llm=llm(server))
        assert server.count() == 0
    assert math.isnan(result["domain_fit"]) and result.reasons["domain_fit"] == "missing_field"
    assert "needs domain" in result.errors["domain_fit"]


def test_extra_columns_fill_prompt_variables():
    rows = [{"question": "q", "answer": "a", "domain": "law"}]
    metric = judged_metric(
        "domain_fit",
        prompt="<<<system>>>\nRate.\n<<<user>>>\n{{domain}}",
        output=type("Ok", (BaseModel,), {"__annotations__": {"ok": bool}}),
        score=lambda r: float(r.ok),
    )
    with FakeLLMServer(chat=lambda body: '{"ok": true}') as server:
        result = judge.evaluate(rows, metrics=[metric], llm=llm(server), progress=False)
        assert server.requests[0].body["messages"][1]["content"] == '"law"'
    assert result.rows[0].scores == {"domain_fit": 1.0}


class Opaque:
    pass


class Empty(BaseModel):
    pass


class NotSchemaable(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "faithfulness"}, "clashes with a built-in"),
        ({"output": NotSchemaable}, "has no JSON schema"),
        ({"prompt": "no sections here"}, "neither prompt text"),
        ({"prompt": "<<<user>>>\nonly user"}, "neither prompt text"),
    ],
)
def test_definition_errors(kwargs, message):
    arguments = {
        "name": "mine",
        "prompt": "<<<system>>>\ns\n<<<user>>>\n{{answer}}",
        "output": Empty,
        "score": lambda r: 1.0,
        **kwargs,
    }
    with pytest.raises(JudgeError, match=message):
        judged_metric(**arguments)


def test_a_scorer_that_returns_a_non_number():
    metric = judged_metric(
        "bad",
        prompt="<<<system>>>\ns\n<<<user>>>\n{{answer}}",
        output=Empty,
        score=lambda r: "great",
    )
    with FakeLLMServer(chat=lambda body: "{}") as server:
        result = judge.score("q", "a", metrics=[metric], llm=llm(server))
    assert result.reasons["bad"] == "judge_error"
    assert "returned str ('great'); return a number" in result.errors["bad"]


@pytest.mark.parametrize(
    ("value", "shown"),
    [(float("inf"), "inf"), (-float("inf"), "-inf"), (10**400, "a number beyond a double")],
    ids=["inf", "-inf", "10**400"],
)
def test_a_scorer_that_returns_an_infinite_number(value, shown):
    # inf was kept as a score: results.jsonl and summary.json held `Infinity` (not JSON),
    # the mean was inf and a gate `>=1` passed on it; 10**400 crashed float().
    metric = judged_metric(
        "big",
        prompt="<<<system>>>\ns\n<<<user>>>\n{{answer}}",
        output=Empty,
        score=lambda r: value,
    )
    with FakeLLMServer(chat=lambda body: "{}") as server:
        result = judge.score("q", "a", metrics=[metric], llm=llm(server))
    assert result.reasons["big"] == "judge_error"
    assert f"returned {shown}; return a finite number" in result.errors["big"]


def judge_in(folder: Path, *args: str, env: dict[str, str] | None = None):
    """`judge ARGS` run in folder (where its ./pyproject.toml is)."""
    environ = {k: v for k, v in os.environ.items() if k != "JUDGE_METRICS_MODULES"}
    return run(*args, cwd=folder, env={**environ, **(env or {})})


# A metrics module of an untrusted checkout: importing it leaves a mark.
MARKING = f"""
from pathlib import Path
Path("ran").write_text("the checkout's code ran")
exec({(EXAMPLES / "rubric.py").read_text()!r})
"""


@pytest.fixture
def checkout(tmp_path):
    """A folder whose pyproject.toml names a metrics module that marks its import."""
    (tmp_path / "project_metrics.py").write_text(MARKING)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.judge]\nmetrics-modules = ["project_metrics.py"]\n'
    )
    return tmp_path


def test_project_metrics_modules_are_not_run_unasked(checkout):
    listed = judge_in(checkout, "metrics")
    assert listed.returncode == 0, listed.stderr
    assert not (checkout / "ran").exists() and "support_tone" not in listed.stdout
    (note,) = [line for line in listed.stderr.splitlines() if "metrics-modules" in line]
    assert "not loaded" in note and "--trust-project-metrics" in note
    assert "JUDGE_METRICS_MODULES" in note
    judge.Cache(checkout / "c.sqlite").close()  # --replay needs a cache that exists
    replay = judge_in(
        checkout,
        "eval",
        str(EXAMPLES / "data.jsonl"),
        "--model",
        "openai/judge-fixture",
        "--replay",
        "--cache",
        str(checkout / "c.sqlite"),
        "--metrics",
        "support_tone",
        "--no-progress",
        "--out",
        str(checkout / "out"),
    )
    assert not (checkout / "ran").exists()
    assert replay.returncode == 2 and "support_tone" in replay.stderr  # an unknown metric


def test_project_metrics_modules_run_after_an_opt_in(checkout):
    trusted = judge_in(checkout, "metrics", "--trust-project-metrics")
    assert trusted.returncode == 0, trusted.stderr
    assert "support_tone" in trusted.stdout and (checkout / "ran").exists()
    assert "not loaded" not in trusted.stderr
    (checkout / "ran").unlink()
    named = judge_in(checkout, "metrics", env={"JUDGE_METRICS_MODULES": "project_metrics.py"})
    assert named.returncode == 0 and "support_tone" in named.stdout, named.stderr
    assert (checkout / "ran").exists() and "not loaded" not in named.stderr
    (checkout / "ran").unlink()
    # --metrics-module stays explicit; naming the pyproject.toml trusts its list
    explicit = judge_in(checkout, "metrics", "--metrics-module", "pyproject.toml")
    assert "support_tone" in explicit.stdout and (checkout / "ran").exists(), explicit.stderr


def test_a_bad_project_list_is_an_error_only_when_trusted(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.judge]\nmetrics-modules = 3\n")
    assert judge_in(tmp_path, "metrics").returncode == 0
    bad = judge_in(tmp_path, "metrics", "--trust-project-metrics")
    assert bad.returncode == 2 and "must be a list of strings" in bad.stderr
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    quiet = judge_in(tmp_path, "metrics")
    assert quiet.returncode == 0 and quiet.stderr == ""
