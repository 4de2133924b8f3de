"""`judge experiment` as a user runs it: a subprocess asking an app in a file, judged by
the fake server; killed with SIGKILL and resumed; its outputs judged again by judge eval."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge.experiments.experiment import load_testset
from judge.testing import FakeLLMServer
from tests.helpers import apps
from tests.helpers.cli import run
from tests.helpers.judging import judge_handler

APPS = Path(apps.__file__)


@pytest.fixture
def server(fake_llm_server: FakeLLMServer) -> FakeLLMServer:
    fake_llm_server.chat = judge_handler
    return fake_llm_server


def questions(path: Path, n: int = 5) -> Path:
    items = [
        {
            **apps.QUESTIONS[i % 5],
            "id": f"q{i + 1}",
            "question": f"{apps.QUESTIONS[i % 5]['question']} ({i})",
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(q) + "\n" for q in items), encoding="utf-8")
    return path


def experiment_args(
    data: Path, app: str, server: FakeLLMServer, out: Path, *extra: str
) -> list[str]:
    return [
        "experiment",
        str(data),
        "--app",
        f"{APPS}:{app}",
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "k",
        "--no-cache",
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def scores(out: Path) -> list[tuple]:
    return [
        (r["row"], r["id"], json.dumps(r["scores"], sort_keys=True))
        for r in read_jsonl(out / "results.jsonl")
    ]


def test_an_experiment_writes_app_outputs_that_judge_eval_judges_again_without_the_app(
    server, tmp_path
):
    data = questions(tmp_path / "q.jsonl")
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "JUDGE_TEST_CALLS": str(calls)}
    done = run(*experiment_args(data, "counted", server, tmp_path / "exp"), env=env)
    assert done.returncode == 0, done.stderr
    assert "5 questions (5 asked, 0 answered before); 0 app errors" in done.stderr
    assert len(calls.read_text().splitlines()) == 5
    summary = json.loads((tmp_path / "exp" / "summary.json").read_text())
    assert summary["config"]["app"]["target"] == f"{APPS}:counted"
    assert summary["config"]["app"]["fingerprint"]  # the hash of apps.py
    assert {"faithfulness", "mrr", "ndcg@10", "recall@10"} <= set(summary["metrics"])
    again = run(
        "eval",
        tmp_path / "exp" / "app_outputs.jsonl",
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "k",
        "--no-cache",
        "--out",
        tmp_path / "again",
        "--no-progress",
        env=env,
    )
    assert again.returncode == 0, again.stderr
    assert len(calls.read_text().splitlines()) == 5  # no app call
    assert scores(tmp_path / "again") == scores(tmp_path / "exp")


def test_killed_in_the_middle_an_experiment_resumes_without_asking_answered_questions(
    server, tmp_path
):
    data = questions(tmp_path / "q.jsonl", n=12)
    reference = run(*experiment_args(data, "answer", server, tmp_path / "whole"))
    assert reference.returncode == 0, reference.stderr
    server.reset()
    server.chat = judge_handler
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "JUDGE_TEST_CALLS": str(calls), "JUDGE_TEST_SLEEP": "0.2"}
    out = tmp_path / "out"
    args = experiment_args(data, "counted", server, out, "--app-concurrency", "2")
    process = subprocess.Popen(
        [sys.executable, "-m", "judge", *args], env=env, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    progress = out / ".app_outputs.jsonl"
    while time.monotonic() < deadline:
        if progress.exists() and len(progress.read_bytes().splitlines()) >= 5:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    # Judging starts once every question is answered (the judge's server was checked
    # before the app was asked: one GET of its model list).
    assert server.count("/v1/chat/completions") == 0 and server.count() == 1
    # The progress file keeps the app's answers by key (what it was given), not the row.
    by_key = {q.key(False): q.question for q in load_testset(data).questions}
    answered = {
        by_key[json.loads(line)["question"]]
        for line in progress.read_bytes().splitlines()
        if line.endswith(b"}")
    }
    assert 5 <= len(answered) < 12
    assert not (out / "results.jsonl").exists()
    asked_before = calls.read_text().splitlines()
    resumed = run(*args, env=env)
    assert resumed.returncode == 0, resumed.stderr
    asked_after = calls.read_text().splitlines()[len(asked_before) :]
    assert not answered & set(asked_after)  # no answered question asked again
    assert set(asked_before) | set(asked_after) == {
        q["question"] for q in read_jsonl(data)
    }  # none lost
    assert f"({12 - len(answered)} asked, {len(answered)} answered before)" in resumed.stderr
    assert scores(out) == scores(tmp_path / "whole")
    assert not progress.exists() and not (out / ".checkpoint.jsonl").exists()


def test_killed_while_judging_an_experiment_resumes_the_judging_alone(server, tmp_path):
    data = questions(tmp_path / "q.jsonl", n=12)
    reference = run(*experiment_args(data, "answer", server, tmp_path / "whole"))
    assert reference.returncode == 0, reference.stderr
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "JUDGE_TEST_CALLS": str(calls)}
    out = tmp_path / "out"
    args = experiment_args(data, "counted", server, out, "--concurrency", "1")
    server.latency = 0.05  # slow enough to be stopped in the middle
    process = subprocess.Popen(
        [sys.executable, "-m", "judge", *args], env=env, stderr=subprocess.PIPE
    )
    checkpoint = out / ".checkpoint.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if checkpoint.exists() and len(checkpoint.read_bytes().splitlines()) >= 3:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    judged = len(checkpoint.read_bytes().splitlines())
    assert 3 <= judged < 12
    server.latency = 0
    resumed = run(*args, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert len(calls.read_text().splitlines()) == 12  # the app was asked once per question
    assert "(0 asked, 12 answered before)" in resumed.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["resumed_rows"] >= judged - 1  # a torn last line is judged again
    assert scores(out) == scores(tmp_path / "whole")


def test_app_errors_fail_the_error_rate_gate_with_the_apps_reason(server, tmp_path):
    data = questions(tmp_path / "q.jsonl")
    done = run(
        *experiment_args(data, "hangs_on_bananas", server, tmp_path / "out", "--app-timeout", "0.5")
    )
    assert done.returncode == 3, done.stderr
    assert "Timeout: no reply within 0.5 s" in done.stderr
    assert "1 app error (Timeout 1; see app_error in app_outputs.jsonl)" in done.stderr
    assert "see app_error in app_outputs.jsonl for why the app failed" in done.stderr
    # results.jsonl names the question the app failed on (it had neither id nor question)
    results = (tmp_path / "out" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    (failed,) = [row for row in map(json.loads, results) if row["error"]]
    assert failed["question"].startswith("What colour are ripe bananas?")
    assert failed["id"] == "q3" and "Timeout: no reply within 0.5 s" in failed["error"]
    allowed = run(
        *experiment_args(
            data,
            "hangs_on_bananas",
            server,
            tmp_path / "out2",
            "--app-timeout",
            "0.5",
            "--max-error-rate",
            "0.25",
        )
    )
    assert allowed.returncode == 0, allowed.stderr


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nowhere.py:answer", "--app nowhere.py:answer: nowhere.py: no such file"),
        (f"{APPS}:missing", f"{APPS} has no attribute 'missing'"),
        (f"{APPS}:CHUNKS", "a dict is not callable"),
        (f"{APPS}:retrieve", None),  # two parameters, the second with a default: fine
        ("no_such_module_xyz:app", "no module named 'no_such_module_xyz'"),
        ("answer", "give module:function or path/to/file.py:function"),
    ],
)
def test_a_bad_target_is_one_line_naming_the_flag(target, message, server, tmp_path):
    data = questions(tmp_path / "q.jsonl")
    args = experiment_args(data, "answer", server, tmp_path / "out")
    args[args.index("--app") + 1] = target
    done = run(*args)
    if message is None:
        assert done.returncode == 3, done.stderr  # retrieve's reply is no mapping: app errors
        return
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()  # nothing asked, nothing written


def test_an_app_error_reaches_the_terminal_with_its_control_characters_escaped(server, tmp_path):
    data = questions(tmp_path / "q.jsonl")
    done = run(*experiment_args(data, "fails_with_control_characters", server, tmp_path / "out"))
    assert done.returncode == 3, done.stderr
    for raw in ("\x00", "\u202e", "\x1b", "\x07"):
        assert raw not in done.stderr and raw not in done.stdout
    assert "ValueError: no \\u0000index \\u202eevil\\u001b]0;pwned\\u0007 here" in done.stderr
    # The file keeps the app's error as it was: only what a terminal shows is escaped.
    outputs = read_jsonl(tmp_path / "out" / "app_outputs.jsonl")
    assert [row["app_error"]["message"] for row in outputs if row["app_error"]] == [
        apps.CONTROL_ERROR
    ]


@pytest.mark.parametrize("name", ["app_outputs.jsonl", "results.jsonl"])
def test_an_experiment_never_replaces_its_test_set(server, tmp_path, name):
    out = tmp_path / "out"
    out.mkdir()
    data = questions(out / name)
    before = data.read_bytes()
    done = run(*experiment_args(data, "answer", server, out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert str(data) in done.stderr and "another folder" in done.stderr, done.stderr
    assert data.read_bytes() == before and [p.name for p in out.iterdir()] == [name]


def test_labels_are_refused_with_the_route_for_an_experiments_answers(server, tmp_path):
    """The answers an experiment judges are made by its run: no one can have labelled them
    before it. --labels says how to label and correct them after, and asks nothing."""
    data = questions(tmp_path / "q.jsonl")
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"id": "q1", "faithful": 1}\n', encoding="utf-8")
    done = run(*experiment_args(data, "answer", server, tmp_path / "out", "--labels", str(labels)))
    assert done.returncode == 2 and server.requests == []
    assert "judge estimate OUT --labels FILE" in done.stderr
    assert "judge eval OUT/app_outputs.jsonl --labels FILE" in done.stderr
    assert not (tmp_path / "out").exists()


# The fields of an experiment's summary.json that are timings (docs/guides/cache-and-replay.md
# lists them): wall times, and the app's latencies.
TIMINGS = (("seconds",), ("app", "seconds"), ("app", "latency_s"))
_TIMING_TEXT = re.compile(r'(&quot;|")(seconds|p50|p95|max)\1: [0-9.]+')


def without_timings(summary: dict) -> dict:
    config = json.loads(json.dumps(summary["config"]))
    for path in TIMINGS:
        *parents, last = path
        place = config
        for key in parents:
            place = place[key]
        assert last in place, path
        place[last] = None
    return {**summary, "config": config}


def test_two_identical_experiments_in_other_folders_write_the_same_bytes(server, tmp_path):
    """Replayed twice, into folders of different names and places, an experiment writes
    results.jsonl, summary.json and report.html byte for byte alike but for the timings:
    the source is recorded as the file's name in the folder, and the data hash is of the
    data (the app's latency column is a timing, not data)."""
    data = questions(tmp_path / "q.jsonl")
    args = ["--cache", tmp_path / "c.sqlite", "--cache-as", "fake", "--no-record"]

    def flags(url: str, out: Path) -> list[str]:
        given = experiment_args(data, "answer", server, out)
        given.remove("--no-cache")
        given[given.index(server.base_url)] = url
        return given

    fill = run(*flags(server.base_url, tmp_path / "fill"), *args)
    assert fill.returncode == 0, fill.stderr
    args = [*args, "--replay"]
    outs = [tmp_path / "one", tmp_path / "elsewhere" / "two ü"]
    offline = "http://127.0.0.1:1/v1"  # nothing listens: every judgment is the cache's
    for out in outs:
        done = run(*flags(offline, out), *args)
        assert done.returncode == 0, done.stderr
    one, two = outs
    assert (one / "results.jsonl").read_bytes() == (two / "results.jsonl").read_bytes()
    a = json.loads((one / "summary.json").read_text(encoding="utf-8"))
    b = json.loads((two / "summary.json").read_text(encoding="utf-8"))
    assert a["config"]["source"] == "app_outputs.jsonl"
    assert without_timings(a) == without_timings(b)
    for name in ("summary.json", "report.html"):
        texts = [_TIMING_TEXT.sub("TIME", (out / name).read_text(encoding="utf-8")) for out in outs]
        assert texts[0] == texts[1], name
    # The latencies stay in the rows the app gave, and the hash is judge eval's of them.
    rows = read_jsonl(one / "app_outputs.jsonl")
    assert all(isinstance(row["app_latency_s"], float) for row in rows)
    again = run("eval", one / "app_outputs.jsonl", "--model", "openai/judge", "--api-key", "k",
                "--api-base", offline, "--out", tmp_path / "again", "--no-progress",
                *args)  # fmt: skip
    assert again.returncode == 0, again.stderr
    c = json.loads((tmp_path / "again" / "summary.json").read_text(encoding="utf-8"))
    assert c["config"]["data"] == a["config"]["data"]
