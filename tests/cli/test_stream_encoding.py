"""`judge` on a stdout and stderr that cannot encode every character (a latin-1 or ASCII
locale, a Windows pipe in cp1252): the result is printed all the same, in characters the
stream has, and the exit code is the command's own (0, or 1 for a missed gate), never 70.

Each run is a new interpreter (PYTHONIOENCODING is read at start), its output read as
bytes in the stream's encoding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge.runs.store import RunStore
from judge.testing import FakeLLMServer
from tests.helpers import apps
from tests.helpers.cli import run
from tests.helpers.judging import judge_handler

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def judge(
    *args: object, encoding: str = "latin-1", cwd: Path | None = None
) -> tuple[int, str, str]:
    """`python -m judge ARGS` with stdout and stderr in `encoding`: (exit code, stdout,
    stderr), both decoded strictly in that encoding (a byte it cannot hold fails)."""
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    env.pop("PYTHONUTF8", None)
    done = subprocess.run(
        [sys.executable, "-m", "judge", *map(str, args)],
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
    return done.returncode, done.stdout.decode(encoding), done.stderr.decode(encoding)


@pytest.fixture
def replay(tmp_path: Path) -> list[str]:
    """`judge eval` flags replaying examples/judgments.jsonl (cache-and-replay.md's recipe):
    no model is asked. Its table has an undefined cell (the NaN column's en dash)."""
    cache = tmp_path / "rec.sqlite"
    done = run("cache", "import", cache, EXAMPLES / "judgments.jsonl")
    assert done.returncode == 0, done.stderr
    return [
        "eval",
        str(EXAMPLES / "data.jsonl"),
        "--model",
        "openai/judge-fixture",
        "--cache-as",
        "judge-fixture",
        "--cache",
        str(cache),
        "--replay",
        "--metrics-module",
        str(EXAMPLES / "domain_accuracy.py"),
        "--metrics-module",
        str(EXAMPLES / "rubric.py"),
        "--metrics",
        "domain_accuracy,support_tone",
        "--no-progress",
    ]


@pytest.mark.parametrize("encoding", ["latin-1", "ascii", "cp1252"])
def test_eval_prints_its_table_on_a_stream_that_cannot_encode_it(replay, tmp_path, encoding):
    code, out, err = judge(*replay, "--no-record", "--out", tmp_path / "out", encoding=encoding)
    assert code == 0, err
    assert "internal error" not in err and "Traceback" not in err
    utf8 = run(*replay, "--no-record", "--out", tmp_path / "utf8")
    assert utf8.returncode == 0 and "–" in utf8.stdout  # the character this stream lacks
    # The same table, each character the stream lacks in ASCII: a column keeps its width.
    fallback = utf8.stdout.replace("–", "-") if encoding != "cp1252" else utf8.stdout
    assert out == fallback.replace("utf8/", "out/")
    assert (tmp_path / "out" / "results.jsonl").read_bytes() == (
        tmp_path / "utf8" / "results.jsonl"
    ).read_bytes()


def test_a_missed_gate_exits_1_and_the_run_is_recorded(replay, tmp_path, run_store):
    code, _, err = judge(*replay, "--gate", "domain_accuracy>=0.9", "--out", tmp_path / "out")
    assert code == 1, err
    assert "domain_accuracy" in err and "0.9" in err  # the gate's verdict is said
    assert "internal error" not in err
    assert [Path(r.out_dir).name for r in RunStore(run_store).runs()] == ["out"]


def test_compare_prints_delta_and_arrows_on_a_latin_1_stream():
    args = ["compare", EXAMPLES / "run_dense.txt", EXAMPLES / "run_rerank.txt"]
    args += ["--qrels", EXAMPLES / "qrels.txt", "-k", "5"]
    code, out, err = judge(*args)
    assert code == 0, err
    head = out.splitlines()[0]
    assert head.split() == ["metric", "A", "B", "d", "95%", "CI", "of", "d", "p", "p_holm", "W/T/L"]
    utf8 = run(*args)
    assert len(head) == len(utf8.stdout.splitlines()[0])  # the columns line up as in UTF-8
    assert "+0.375^" in out  # ↑


def test_json_stays_json_of_the_same_values_on_an_ascii_stream(replay, tmp_path):
    """Machine-readable output is never given a look-alike: each character the stream
    lacks is JSON's own escape of it, so the document parses to the same values."""
    args = ["compare", EXAMPLES / "run_dense.txt", EXAMPLES / "run_rerank.txt"]
    args += ["--qrels", EXAMPLES / "qrels.txt", "-k", "5", "--format", "json"]
    code, out, err = judge(*args, encoding="ascii")
    assert code == 0, err
    assert json.loads(out) == json.loads(run(*args).stdout)
    # A dry run's JSON holds the user's words: a file named in characters ASCII lacks.
    data = tmp_path / "d \u2013 \u0394 \U0001f600.jsonl"
    data.write_text(
        '{"id": "a", "question": "q", "answer": "a", "retrieved_ids": ["x"], '
        '"relevance": {"x": 1}}\n',
        encoding="utf-8",
    )
    dry = ["eval", data.name, "--metrics", "ndcg@10", "--dry-run", "--format", "json"]
    code, out, err = judge(*dry, encoding="ascii", cwd=tmp_path)
    expected = run(*dry, cwd=tmp_path)
    assert code == expected.returncode == 0, (err, expected.stderr)
    assert json.loads(out) == json.loads(expected.stdout)
    assert json.loads(out)["source"] == data.name


@pytest.fixture
def server(fake_llm_server: FakeLLMServer) -> FakeLLMServer:
    fake_llm_server.chat = judge_handler
    return fake_llm_server


def test_experiment_finishes_on_a_latin_1_stream(server, tmp_path, run_store):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(json.dumps({**q, "id": f"q{i}"}) + "\n" for i, q in enumerate(apps.QUESTIONS)),
        encoding="utf-8",
    )
    out = tmp_path / "exp"
    code, _, err = judge(
        "experiment",
        questions,
        "--app",
        f"{apps.__file__}:answer",
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "k",
        "--no-cache",
        "--out",
        out,
        "--no-progress",
    )
    assert code == 0, err
    assert "internal error" not in err
    assert not (out / ".app_outputs.jsonl").exists()  # moved to app_outputs.jsonl
    assert (out / "app_outputs.jsonl").exists() and (out / "summary.json").exists()
    assert [Path(r.out_dir).name for r in RunStore(run_store).runs()] == ["exp"]
