"""Hostile apps run by `judge experiment` as a user runs it (a subprocess): each ends as
that question's app error or a clear exit 2 naming what was wrong, never exit 70 (a bug
in judge), never a hang past --app-timeout plus a small margin, and whatever the app did,
the summary's retrieval metrics are those `judge ir` gives on the run's own files."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from judge import experiment
from judge.experiments.app import AppError, load_target
from judge.testing import FakeLLMServer, Fault
from tests.helpers.cli import run
from tests.helpers.judging import judge_handler

QUESTIONS = [
    {"id": "q1", "question": "Who created Python?", "relevance": {"c1": 2}},
    {"id": "q2", "question": "Where is the Eiffel Tower?", "relevance": {"c2": 1}},
]
HEADER = """\
import asyncio, os, sys, threading, time
OK = {"answer": "An answer.", "contexts": ["A context."], "retrieved_ids": ["c1", "c2"]}
"""
TIMEOUT = 1.0  # --app-timeout of the hanging apps
MARGIN = 4.0  # seconds beyond it a run may take: start-up, writing, a loaded machine
# An app that spins on in its threads after its timeout shares the GIL with the rest of
# the run (judging, writing), which so takes about three times as long on a busy machine.
SPINNING_MARGIN = 10.0


@dataclass
class Hostile:
    """An app file (the body after HEADER), and how its experiment must end: each
    question's app error type (None: answered), or exit 2 with words on stderr."""

    source: str | bytes
    errors: dict[str, str | None] = field(default_factory=dict)
    exit_2: tuple[str, ...] = ()
    timeout: float = TIMEOUT
    margin: float = MARGIN  # seconds past the timeout the whole run may take
    files: dict[str, str] = field(default_factory=dict)  # more files beside app.py
    check: Callable[[Path, subprocess.CompletedProcess[str]], None] | None = None
    judged: bool = False  # judged by the fake server's model too, not by retrieval alone
    progress: bool = False  # the progress lines on stderr while the app runs


def both(kind: str | None) -> dict[str, str | None]:
    return {"q1": kind, "q2": kind}


def _the_row_is_kept_as_the_test_set_has_it(out: Path, done: subprocess.CompletedProcess[str]):
    rows = read_jsonl(out / "app_outputs.jsonl")
    assert [r["id"] for r in rows] == ["q1", "q2"]
    assert [r["relevance"] for r in rows] == [q["relevance"] for q in QUESTIONS]


def _the_table_is_printed(out: Path, done: subprocess.CompletedProcess[str]):
    assert "mrr" in done.stdout  # on the stdout judge was given, whatever the app did to it


def _the_gates_decide_and_their_words_reach_stderr(out: Path, done):
    failed = any((r["app_error"] or {}).get("type") for r in read_jsonl(out / "app_outputs.jsonl"))
    assert done.returncode == (3 if failed else 0), done.stderr
    assert ("FAILED unreadable rows" in done.stderr) == failed, done.stderr
    assert "judge: app " in done.stderr  # the app's line, after the run


def _the_gigantic_answer_is_kept(out: Path, done: subprocess.CompletedProcess[str]):
    row = read_jsonl(out / "app_outputs.jsonl")[0]
    assert len(row["answer"]) == 20_000_000


def _the_apps_writes_are_replaced(out: Path, done: subprocess.CompletedProcess[str]):
    assert [r["id"] for r in read_jsonl(out / "app_outputs.jsonl")] == ["q1", "q2"]
    assert json.loads((out / "summary.json").read_text())["metrics"]["mrr"]


def _the_numpy_values_are_plain(out: Path, ids: list[str], scores: list[float]) -> None:
    for row in read_jsonl(out / "app_outputs.jsonl"):
        assert row["retrieved_ids"] == ids and row["retrieved_scores"] == scores


HOSTILE: dict[str, Hostile] = {
    # An async app that blocks its event loop (defect 6): the timeout holds.
    "async app sleeping in time.sleep": Hostile(
        "async def app(q):\n    time.sleep(3)\n    return OK\n", both("Timeout")
    ),
    "async app spinning forever": Hostile(
        "async def app(q):\n    while True:\n        pass\n",
        both("Timeout"),
        margin=SPINNING_MARGIN,
    ),
    "sync app spinning forever": Hostile(
        "def app(q):\n    while True:\n        pass\n", both("Timeout"), margin=SPINNING_MARGIN
    ),
    "sync app sleeping": Hostile("def app(q):\n    time.sleep(30)\n", both("Timeout")),
    "async app awaiting forever": Hostile(
        "async def app(q):\n    await asyncio.Event().wait()\n", both("Timeout")
    ),
    # BaseException raised by the app (defect 7): that question's error, at once.
    "sync SystemExit": Hostile(
        "def app(q):\n    raise SystemExit(3)\n", both("SystemExit"), timeout=30
    ),
    "async SystemExit": Hostile(
        "async def app(q):\n    raise SystemExit(3)\n", both("SystemExit"), timeout=30
    ),
    "sync KeyboardInterrupt": Hostile(
        "def app(q):\n    raise KeyboardInterrupt\n", both("KeyboardInterrupt"), timeout=30
    ),
    "async KeyboardInterrupt": Hostile(
        "async def app(q):\n    raise KeyboardInterrupt\n", both("KeyboardInterrupt"), timeout=30
    ),
    "async KeyboardInterrupt in the app's own task": Hostile(
        "async def fail():\n    raise KeyboardInterrupt\n"
        "async def app(q):\n    await asyncio.gather(fail())\n",
        both("KeyboardInterrupt"),
        timeout=30,
    ),
    "async GeneratorExit": Hostile(
        "async def app(q):\n    raise GeneratorExit\n", both("GeneratorExit"), timeout=30
    ),
    "async app raising CancelledError": Hostile(
        "async def app(q):\n    raise asyncio.CancelledError\n", both("CancelledError"), timeout=30
    ),
    "sync app returning a coroutine that raises SystemExit": Hostile(
        "async def later():\n    raise SystemExit(1)\ndef app(q):\n    return later()\n",
        both("SystemExit"),
        timeout=30,
    ),
    # The user's app file (defect 9): exit 2 naming the file, the line and the error.
    "a syntax error": Hostile(
        "def app(q):\n    return {\n", exit_2=("app.py", "line 4", "SyntaxError")
    ),
    "a file that is not UTF-8": Hostile(
        b"def app(q):\n    return {'answer': '\xe9t\xe9', 'contexts': []}\n",
        exit_2=("app.py", "line 4", "utf-8"),
    ),
    "an exception at import": Hostile(
        "raise RuntimeError('no index built')\n",
        exit_2=("app.py", "line 3", "RuntimeError", "no index built"),
    ),
    "SystemExit at import": Hostile(
        "sys.exit('bye')\n", exit_2=("app.py", "line 3", "SystemExit", "bye")
    ),
    "an import of a missing module": Hostile(
        "import no_such_module_here\n",
        exit_2=("app.py", "line 3", "ModuleNotFoundError", "no_such_module_here"),
    ),
    "an openai.py beside the app": Hostile(
        "def app(q):\n    return OK\n",
        both(None),
        files={"openai.py": "raise RuntimeError('the user\\'s openai.py, not the package')\n"},
        judged=True,  # judge's own requests import openai
    ),
    "an openai.py beside the app that the app imports": Hostile(
        "import openai\ndef app(q):\n    return OK\n",
        exit_2=("openai.py", "'openai'", "a package judge uses", "rename the file"),
        files={"openai.py": "NOT_THE_PACKAGE = True\n"},
        judged=True,
    ),
    "sibling modules the app imports, at import and when called": Hostile(
        "from helper import reply\ndef app(q):\n    from later import ids\n"
        "    return {**reply(), 'retrieved_ids': ids()}\n",
        both(None),
        files={
            "helper.py": "def reply():\n    return {'answer': 'a', 'contexts': []}\n",
            "later.py": "def ids():\n    return ['c1']\n",
        },
    ),
    # What the app does to the process (defect 10).
    "os.chdir": Hostile("def app(q):\n    os.chdir('/')\n    return OK\n", both(None)),
    "sys.stdout.close()": Hostile(
        "def app(q):\n    sys.stdout.close()\n    return OK\n",
        both(None),
        check=_the_table_is_printed,
    ),
    "os.close(1)": Hostile(
        "def app(q):\n    try:\n        os.close(1)\n    except OSError:\n        pass\n"
        "    return OK\n",
        both(None),
        check=_the_table_is_printed,
    ),
    "os.close(2)": Hostile(
        "def app(q):\n    try:\n        os.close(2)\n    except OSError:\n        pass\n"
        "    return OK\n",
        both(None),
        check=_the_gates_decide_and_their_words_reach_stderr,
    ),
    "os.close(2) and an error": Hostile(
        "def app(q):\n    try:\n        os.close(2)\n    except OSError:\n        pass\n"
        "    if q.startswith('Where'):\n        raise ValueError('bad')\n    return OK\n",
        {"q1": None, "q2": "ValueError"},
        check=_the_gates_decide_and_their_words_reach_stderr,
    ),
    "os.close(2) with progress lines": Hostile(
        "def app(q):\n    try:\n        os.close(2)\n    except OSError:\n        pass\n"
        "    time.sleep(0.3)\n    return OK\n",
        both(None),
        progress=True,
        check=_the_gates_decide_and_their_words_reach_stderr,
    ),
    "sys.stderr.close() with progress lines": Hostile(
        "def app(q):\n    sys.stderr.close()\n    time.sleep(0.3)\n    return OK\n",
        both(None),
        progress=True,
        check=_the_gates_decide_and_their_words_reach_stderr,
    ),
    "sys.stderr.close()": Hostile(
        "def app(q):\n    sys.stderr.close()\n    return OK\n",
        both(None),
        check=_the_gates_decide_and_their_words_reach_stderr,
    ),
    # Replies outside the contract, and noise.
    "a reply holding an object JSON cannot hold": Hostile(
        "def app(q):\n    return {**OK, 'handle': object()}\n", both("MalformedReply")
    ),
    "a reply holding NaN": Hostile(
        "def app(q):\n    return {**OK, 'confidence': float('nan')}\n", both("MalformedReply")
    ),
    "a reply that is not a mapping": Hostile(
        "def app(q):\n    return None\n", both("MalformedReply")
    ),
    "a gigantic answer": Hostile(
        "def app(q):\n    return {**OK, 'answer': 'x' * 20_000_000}\n",
        both(None),
        timeout=30,
        check=_the_gigantic_answer_is_kept,
    ),
    "threads and a forked child that print": Hostile(
        "def noise():\n    for _ in range(200):\n        print('noise', flush=True)\n"
        "def app(q):\n    threading.Thread(target=noise).start()\n"
        "    if os.fork() == 0:\n        print('child', flush=True)\n        os._exit(0)\n"
        "    return OK\n",
        both(None),
        check=_the_table_is_printed,
    ),
    "an app that changes its input row": Hostile(
        "def app(row):\n    row['relevance'].clear()\n    row['id'] = 'forged'\n"
        "    row['question'] = ''\n    return OK\n",
        both(None),
        check=_the_row_is_kept_as_the_test_set_has_it,
    ),
    "an app writing into the output folder": Hostile(
        "def app(q):\n    out = os.environ['JUDGE_TEST_OUT']\n"
        "    for name in ('app_outputs.jsonl', 'summary.json', 'results.jsonl', 'run.trec'):\n"
        "        with open(os.path.join(out, name), 'w') as f:\n            f.write('junk')\n"
        "    return OK\n",
        both(None),
        check=_the_apps_writes_are_replaced,
    ),
    # A reply that would grade the app itself, or that no file can hold.
    "a reply carrying input columns": Hostile(
        "def app(q):\n    return {'answer': 'a', 'contexts': [], 'retrieved_ids': ['zz'],\n"
        "            'relevance': {'zz': 1}, 'id': 'q1', 'question': 'x', 'ground_truth': 'y'}\n",
        both("MalformedReply"),
    ),
    "a lone surrogate in the answer": Hostile(
        "def app(q):\n    return {**OK, 'answer': 'bad \\ud800'}\n", both("NotUnicode")
    ),
    "a lone surrogate in an exception message": Hostile(
        "def app(q):\n    raise ValueError('bad \\ud800')\n", both("ValueError")
    ),
    "a retrieved id with a newline": Hostile(
        "def app(q):\n    return {**OK, 'retrieved_ids': ['c1\\nq2 0 c1 1']}\n",
        both("UnfitId"),
    ),
    "a retrieved id with a space": Hostile(
        "def app(q):\n    return {**OK, 'retrieved_ids': ['c 1']}\n",
        both("UnfitId"),
    ),
    # Replies and exceptions that fail when judge reads them: that question's error.
    "an exception whose __str__ raises": Hostile(
        "class Unprintable(Exception):\n    def __str__(self):\n        raise RuntimeError\n"
        "def app(q):\n    raise Unprintable()\n",
        both("Unprintable"),
        timeout=30,
    ),
    "async: an exception whose __str__ raises": Hostile(
        "class Unprintable(Exception):\n    def __str__(self):\n        raise RuntimeError\n"
        "async def app(q):\n    raise Unprintable()\n",
        both("Unprintable"),
        timeout=30,
    ),
    "an integer id too long to be text": Hostile(
        "def app(q):\n    return {**OK, 'retrieved_ids': [10**5000]}\n", both("MalformedReply")
    ),
    "a score too large to be a float": Hostile(
        "def app(q):\n    return {**OK, 'retrieved_ids': ['c1'], 'retrieved_scores': [10**400]}\n",
        both("MalformedReply"),
    ),
    "a dict whose items() raises": Hostile(
        "class Reply(dict):\n    def items(self):\n        raise RuntimeError('no items')\n"
        "def app(q):\n    return Reply(OK)\n",
        both("MalformedReply"),
    ),
    "a dict whose __getitem__ raises KeyError": Hostile(
        "class Reply(dict):\n    def __getitem__(self, key):\n        raise KeyError(key)\n"
        "def app(q):\n    return Reply(OK)\n",
        both("MalformedReply"),
    ),
    "a dict whose __contains__ raises": Hostile(
        "class Reply(dict):\n    def __contains__(self, key):\n        raise RuntimeError\n"
        "def app(q):\n    return Reply(OK)\n",
        both("MalformedReply"),
    ),
    "an object whose __getattr__ raises": Hostile(
        "class Reply:\n    def __getattr__(self, name):\n        raise RuntimeError(name)\n"
        "def app(q):\n    return Reply()\n",
        both("MalformedReply"),
    ),
    "an object whose model_dump() raises": Hostile(
        "class Reply:\n    def model_dump(self, mode=None):\n        raise RuntimeError\n"
        "def app(q):\n    return Reply()\n",
        both("MalformedReply"),
    ),
    "an integer id whose __str__ raises": Hostile(
        "class Id(int):\n    def __str__(self):\n        raise RuntimeError\n"
        "def app(q):\n    return {**OK, 'retrieved_ids': [Id(1)]}\n",
        both("MalformedReply"),
    ),
    # What a retriever such as FAISS returns: numpy ids, scores and arrays of them.
    "numpy integer ids and float32 scores": Hostile(
        "import numpy as np\n"
        "def app(q):\n    return {**OK, 'retrieved_ids': [np.int64(1), np.int32(2)],\n"
        "            'retrieved_scores': [np.float32(0.5), np.float64(0.25)]}\n",
        both(None),
        check=lambda out, done: _the_numpy_values_are_plain(out, ["1", "2"], [0.5, 0.25]),
    ),
    "numpy arrays of ids and scores": Hostile(
        "import numpy as np\n"
        "def app(q):\n    return {**OK, 'retrieved_ids': np.array(['c2', 'c1']),\n"
        "            'retrieved_scores': np.array([0.75, 0.5], dtype=np.float32)}\n",
        both(None),
        check=lambda out, done: _the_numpy_values_are_plain(out, ["c2", "c1"], [0.75, 0.5]),
    ),
    "a numpy NaN score": Hostile(
        "import numpy as np\n"
        "def app(q):\n"
        "    return {**OK, 'retrieved_ids': ['c1'], 'retrieved_scores': [np.float32('nan')]}\n",
        both("MalformedReply"),
    ),
    "a reply nested 100,000 deep": Hostile(
        "def app(q):\n    deep = []\n    for _ in range(100_000):\n        deep = [deep]\n"
        "    return {**OK, 'deep': deep}\n",
        both("MalformedReply"),
    ),
}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_app(folder: Path, source: str | bytes, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    body = source if isinstance(source, bytes) else source.encode("utf-8")
    (folder / "app.py").write_bytes(HEADER.encode("utf-8") + body)
    return folder / "app.py"


def write_testset(path: Path) -> Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return path


def assert_retrieval_metrics_are_judge_irs(out: Path) -> None:
    """The invariant of every experiment: summary.json's retrieval metrics are those of
    judge ir on the folder's own qrels.txt and run.trec."""
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    if not (out / "run.trec").exists():
        assert summary["metrics"].get("mrr", {}).get("mean") is None
        return
    shown = run("ir", out / "qrels.txt", out / "run.trec", "--format", "json", "-m", "mrr,ndcg@10")
    assert shown.returncode == 0, shown.stderr
    by_ir = json.loads(shown.stdout)["metrics"]
    for metric in ("mrr", "ndcg@10"):
        assert summary["metrics"][metric]["mean"] == pytest.approx(by_ir[metric], abs=1e-12)


def cases() -> list:
    params = []
    for name, case in HOSTILE.items():
        params.append(pytest.param(case, id=name))
    return params


@pytest.mark.parametrize("case", cases())
def test_a_hostile_app_ends_as_its_questions_error_or_a_clear_exit_2(
    case: Hostile, fake_llm_server: FakeLLMServer, tmp_path
):
    app = write_app(tmp_path / "app", case.source, case.files)
    work = tmp_path / "work"
    work.mkdir()
    write_testset(work / "questions.jsonl")
    out = work / "out"
    env = {**os.environ, "JUDGE_TEST_OUT": str(out)}
    judged: list[str] = []
    if case.judged:
        fake_llm_server.chat = judge_handler
        judged = ["--model", "openai/judge", "--api-base", fake_llm_server.base_url]
        judged += ["--api-key", "k", "--no-cache", "--metrics", "faithfulness,mrr,ndcg@10"]
    started = time.monotonic()
    done = run(
        "experiment",
        "questions.jsonl",  # relative, as --out
        "--app",
        f"{app}:app",
        "--app-timeout",
        str(case.timeout),
        "--out",
        "out",  # relative: resolved once, whatever the app does to the working directory
        *(["--progress-interval", "0.1"] if case.progress else ["--no-progress"]),
        *judged,
        cwd=work,
        env=env,
        timeout=case.timeout + 60,
        # Files beside the app may shadow what judge imports: only a new interpreter has
        # not imported it already.
        fresh=bool(case.files),
    )
    seconds = time.monotonic() - started
    assert done.returncode != 70 and "internal error" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    if case.exit_2:
        assert done.returncode == 2, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        for words in case.exit_2:
            assert words.lower() in last.lower(), last
        assert not (out / "app_outputs.jsonl").exists()
        return
    assert done.returncode in (0, 3), done.stderr
    assert seconds < case.timeout + case.margin, seconds
    if case.timeout > TIMEOUT and any(case.errors.values()):  # an error recorded at once,
        assert seconds < MARGIN, seconds  # not after waiting out the (long) timeout
    rows = read_jsonl(out / "app_outputs.jsonl")
    found = {r["id"]: (r["app_error"] or {}).get("type") for r in rows}
    assert found == case.errors
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    latency = summary["config"]["app"]["latency_s"]
    assert latency["max"] <= case.timeout + 1.0, latency  # true latencies, not queued ones
    assert "recorded run" in done.stderr  # the run is recorded, whatever the app did
    assert_retrieval_metrics_are_judge_irs(out)
    if case.check is not None:
        case.check(out, done)


@pytest.mark.parametrize(
    "body",
    [
        "def app(q):\n    started()\n    time.sleep(60)\n",
        "def app(q):\n    started()\n    while True:\n        pass\n",
        "async def app(q):\n    started()\n    time.sleep(60)\n",
        "async def app(q):\n    started()\n    while True:\n        pass\n",
        "async def app(q):\n    started()\n    await asyncio.sleep(60)\n",
    ],
    ids=["sync sleeping", "sync spinning", "async blocking", "async spinning", "async waiting"],
)
def test_the_users_ctrl_c_still_stops_the_run_whatever_the_app_does(body, tmp_path):
    marker = tmp_path / "started"
    source = f"def started():\n    open({str(marker)!r}, 'a').close()\n{body}"
    app = write_app(tmp_path / "app", source, {})
    data = write_testset(tmp_path / "questions.jsonl")
    command = [sys.executable, "-m", "judge", "experiment", str(data), "--app", f"{app}:app"]
    process = subprocess.Popen(
        [*command, "--app-timeout", "120", "--out", str(tmp_path / "out"), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the app was never called"
            time.sleep(0.05)
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)  # a real Ctrl-C, to the process
        stderr = process.communicate(timeout=MARGIN + 1)[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "judge: interrupted" in stderr


@pytest.mark.parametrize(
    ("signum", "code", "words"),
    [(signal.SIGINT, 130, "judge: interrupted"), (signal.SIGTERM, 143, "judge: terminated")],
    ids=["SIGINT", "SIGTERM"],
)
def test_an_app_that_ignores_signals_at_import_is_still_stopped_by_them(
    signum, code, words, tmp_path
):
    marker = tmp_path / "started"
    source = (
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"def app(q):\n    open({str(marker)!r}, 'a').close()\n    time.sleep(60)\n"
    )
    app = write_app(tmp_path / "app", source, {})
    data = write_testset(tmp_path / "questions.jsonl")
    command = [sys.executable, "-m", "judge", "experiment", str(data), "--app", f"{app}:app"]
    process = subprocess.Popen(
        [*command, "--app-timeout", "120", "--out", str(tmp_path / "out"), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the app was never called"
            time.sleep(0.05)
        time.sleep(0.2)
        process.send_signal(signum)  # the user's, which the app's import turned off
        stderr = process.communicate(timeout=MARGIN + 1)[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == code, stderr
    assert words in stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("model", "said"),
    [
        (["--model", "openai/gpt-4o-mini"], "no API key for OpenAI"),  # no key anywhere
        (["--model", "qwen2.5", "--api-key", "k"], "names no provider litellm knows"),
        (["--model", "openai/judge", "--api-base", "http://127.0.0.1:{port}/v1"], "no server"),
        (["--model", "openai/judge", "--api-base", "{server}", "--api-key", "k"], "refused"),
    ],
    ids=["no API key", "a model litellm cannot route", "no server", "a refused key"],
)
def test_the_judge_is_checked_before_the_app_is_asked(
    model, said, fake_llm_server: FakeLLMServer, tmp_path
):
    fake_llm_server.fail_next(Fault.status(401, "bad key"), path="/v1/models")
    port, server = free_port(), fake_llm_server.base_url
    model = [arg.format(port=port, server=server) for arg in model]
    calls = tmp_path / "calls.txt"
    source = f"def app(q):\n    open({str(calls)!r}, 'a').write(q + '\\n')\n    return OK\n"
    app = write_app(tmp_path / "app", source, {})
    data = write_testset(tmp_path / "questions.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = run(
        "experiment",
        data,
        "--app",
        f"{app}:app",
        *model,
        # metrics the test set can feed (no ground_truth): its check, made first, passes
        "--metrics",
        "faithfulness,mrr",
        "--no-cache",
        "--out",
        tmp_path / "out",
        "--no-progress",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert not calls.exists()  # the app was never asked
    assert not (tmp_path / "out" / "app_outputs.jsonl").exists()


def test_an_app_that_failed_on_every_question_is_reported_as_app_errors(tmp_path):
    app = write_app(tmp_path / "app", "def app(q):\n    raise ValueError('no index')\n", {})
    data = write_testset(tmp_path / "questions.jsonl")
    out = tmp_path / "out"
    done = run(
        "experiment", data, "--app", f"{app}:app", "--out", out, "--no-progress", cwd=tmp_path
    )
    assert done.returncode == 3, done.stderr  # over --max-error-rate, as in judge eval
    assert "need retrieval columns" not in done.stderr
    assert "2 questions (2 asked, 0 answered before); 2 app errors (ValueError 2" in done.stderr
    assert "see app_error in app_outputs.jsonl for why the app failed" in done.stderr
    assert_retrieval_metrics_are_judge_irs(out)


def test_behind_a_loop_the_app_blocks_the_next_questions_fail_at_once(tmp_path):
    async def app(question: str) -> dict:
        if question == "q0?":
            time.sleep(1.5)  # blocks the app's event loop, past the timeout
        return {"answer": "a", "contexts": [], "retrieved_ids": ["c1"]}

    questions = [{"id": f"q{i}", "question": f"q{i}?", "relevance": {"c1": 1}} for i in range(10)]
    started = time.monotonic()
    result = experiment(
        app, questions, out=tmp_path / "out", app_timeout=0.2, app_concurrency=1, progress=False
    )
    seconds = time.monotonic() - started
    # Not 10 timeouts of 0.2 s each behind the blocked loop: the first, then the rest at once.
    assert result.config.app["errors"] == {"Timeout": 1, "AppLoopBlocked": 9}
    assert result.config.app["latency_s"]["max"] < 0.5
    assert seconds < 1.5  # the blocked call itself is not waited for
    rows = read_jsonl(tmp_path / "out" / "app_outputs.jsonl")
    assert "has not run for" in rows[1]["app_error"]["message"]


def test_from_python_an_app_that_changes_the_working_directory_loses_no_answer(
    tmp_path, monkeypatch
):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(work)  # and back after the test, whatever the app did
    write_testset(work / "questions.jsonl")

    def app(question: str) -> dict:
        os.chdir(elsewhere)
        return {"answer": "a", "contexts": [], "retrieved_ids": ["c1"]}

    result = experiment(app, "questions.jsonl", out="out", progress=False)
    assert result.config.app["errors"] == {}
    assert [r["id"] for r in read_jsonl(work / "out" / "app_outputs.jsonl")] == ["q1", "q2"]
    assert not (elsewhere / "out").exists()
    assert_retrieval_metrics_are_judge_irs(work / "out")


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("def app(q):\n    return {\n", "line 2: SyntaxError: '{' was never closed"),
        ("import os\nraise RuntimeError('no index')\n", "line 2: RuntimeError: no index"),
        ("import no_such_module_here\n", "line 1: ModuleNotFoundError: No module named"),
    ],
)
def test_a_module_target_that_cannot_be_imported_names_its_file_and_line(
    source, said, tmp_path, monkeypatch
):
    (tmp_path / "broken_app_module.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AppError) as raised:
        load_target("broken_app_module:app")
    assert "broken_app_module.py, " + said in str(raised.value)
    assert "broken_app_module" not in sys.modules


@pytest.mark.parametrize(
    ("signum", "code", "words"),
    [(signal.SIGINT, 130, "judge: interrupted"), (signal.SIGTERM, 143, "judge: terminated")],
    ids=["SIGINT", "SIGTERM"],
)
def test_an_app_that_signals_its_own_process_stops_the_run_in_one_line(
    signum, code, words, tmp_path
):
    body = (
        "def app(q):\n    if q.startswith('Where'):\n"
        f"        os.kill(os.getpid(), {int(signum)})\n        time.sleep(1)\n    return OK\n"
    )
    app = write_app(tmp_path / "app", body, {})
    data = write_testset(tmp_path / "questions.jsonl")
    done = run(
        "experiment", str(data), "--app", f"{app}:app", "--out", str(tmp_path / "out"),
        "--no-progress", timeout=60,
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert done.stderr.strip().splitlines() == [words + (" (SIGTERM)" if code == 143 else "")]
