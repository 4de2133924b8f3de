"""Seed 004 section 4, end to end on the command line against the fake server: build a
golden test set from a corpus, run a baseline app and a reranking app on it
(`judge experiment`), compare them (`judge compare`), and see the runs (`judge view`)."""

from __future__ import annotations

import json

from judge.cli.main import main
from judge.ir import read_qrels, read_run
from judge.testing import FakeLLMServer
from tests.helpers.judging import judge_handler
from tests.helpers.testset import Script, cli_args, write_corpus

# The app of the test: word-overlap retrieval over the test set's chunks (chunks.jsonl),
# the answer the best chunk's first sentence; `rerank` reverses the baseline's top 3, so
# it is worse whenever the baseline ranks a relevant chunk first.
APP = """
import json, os, re
from pathlib import Path

FOLDER = Path(os.environ["JUDGE_TEST_SET"])
CHUNKS = [json.loads(line) for line in (FOLDER / "chunks.jsonl").open(encoding="utf-8")]

def words(text):
    return set(re.findall(r"\\w+", text.lower()))

def ranked(question):
    asked = words(question)
    return sorted(CHUNKS, key=lambda c: (-len(asked & words(c["text"])), c["chunk_id"]))[:3]

def reply(chunks):
    return {
        "answer": chunks[0]["text"].split(". ")[0],
        "contexts": [c["text"] for c in chunks],
        "retrieved_ids": [c["chunk_id"] for c in chunks],
    }

def baseline(question):
    return reply(ranked(question))

def rerank(question):
    return reply(ranked(question)[::-1])
"""


def test_build_a_test_set_run_two_apps_compare_and_view(tmp_path, capsys, monkeypatch):
    corpus = write_corpus(tmp_path / "docs")
    testset = tmp_path / "testset"
    with FakeLLMServer(chat=Script()) as server:
        assert main(cli_args(server, corpus, testset, "-n", "6", "--seed", "3")) == 0
    (tmp_path / "rag_app.py").write_text(APP, encoding="utf-8")
    monkeypatch.setenv("JUDGE_TEST_SET", str(testset))
    capsys.readouterr()
    with FakeLLMServer(chat=judge_handler) as server:
        for name in ("baseline", "rerank"):
            code = main(
                [
                    "experiment", str(testset), "--app", f"{tmp_path / 'rag_app.py'}:{name}",
                    "--model", "openai/judge", "--api-base", server.base_url, "--api-key", "k",
                    "--cache", str(tmp_path / "cache.sqlite"), "--out", str(tmp_path / name),
                    "--no-progress", "--max-error-rate", "1", "--name", name,
                ]
            )  # fmt: skip
            assert code == 0, capsys.readouterr().err
    items = [json.loads(line) for line in (testset / "testset.jsonl").open(encoding="utf-8")]
    outputs = [
        json.loads(line)
        for line in (tmp_path / "baseline" / "app_outputs.jsonl").open(encoding="utf-8")
    ]
    assert [o["id"] for o in outputs] == [i["id"] for i in items]
    assert all(o["app_error"] is None for o in outputs)
    # The retrieval metrics were scored against the test set's own pooled labels.
    assert read_qrels(tmp_path / "baseline" / "qrels.txt") == read_qrels(testset / "qrels.txt")
    run = read_run(tmp_path / "baseline" / "run.trec")
    assert set(run) == {i["id"] for i in items}  # unanswerable ones too: no label, NaN
    assert set(read_qrels(testset / "qrels.txt")) < set(run)
    summaries = {
        name: json.loads((tmp_path / name / "summary.json").read_text(encoding="utf-8"))
        for name in ("baseline", "rerank")
    }
    for summary in summaries.values():
        assert {"faithfulness", "mrr", "ndcg@10"} <= set(summary["metrics"])
    assert (
        summaries["rerank"]["metrics"]["mrr"]["mean"]
        < summaries["baseline"]["metrics"]["mrr"]["mean"]
    )
    capsys.readouterr()
    # Both experiments are in the run store, with their apps; the baseline is pinned.
    assert main(["runs", "list", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    runs = [(r["name"], r["command"]) for r in records]
    assert runs == [("baseline", "experiment"), ("rerank", "experiment")]
    assert records[1]["app"]["target"].endswith("rag_app.py:rerank")
    assert records[1]["out_dir"] == str((tmp_path / "rerank").resolve())
    assert main(["runs", "baseline", records[0]["id"]]) == 0
    # Compared by the names the store knows them by.
    assert main(["compare", "baseline", "rerank", "--out", str(tmp_path / "compare")]) == 0
    comparison = json.loads((tmp_path / "compare" / "comparison.json").read_text(encoding="utf-8"))
    assert comparison["matched"] == len(items)
    assert comparison["metrics"]["mrr"]["delta"] < 0
    assert main(["view", "--out", str(tmp_path / "view")]) == 0
    page = (tmp_path / "view" / "data.js").read_text(encoding="utf-8")
    assert records[0]["id"] in page and records[1]["id"] in page
    assert (tmp_path / "view" / "assets" / "chart.umd.js").is_file()
