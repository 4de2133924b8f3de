"""Gates refused before anything is judged, on every executor: a gate naming a metric the
run does not compute (plain, --shard, --processes, --ray, judge experiment), and a
judge experiment whose test set lacks the column its metrics need, refused before the app
is asked. The loopback server counts the requests: none."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers import apps
from tests.helpers.cli import dataset, eval_args, run

APPS = Path(apps.__file__)
HAS_RAY = importlib.util.find_spec("ray") is not None


@pytest.fixture
def server(fake_llm_server: FakeLLMServer) -> FakeLLMServer:
    fake_llm_server.chat = heuristic_judge
    return fake_llm_server


@pytest.mark.parametrize(
    "executor",
    [
        [],
        ["--shard", "1/2"],
        ["--processes", "2"],
        pytest.param(
            ["--ray"], marks=pytest.mark.skipif(not HAS_RAY, reason="ray is not installed")
        ),
    ],
    ids=["plain", "shard", "processes", "ray"],
)
@pytest.mark.parametrize(
    "gate", [["--gate", "hallucination_rate<=0.1"], ["--fail-under", "context_recall=0.5"]]
)
def test_a_gate_on_a_metric_the_run_does_not_compute_is_refused_before_judging(
    tmp_path: Path, server: FakeLLMServer, executor: list[str], gate: list[str]
) -> None:
    data = dataset(tmp_path / "d.jsonl", 4)
    args = eval_args(data, server, tmp_path, "--metrics", "faithfulness", *gate, *executor)
    done = run(*args)
    metric = gate[1].split("<")[0].split("=")[0]
    assert done.returncode == 2, done.stderr
    assert f"a gate names {metric}, which the run does not compute" in done.stderr
    assert "its metrics: faithfulness" in done.stderr
    assert not server.requests  # not one row judged
    assert not (tmp_path / "out" / "results.jsonl").exists()


def experiment(tmp_path: Path, server: FakeLLMServer, rows: list[dict], *extra: str):
    data = tmp_path / "testset.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    calls = tmp_path / "calls.txt"
    done = run(
        "experiment",
        data,
        "--app",
        f"{APPS}:counted",
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "k",
        "--no-cache",
        "--out",
        tmp_path / "exp",
        "--no-progress",
        *extra,
        env={**os.environ, "JUDGE_TEST_CALLS": str(calls)},
    )
    return done, calls


def no_truth() -> list[dict]:
    return [{"id": q["id"], "question": q["question"]} for q in apps.QUESTIONS]


def test_an_experiment_refuses_a_gate_on_a_metric_it_does_not_compute_before_the_app(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    done, calls = experiment(
        tmp_path, server, apps.QUESTIONS, "--metrics", "faithfulness", "--gate", "mrr>=0.5"
    )
    assert done.returncode == 2, done.stderr
    assert "a gate names mrr, which the run does not compute" in done.stderr
    assert not calls.exists()  # the app was not asked
    assert server.count("/v1/chat/completions") == 0  # nothing judged


def test_an_experiment_without_ground_truth_refuses_its_default_metrics_before_the_app(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    # found in issue 38: the app ran and the judge was paid, then exit 3 (no scores)
    done, calls = experiment(tmp_path, server, no_truth())
    assert done.returncode == 2, done.stderr
    assert "context_recall would score no row" in done.stderr
    assert "ground_truth" in done.stderr
    assert "--metrics" in done.stderr  # how to choose other metrics
    assert not calls.exists()  # the app was not asked
    assert server.count("/v1/chat/completions") == 0  # nothing judged


def test_an_experiment_without_ground_truth_runs_metrics_that_need_none(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    done, calls = experiment(tmp_path, server, no_truth(), "--metrics", "faithfulness")
    assert done.returncode == 0, done.stderr
    assert len(calls.read_text().splitlines()) == len(apps.QUESTIONS)
