"""A run's record made from its output folder, and the git state of the folder a run is
made in (a real repository in tmp_path: no commit, clean, dirty, untracked files)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

import judge
from judge.errors import JudgeError
from judge.run.folder import record_folder
from judge.runs.record import git_state
from judge.runs.store import RunStore

ROWS = [
    {
        "id": f"q{i}",
        "question": f"Who created Python? ({i})",
        "answer": "Guido van Rossum created Python.",
        "contexts": ["Python was created by Guido van Rossum."],
        "ground_truth": "Guido van Rossum created Python.",
        "retrieved_ids": ["d1", "d2"],
        "relevance": ["d1"],
    }
    for i in range(3)
]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with no commit yet, inside tmp_path."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    return root


@pytest.fixture
def written_run(tmp_path: Path, models: dict) -> Path:
    """The output folder of a real run: an LLM-judged and a retrieval metric."""
    result = judge.evaluate(
        ROWS, metrics=["faithfulness", "ndcg@10"], llm=models["llm"], cache=None, progress=False
    )
    result.write(tmp_path / "out")
    return tmp_path / "out"


def test_git_state_of_a_repository_clean_then_dirty(repo):
    assert git_state(repo) is None  # no commit yet: nothing to point at
    (repo / "app.py").write_text("x = 1\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-q", "-m", "first")
    head = git(repo, "rev-parse", "HEAD").strip()
    sub = repo / "sub"
    sub.mkdir()
    assert git_state(sub) == {"commit": head, "dirty": False, "root": str(repo.resolve())}
    (repo / "judge-results").mkdir()  # a run's own outputs: untracked, not a change
    (repo / "judge-results" / "summary.json").write_text("{}")
    assert git_state(repo)["dirty"] is False
    (repo / "app.py").write_text("x = 2\n")  # a tracked file changed
    assert git_state(repo) == {"commit": head, "dirty": True, "root": str(repo.resolve())}
    git(repo, "commit", "-q", "-am", "second")
    after = git_state(repo)
    assert after["dirty"] is False and after["commit"] != head and len(after["commit"]) == 40


def test_git_state_outside_a_repository_or_without_git(tmp_path, monkeypatch):
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # whatever holds tmp_path
    assert git_state(outside) is None
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no git program at all
    assert git_state(outside) is None


def test_a_record_holds_what_summary_json_says(written_run, tmp_path, repo):
    (repo / "f").write_text("1")
    git(repo, "add", "f")
    git(repo, "commit", "-q", "-m", "c")
    summary = json.loads((written_run / "summary.json").read_text())
    with RunStore(tmp_path / "runs.sqlite") as store:
        made = record_folder(store, written_run, command="eval", name="first", cwd=repo)
        assert store.runs() == [made]
    config = summary["config"]
    assert made.out_dir == str(written_run.resolve()) and os.path.isabs(made.out_dir)
    assert (made.command, made.name, made.rows) == ("eval", "first", 3)
    assert made.data == config["source"] and made.data_sha256 == config["data"]["sha256"]
    assert len(made.data_sha256) == 64
    assert made.model == "openai/judge-model" and made.embeddings is None
    assert made.prompts == config["prompts"] and made.prompts
    assert made.metrics == ["faithfulness", "ndcg@10"]
    for metric, stats in summary["metrics"].items():
        kept = ("mean", "ci_low", "ci_high", "scored")
        assert made.summary[metric] == {k: stats[k] for k in kept}
    assert made.summary["ndcg@10"]["mean"] == 1.0
    assert made.git is not None and made.git["root"] == str(repo.resolve())
    assert made.app is None and made.tags == [] and made.baseline is False
    assert len(made.id) == 12 and made.created.endswith("Z") and len(made.created) == 20
    # the hash of the results.jsonl it wrote: a later run in the same folder is told apart
    assert made.results_sha256 == summary["results_sha256"]
    assert (
        made.results_sha256
        == hashlib.sha256((written_run / "results.jsonl").read_bytes()).hexdigest()
    )


def test_only_summary_json_is_read(written_run, tmp_path):
    (written_run / "results.jsonl").unlink()  # may be hundreds of megabytes: never needed
    with RunStore(tmp_path / "runs.sqlite") as store:
        assert record_folder(store, written_run, command="merge").rows == 3


def test_an_experiments_app_is_recorded(written_run, tmp_path):
    path = written_run / "summary.json"
    summary = json.loads(path.read_text())
    app = {"target": "app.py:answer", "fingerprint": "f" * 64}
    summary["config"]["app"] = app
    path.write_text(json.dumps(summary))
    with RunStore(tmp_path / "runs.sqlite") as store:
        made = record_folder(store, written_run, command="experiment")
    assert made.app == app and made.command == "experiment"


def test_a_folder_without_a_summary_is_refused(tmp_path):
    with RunStore(tmp_path / "runs.sqlite") as store:
        with pytest.raises(JudgeError, match=r"has no summary\.json: give the output folder"):
            record_folder(store, tmp_path, command="eval")
        (tmp_path / "summary.json").write_text("{not json")
        with pytest.raises(JudgeError, match="is not JSON"):
            record_folder(store, tmp_path, command="eval")
        assert store.runs() == []
