"""`judge eval`, `judge demo` and `judge cache` as a user runs them: subprocesses, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge.cli.demo import demo_dir
from judge.testing import heuristic_judge
from tests.helpers.cli import dataset, eval_args, rows, run

ROOT = Path(__file__).resolve().parents[2]


def test_demo_runs_offline_and_writes_its_outputs(tmp_path):
    code = (
        "import runpy, sys; sys.argv = ['judge', 'demo', '--out', sys.argv[1]]\n"
        "try:\n    runpy.run_module('judge', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "print('litellm' in sys.modules, 'openai' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "demo")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False False"  # pure replay: no clients
    assert "faithfulness" in done.stdout and "95% CI" in done.stdout
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    samples = json.loads((demo_dir() / "samples.json").read_text())["samples"]
    assert summary["rows"] == len(samples) >= 14 and summary["rows_with_errors"] == 0
    rows = [json.loads(x) for x in (tmp_path / "demo" / "results.jsonl").read_text().splitlines()]
    assert [r["row"] for r in rows] == list(range(len(samples)))
    assert [r["id"] for r in rows] == [s["id"] for s in samples]
    report = (tmp_path / "demo" / "report.html").read_text()
    # no server is named (the worst samples' contexts may speak of HTTP status codes)
    assert "<svg" in report and "openai/judge-fixture" in report and "://" not in report


def test_thresholds_set_the_exit_code(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = dataset(tmp_path / "d.jsonl", 3)
    passed = run(*eval_args(data, fake_llm_server, tmp_path, "--fail-under", "context_recall=0.9"))
    assert passed.returncode == 0, passed.stderr
    failed = run(
        *eval_args(
            data,
            fake_llm_server,
            tmp_path,
            "--fail-under",
            "faithfulness=0.9",
            "--fail-under",
            "context_recall=0.5",
        )
    )
    assert failed.returncode == 1
    assert "FAILED threshold: faithfulness = 0.5000 < 0.9" in failed.stderr
    assert "context_recall" not in failed.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["thresholds"]["missed"] == ["faithfulness = 0.5000 < 0.9"]
    for path in [*(tmp_path / "out").iterdir(), *tmp_path.glob("cache.sqlite*")]:
        assert b"sk-cli-secret-123456" not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--fail-under", "faithfulness"], "write it as NAME=VALUE"),
        (["--fail-under", "faithfulness=high"], "needs a number"),
        (["--fail-under", "bleu=0.5"], "a gate names bleu, which the run does not compute"),
        (["--gate", "faithfulness=0.5"], "write a gate as METRIC>=VALUE (a floor)"),
        (["--metrics", "faithfulness,nope"], "unknown metric 'nope'"),
        (["--column", "question"], "write it as NAME=VALUE"),
        (["--replay", "--no-cache"], "not allowed with argument"),
        (["--embedding-api-base", "http://127.0.0.1:9/v1"], "needs --embedding-model"),
    ],
)
def test_usage_errors_exit_2(tmp_path, fake_llm_server, extra, message):
    fake_llm_server.chat = heuristic_judge
    done = run(*eval_args(dataset(tmp_path / "d.jsonl", 1), fake_llm_server, tmp_path, *extra))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_input_errors_exit_2_before_any_call(tmp_path, fake_llm_server):
    cache = ["--cache", str(tmp_path / "c.sqlite")]
    missing = run("eval", tmp_path / "none.jsonl", "--model", "openai/m", "--out", tmp_path, *cache)
    assert missing.returncode == 2 and "no such file" in missing.stderr
    no_model = run("eval", dataset(tmp_path / "d.jsonl", 1), "--out", tmp_path, *cache)
    assert no_model.returncode == 2 and "--model is required" in no_model.stderr
    assert fake_llm_server.count() == 0


def test_replay_makes_no_request_and_reports_misses(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = dataset(tmp_path / "d.jsonl", 2)
    assert run(*eval_args(data, fake_llm_server, tmp_path)).returncode == 0
    made = fake_llm_server.count()
    again = run(*eval_args(data, fake_llm_server, tmp_path, "--replay"))
    assert again.returncode == 0 and fake_llm_server.count() == made
    other = dataset(tmp_path / "other.jsonl", 3)  # row 2 was never recorded
    missed = run(*eval_args(other, fake_llm_server, tmp_path, "--replay"))
    assert fake_llm_server.count() == made
    rows = [json.loads(x) for x in (tmp_path / "out/results.jsonl").read_text().splitlines()]
    assert rows[2]["reasons"]["faithfulness"] == "judge_error"
    assert "CacheMiss" in rows[2]["errors"]["faithfulness"] and not rows[1]["errors"]
    assert "1 with errors" in missed.stdout


def test_cache_export_import_stats(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    assert (
        run(*eval_args(dataset(tmp_path / "d.jsonl", 2), fake_llm_server, tmp_path)).returncode == 0
    )
    exported = run("cache", "export", tmp_path / "cache.sqlite", tmp_path / "j.jsonl")
    assert exported.returncode == 0 and "exported" in exported.stdout
    imported = run("cache", "import", tmp_path / "new.sqlite", tmp_path / "j.jsonl")
    assert imported.returncode == 0
    stats = json.loads(run("cache", "stats", tmp_path / "new.sqlite").stdout)
    # per row: claims of the answer and of the ground truth, verify, grading
    assert stats["by_kind"]["chat"] == 2 * 4 and stats["entries"] == len(
        (tmp_path / "j.jsonl").read_text().splitlines()
    )
    assert run("cache", "import", tmp_path / "x.sqlite", tmp_path / "none.jsonl").returncode == 2


def test_killed_run_resumes_and_loses_nothing(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    fake_llm_server.latency = 0.05
    data = dataset(tmp_path / "d.jsonl", 24)
    whole = run(*eval_args(data, fake_llm_server, tmp_path / "whole", "--concurrency", "2"))
    assert whole.returncode == 0, whole.stderr
    full_requests = fake_llm_server.count()
    fake_llm_server.reset()
    args = eval_args(data, fake_llm_server, tmp_path / "killed", "--concurrency", "2")
    checkpoint = tmp_path / "killed" / "out" / ".checkpoint.jsonl"
    for _ in range(5):  # kill -9 five times in a row, at a different point each time
        process = subprocess.Popen(
            [sys.executable, "-m", "judge", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        start = len(checkpoint.read_text().splitlines()) if checkpoint.exists() else 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = len(checkpoint.read_text().splitlines()) if checkpoint.exists() else 0
            if done >= start + 3 or process.poll() is not None:
                break
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    final = run(*args)
    assert final.returncode == 0, final.stderr
    result = [
        json.loads(x) for x in (tmp_path / "killed/out/results.jsonl").read_text().splitlines()
    ]
    expected = [
        json.loads(x) for x in (tmp_path / "whole/out/results.jsonl").read_text().splitlines()
    ]
    assert [r["row"] for r in result] == list(range(24))
    assert [r["scores"] for r in result] == [r["scores"] for r in expected]
    assert not checkpoint.exists()  # removed once results.jsonl is complete
    # Work done before a kill was not done again: far fewer requests than a run from scratch.
    # At most the requests in flight at each kill (concurrency 2) are made twice.
    assert fake_llm_server.count() <= full_requests + 5 * 2, (
        fake_llm_server.count(),
        full_requests,
    )


def _rows_as(path: Path, names: dict[str, str], drop: tuple[str, ...] = ()) -> Path:
    """tests.helpers.cli's rows with their columns renamed (field -> column) or dropped."""
    with path.open("w", encoding="utf-8") as out:
        for record in json.loads(json.dumps(rows(2))):
            kept = {names.get(k, k): v for k, v in record.items() if k not in drop}
            out.write(json.dumps(kept) + "\n")
    return path


def test_columns_it_does_not_know_are_refused_not_a_green_run(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    renamed = {"question": "query", "answer": "response", "contexts": "docs"}
    data = _rows_as(tmp_path / "d.jsonl", {**renamed, "ground_truth": "reference"}, ("id",))
    done = run(*eval_args(data, fake_llm_server, tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    error = done.stderr.splitlines()[-1]
    assert error.startswith("judge: error: ") and "Traceback" not in done.stderr
    for metric in ("faithfulness", "context_precision", "context_recall"):
        assert metric in error
    assert "columns: query, response, reference, docs" in error, error
    assert "--column contexts=docs" in error and "column_map" not in error
    assert fake_llm_server.count() == 0 and not (tmp_path / "out" / "summary.json").exists()
    for executor in (["--processes", "2"], ["--ray"]):  # refused before they start
        other = run(*eval_args(data, fake_llm_server, tmp_path, *executor))
        assert other.returncode == 2 and other.stderr.splitlines()[-1] == error, other.stderr
    # The mapping it suggests makes the run work.
    mapped = run(*eval_args(data, fake_llm_server, tmp_path, "--column", "contexts=docs"))
    assert mapped.returncode == 0, mapped.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert all(m["scored"] == 2 for m in summary["metrics"].values()), summary["metrics"]


def test_a_named_metric_no_row_can_score_is_refused_naming_it(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = _rows_as(tmp_path / "d.jsonl", {}, ("ground_truth",))
    args = eval_args(data, fake_llm_server, tmp_path, "--metrics", "faithfulness,context_recall")
    done = run(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    error = done.stderr.splitlines()[-1]
    assert "context_recall would score no row (2 no_ground_truth)" in error, error
    assert "faithfulness" not in error.partition(" would score no row")[0]  # it scores
    assert "--column ground_truth=COLUMN, or leave it out (--metrics faithfulness)" in error
    assert fake_llm_server.count() == 0
    # What --dry-run says of the same data and metrics: the same problem.
    dry = run(*args, "--dry-run")
    assert dry.returncode == 2 and error.partition(f"{data}: ")[2] in dry.stdout, dry.stdout


def test_paths_are_printed_escaped_and_suggested_commands_quoted(tmp_path):
    from tests.helpers.traces import rag_request

    data = tmp_path / "rows.jsonl"
    data.write_text(
        '{"question": "q1", "retrieved_ids": ["a", "b"], "relevance": {"b": 1}}\n'
        '{"question": "q2", "retrieved_ids": ["c"], "relevance": {"c": 1}}\n',
        encoding="utf-8",
    )
    out = tmp_path / "o\x1b]0;T\x07"
    done = run("eval", data, "--metrics", "mrr", "--out", out, "--no-record")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr
    assert "o\\u001b]0;T\\u0007/results.jsonl" in done.stdout

    traces = tmp_path / "tr\x1b[31m x.jsonl"
    lonely = {  # a trace of one span that is no RAG step: skipped
        "resourceSpans": [
            {"scopeSpans": [{"spans": [{"traceId": "9" * 32, "spanId": "9" * 16, "name": "x"}]}]}
        ]
    }
    traces.write_text(
        json.dumps(rag_request(1)) + "\n" + json.dumps(lonely) + "\n", encoding="utf-8"
    )
    done = run("eval", traces, "--metrics", "mrr", "--out", tmp_path / "t", "--no-record")
    assert "skipped" in done.stderr, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    escaped = str(tmp_path / "tr\\u001b[31m x.jsonl")
    assert f"judge traces extract '{escaped}' -o rows.jsonl" in done.stderr


def test_a_path_that_is_no_regular_file_says_what_it_is(tmp_path):
    folder = tmp_path / "x.jsonl"
    folder.mkdir()
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    for path, what in ((folder, "is a folder"), (fifo, "is not a regular file")):
        for args in (
            ["eval", path, "--metrics", "mrr", "--out", tmp_path / "o"],
            ["traces", "extract", path, "-o", tmp_path / "rows.jsonl"],
        ):
            done = run(*args, timeout=60)
            assert done.returncode == 2, done.stderr
            assert what in done.stderr and "no such" not in done.stderr, done.stderr


def test_a_jsonl_of_blank_lines_has_no_rows_and_is_no_trace_file(tmp_path):
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n  \n", encoding="utf-8")
    done = run("eval", blank, "--metrics", "mrr", "--out", tmp_path / "o")
    assert done.returncode == 2 and "no rows to evaluate" in done.stderr, done.stderr
    assert "trace" not in done.stderr


def test_a_csv_parser_error_is_one_line(tmp_path):
    data = tmp_path / "bad.csv"
    data.write_text("question,answer\na,b\nc,d,e,f\n", encoding="utf-8")
    done = run("eval", data, "--metrics", "mrr", "--out", tmp_path / "o")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "ParserError" in line and line.endswith(")"), line


@pytest.mark.parametrize("name", ["results.jsonl", "summary.json"])
def test_an_output_never_replaces_the_data_file(tmp_path, fake_llm_server, name):
    out = tmp_path / "out"
    out.mkdir()
    data = out / name
    row = {"question": "a", "retrieved_ids": ["d1"], "relevance": {"d1": 1}}
    text = json.dumps([row]) if name.endswith(".json") else json.dumps(row) + "\n"
    data.write_text(text, encoding="utf-8")
    before = data.read_bytes()
    done = run("eval", data, "--metrics", "mrr", "--out", out, "--no-progress")
    assert done.returncode == 2, done.stdout + done.stderr
    assert str(data) in done.stderr and "another folder" in done.stderr, done.stderr
    assert data.read_bytes() == before and sorted(p.name for p in out.iterdir()) == [name]
    # The same file under another name (a link) is the same file.
    linked = tmp_path / "linked.jsonl"
    os.link(data, linked)
    done = run("eval", linked, "--metrics", "mrr", "--out", out, "--no-progress")
    assert done.returncode == 2 and str(linked) in done.stderr, done.stderr
    assert data.read_bytes() == before


def test_judged_rows_with_no_score_at_all_never_exit_0(tmp_path, fake_llm_server):
    # Every judge reply unusable: each row judged, none scored. --max-error-rate 1 lets
    # any share of failed judges pass, but a metric without a single score is no result.
    fake_llm_server.chat = lambda body: "no JSON"
    data = dataset(tmp_path / "d.jsonl", 2)
    done = run(
        *eval_args(data, fake_llm_server, tmp_path, "--metrics", "faithfulness"),
        "--max-error-rate",
        "1",
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no row was scored for faithfulness" in done.stderr, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["no_scores"] == {"metrics": ["faithfulness"], "failed": True}
