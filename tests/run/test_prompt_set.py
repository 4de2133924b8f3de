"""A prompt set (`judge eval --prompts DIR`, `judge.evaluate(prompts=...)`): its files replace
the built-in prompts of their names, and each file's hash is its version, so the run's
fingerprint, its summary and its cache keys change with the file."""

from __future__ import annotations

import json
import re

import pytest

import judge
from judge.json_values import sha256_hex
from judge.metrics.prompts import PromptError, load_prompt, load_prompt_set
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import dataset, eval_args, rows, run
from tests.helpers.prompt_sets import MARK, edited_verify, verify_systems


def test_a_set_replaces_only_its_files_and_versions_them_by_hash(tmp_path):
    folder = edited_verify(tmp_path / "set")
    (folder / "prompt-set.json").write_text("{}")  # not a prompt: not read
    prompts = load_prompt_set(folder)
    builtin = load_prompt("verify")
    text = (folder / "verify.txt").read_text(encoding="utf-8")
    assert prompts["verify"].version == sha256_hex(text)[:16] != builtin.version
    assert prompts["verify"].name == "verify" and MARK in prompts["verify"].system
    assert prompts["claims"] == load_prompt("claims")


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: None, "holds no prompt file"),
        (
            lambda d: (d / "verfy.txt").write_text("<<<system>>>\nx\n<<<user>>>\n{{claims}}"),
            "verfy.txt replaces no built-in",
        ),
        (
            lambda d: (d / "verify.txt").write_text("<<<system>>>\nx\n<<<user>>>\n{{claims}}"),
            "exactly the variables the verify judge fills (claims, contexts)",
        ),
    ],
)
def test_a_set_that_cannot_be_used_is_refused(tmp_path, make, says):
    folder = tmp_path / "set"
    folder.mkdir()
    make(folder)
    with pytest.raises(PromptError, match=re.escape(says)):
        load_prompt_set(folder)
    with pytest.raises(PromptError, match="is not a folder"):
        load_prompt_set(tmp_path / "missing")


def test_eval_with_a_changed_prompt_file_changes_its_version_fingerprint_and_cache_key(tmp_path):
    data = dataset(tmp_path / "data.jsonl", 3)
    folder = edited_verify(tmp_path / "set")
    with FakeLLMServer(chat=heuristic_judge) as server:
        base = run(*eval_args(data, server, tmp_path, "--metrics", "faithfulness"))
        assert base.returncode == 0, base.stderr
        before = json.loads((tmp_path / "out" / "summary.json").read_text())["config"]
        assert "prompt_set" not in before  # an ordinary run's summary is as it was
        assert not any(MARK in s for s in verify_systems(server))
        server.requests.clear()

        args = eval_args(data, server, tmp_path, "--metrics", "faithfulness", "--prompts", folder)
        tuned = run(*args)
        assert tuned.returncode == 0, tuned.stderr
        after = json.loads((tmp_path / "out" / "summary.json").read_text())["config"]
        # The same cache: the claims are served from it, the verify judgments are not (the
        # prompt's version is part of their key), and each is asked with the set's prompt.
        systems = verify_systems(server)
        assert len(systems) == 3 and all(MARK in s for s in systems)
        assert not any(
            "You split one text" in r.body["messages"][0]["content"] for r in server.requests
        )
        assert after["prompt_set"] == str(folder)
        assert after["prompts"]["verify"] == load_prompt_set(folder)["verify"].version
        assert after["prompts"]["verify"] != before["prompts"]["verify"]
        assert after["prompts"]["claims"] == before["prompts"]["claims"]
        assert after["run"] != before["run"]

        # Another edit of the file: another version, asked again.
        server.requests.clear()
        edited_verify(folder, MARK + " Twice.")
        again = run(*args)
        assert again.returncode == 0, again.stderr
        assert len(verify_systems(server)) == 3
        final = json.loads((tmp_path / "out" / "summary.json").read_text())["config"]
        assert final["prompts"]["verify"] not in (
            after["prompts"]["verify"],
            before["prompts"]["verify"],
        )


def test_evaluate_takes_a_prompt_set_and_a_bad_one_fails_before_any_request(tmp_path):
    folder = edited_verify(tmp_path / "set")
    with FakeLLMServer(chat=heuristic_judge) as server:
        llm = judge.LLM("openai/judge", api_base=server.base_url, api_key="k")
        result = judge.evaluate(
            rows(2), metrics=["faithfulness"], llm=llm, prompts=folder, progress=False
        )
        assert result.config["prompt_set"] == str(folder)
        assert len(verify_systems(server)) == 2
        server.requests.clear()
        bad = tmp_path / "bad"
        bad.mkdir()
        (bad / "claim.txt").write_text("<<<system>>>\nx\n<<<user>>>\n{{text}}")
        with pytest.raises(PromptError, match=r"claim\.txt replaces no built-in"):
            judge.evaluate(rows(2), metrics=["faithfulness"], llm=llm, prompts=bad, progress=False)
        assert server.requests == []
        refused = run(*eval_args(tmp_path / "x.jsonl", server, tmp_path, "--prompts", bad))
        assert refused.returncode == 2 and "claim.txt replaces no built-in" in refused.stderr


def test_processes_judge_every_shard_with_the_set_and_record_it(tmp_path):
    data = dataset(tmp_path / "data.jsonl", 4)
    folder = edited_verify(tmp_path / "set")
    with FakeLLMServer(chat=heuristic_judge) as server:
        args = eval_args(data, server, tmp_path, "--metrics", "faithfulness")
        done = run(*args, "--prompts", folder, "--processes", "2")
        assert done.returncode == 0, done.stderr
        systems = verify_systems(server)
        assert len(systems) == 4 and all(MARK in s for s in systems)
    config = json.loads((tmp_path / "out" / "summary.json").read_text())["config"]
    assert config["prompt_set"] == str(folder)
    assert config["prompts"]["verify"] == load_prompt_set(folder)["verify"].version
