"""`judge eval DATA --dry-run` as a user runs it: the table or JSON, exit 0 on usable data
and one `judge: error:` line (exit 2) on data a run could not use, nothing sent or written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from judge.testing import FakeLLMServer
from tests.helpers.cli import dataset, eval_args, rows, run

# The CLI's default metrics with an embedding model, on tests.helpers.cli's rows (answer,
# contexts and ground truth in each): 5 chat requests and 1 embedding request per row.
PER_ROW_CHAT, PER_ROW_EMBED = 5, 1


def dry_args(data: Path, server: FakeLLMServer, tmp: Path, *extra: str) -> list[str]:
    return eval_args(data, server, tmp, "--dry-run", *extra)


def test_good_data_exits_0_sends_nothing_and_writes_nothing(tmp_path, fake_llm_server):
    data = dataset(tmp_path / "data.jsonl", 3)
    code = (
        "import runpy, sys; sys.argv = ['judge', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('judge', run_name='__main__')\n"
        "except SystemExit as e:\n    print('exit', e.code)\n"
        "print('clients', 'litellm' in sys.modules or 'openai' in sys.modules)"
    )
    args = dry_args(data, fake_llm_server, tmp_path, "--embedding-model", "openai/embed")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    out = done.stdout
    assert done.stderr == "" and out.splitlines()[-2:] == ["exit 0", "clients False"], out
    assert fake_llm_server.count() == 0
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache.sqlite").exists()
    assert "dry run of" in out and "no request was made" in out and "usable" in out
    total = next(line for line in out.splitlines() if line.startswith("total"))
    assert total.split()[1:3] == [str(3 * PER_ROW_CHAT), str(3 * PER_ROW_EMBED)]
    for metric in ("faithfulness", "answer_relevancy", "context_precision", "context_recall"):
        assert any(line.startswith(f"{metric} ") and " 3/3 " in line for line in out.splitlines())


def test_json_gives_the_same_figures(tmp_path, fake_llm_server):
    data = dataset(tmp_path / "data.jsonl", 2)
    args = dry_args(data, fake_llm_server, tmp_path, "--format", "json")
    done = run(*args, "--metrics", "faithfulness,context_recall")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["usable"] is True and shown["rows"] == 2 and shown["model"] == "openai/judge"
    # Claims of the answer and of the ground truth, one verify for both, per row.
    assert shown["total"]["chat_requests"] == 2 * 3
    assert shown["total"]["cost"] is None  # a local server's model: no price, never $0
    assert [m["name"] for m in shown["metrics"]] == ["faithfulness", "context_recall"]
    assert fake_llm_server.count() == 0


def test_bad_data_exits_2_with_one_error_line_in_the_commands_words(tmp_path, fake_llm_server):
    data = tmp_path / "bad.jsonl"
    good = rows(2)
    lines = [
        {**good[0], "ground_truth": None},
        {**good[1], "ground_truth": None, "answer": ""},
        {"question": "No contexts here?", "answer": "Fine.", "contexts": "oops"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    done = run(*dry_args(data, fake_llm_server, tmp_path, "--metrics", "context_recall"))
    assert done.returncode == 2
    errors = done.stderr.splitlines()
    assert len(errors) == 1 and errors[0].startswith("judge: error: --dry-run: a run would not")
    assert "context_recall would score no row (2 no_ground_truth, 1 row_error)" in errors[0]
    assert "NOT USABLE: 1 of 3 rows (33.3%) cannot be read, over --max-error-rate" in done.stdout
    assert "--column field=COLUMN" in done.stdout  # the CLI's words, not column_map=
    assert fake_llm_server.count() == 0 and not (tmp_path / "out").exists()


def test_a_named_metric_without_its_embedding_model_says_the_flag(tmp_path, fake_llm_server):
    data = dataset(tmp_path / "data.jsonl", 2)
    done = run(*dry_args(data, fake_llm_server, tmp_path, "--metrics", "answer_relevancy"))
    assert done.returncode == 2
    assert "CANNOT RUN: answer_relevancy needs an embedding model: pass --embedding-model" in (
        done.stdout
    )
    assert done.stderr.count("\n") == 1 and "--embedding-model" in done.stderr
    assert "embeddings=" not in done.stdout + done.stderr
    assert fake_llm_server.count() == 0


def test_without_a_model_the_data_is_still_checked_and_counted(tmp_path):
    data = dataset(tmp_path / "data.jsonl", 2)
    done = run("eval", str(data), "--dry-run", "--metrics", "faithfulness")
    assert done.returncode == 0, done.stderr
    assert "judge model: none given" in done.stdout and "no model" in done.stdout
    assert "no judge model given (--model ...)" in done.stdout


def test_a_context_window_given_refuses_long_rows(tmp_path, fake_llm_server):
    data = dataset(tmp_path / "data.jsonl", 2)
    args = dry_args(data, fake_llm_server, tmp_path, "--metrics", "faithfulness")
    done = run(*args, "--context-window", "100")
    assert done.returncode == 2
    assert "context window 100 tokens" in done.stdout and "over_context_window" in done.stdout
    refused = run(*args, "--context-window", "0").stderr
    assert refused.startswith("judge: error: --context-window must be at least 1, not 0")


def test_format_json_needs_dry_run(tmp_path, fake_llm_server):
    data = dataset(tmp_path / "data.jsonl", 1)
    done = run("eval", str(data), "--model", "openai/x", "--format", "json")
    assert done.returncode == 2 and "--format json goes with --dry-run" in done.stderr
    assert fake_llm_server.count() == 0


def test_a_gate_the_run_would_refuse_is_refused_by_the_dry_run(tmp_path, fake_llm_server):
    """--dry-run said "usable: a run over this data would work" (exit 0) while the run it
    stands for is refused (exit 2) for a gate on a metric it does not compute."""
    data = dataset(tmp_path / "data.jsonl", 2)
    args = dry_args(data, fake_llm_server, tmp_path, "--metrics", "faithfulness")
    done = run(*args, "--gate", "answer_relevancy>=0.5")
    assert done.returncode == 2, done.stdout
    assert "judge: error: a gate names answer_relevancy, which the run does not compute" in (
        done.stderr
    )
    assert run(*args, "--gate", "faithfulness>=0.5").returncode == 0
    assert fake_llm_server.count() == 0
