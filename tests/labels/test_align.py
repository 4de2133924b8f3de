"""`judge align` against the loopback fake judge: a judge that agrees with people only when it
is shown examples is tuned by them, measured on held-out rows only, and no held-out row ever
reaches a prompt as an example (checked in the prompts the fake server received)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from judge.labels.align import (
    AlignError,
    align,
    examples_block,
    split_rows,
    with_examples,
)
from judge.metrics.prompts import load_prompt, load_prompt_set, parse_prompt, prompts_dir
from judge.testing import FakeLLMServer
from judge.testing.replies import data_blocks
from tests.helpers.align import (
    CANARIES,
    example_markers,
    fake_judge,
    labelled,
    markers,
    shown_a_person,
)
from tests.helpers.cli import run


def test_split_is_stratified_seeded_and_disjoint():
    labels = np.array([1.0] * 14 + [0.0] * 6)
    split = split_rows(labels, 0.3, seed=3)
    assert split == split_rows(labels, 0.3, seed=3)
    assert split != split_rows(labels, 0.3, seed=4)
    assert sorted(split.tune + split.held_out) == list(range(20))
    held = labels[split.held_out]
    assert (held == 1).sum() == 4 and (held == 0).sum() == 2  # round(0.3 * 14), 0.3 * 6
    # Groups are split whole, stratified by their labels.
    pairs = np.array([1.0, 0.0] * 10)
    grouped = split_rows(pairs, 0.3, seed=0, groups=[f"q{i // 2}" for i in range(20)])
    assert len(grouped.held_out) == 6  # three of the ten questions
    assert all(i ^ 1 in grouped.held_out for i in grouped.held_out)
    # A label with two rows still gives one to each split.
    assert len(split_rows(np.array([1.0, 1.0, 0.0, 0.0]), 0.1, seed=0).held_out) == 2


def test_examples_tune_the_judge_and_no_held_out_row_is_ever_an_example(tmp_path):
    rows = labelled(60)
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        result = align(
            rows,
            metric="faithfulness",
            label="human",
            llm=llm,
            out=tmp_path / "aligned",
            cache=tmp_path / "cache.sqlite",
            progress=False,
        )
        shown = example_markers(server)
    held, tune = set(result.split.held_out), set(result.split.tune)
    assert len(held) == 18 and not held & tune
    # Every tune row the judge got wrong is an unfaithful one it called faithful.
    assert result.disagreements and set(result.disagreements) <= tune
    assert all(rows[i]["human"] == 0 for i in result.disagreements)
    # The prompts the server received: examples of tune rows only, never of a held-out row.
    assert shown and shown <= set(result.disagreements)
    assert not shown & held
    names = [c.name for c in result.candidates]
    assert names == ["built-in", "examples-4", "examples-8"]
    before, after = result.candidate("built-in"), result.candidate("examples-4")
    assert before.measures["balanced_accuracy@0.5"].value == pytest.approx(0.5)
    assert after.measures["balanced_accuracy@0.5"].value == pytest.approx(1.0)
    assert after.measures["kappa@0.5"].value == pytest.approx(1.0)
    assert after.examples == result.disagreements[:4]
    versus = after.versus_built_in
    assert versus is not None and versus.rows == 18 and not versus.within_noise
    assert versus.balanced_accuracy.ci_low > 0 and versus.p_value < 0.01
    assert after.prompt_chars_per_row > before.prompt_chars_per_row
    assert before.judgments_per_row == pytest.approx(2.0)  # claims, then verify
    # Ties go to the cheaper prompt: four examples are as good as eight.
    assert result.chosen == "examples-4"

    # The prompt set: its verify.txt holds the chosen examples, by content, and no more.
    folder = tmp_path / "aligned" / "prompts"
    prompts = load_prompt_set(folder)
    assert prompts["verify"].version != load_prompt("verify").version
    assert prompts["claims"] == load_prompt("claims")
    written = (folder / "verify.txt").read_text(encoding="utf-8")
    assert markers(written) == set(result.disagreements[:4])
    manifest = json.loads((folder / "prompt-set.json").read_text())
    assert manifest["prompts"]["verify"] == prompts["verify"].version
    assert manifest["held_out_rows"] == result.split.held_out
    report = json.loads(json.dumps(result.to_dict()))
    assert report["chosen"] == "examples-4" and report["split"]["held_out"] == result.split.held_out
    assert "within noise" not in result.table() and "beyond noise" in result.table()


def test_a_small_held_out_split_says_the_gain_is_within_noise(tmp_path):
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        result = align(
            labelled(20),
            metric="faithfulness",
            label="human",
            llm=llm,
            out=tmp_path / "aligned",
            examples=[2],
            progress=False,
        )
    after = result.candidate("examples-2")
    assert after.measures["balanced_accuracy@0.5"].value == pytest.approx(1.0)
    # 6 held-out rows, 3 of them judged right only with examples: an exact paired test
    # gives p = 2 / 2^3.
    assert after.versus_built_in is not None and after.versus_built_in.p_value == 0.25
    assert after.versus_built_in.within_noise
    assert any("within noise" in note for note in result.notes)
    assert "within noise" in result.table()


def test_the_examples_block_keeps_every_canary_inside_it():
    """Examples are data: a canary in an example's claims or contexts cannot close the
    block, open another, reach the system message or fill a {{variable}}."""
    text = (prompts_dir() / "verify.txt").read_text(encoding="utf-8")
    examples = [
        {
            "claims": [c["question"], c["answer"], c["ground_truth"]],
            "contexts": c["contexts"],
            "every_claim_supported": i % 2 == 0,
        }
        for i, c in enumerate(CANARIES)
    ]
    tuned = parse_prompt(with_examples(text, examples), "verify")
    builtin = load_prompt("verify")
    assert tuned.variables == builtin.variables
    assert all(c["answer"] not in tuned.system for c in CANARIES)
    for canary in CANARIES:
        system, user = tuned.render(claims=[canary["answer"]], contexts=canary["contexts"])
        assert system["content"] == tuned.system  # no data in the system message
        content = user["content"]
        for tag in ("examples", "claims", "contexts"):
            assert content.count(f"<{tag}>") == content.count(f"</{tag}>") == 1
        assert content.count("<") == tuned.user.count("<") and "<<<" not in content
        blocks = data_blocks(content)
        assert blocks["examples"] == examples  # exact, every canary and all
        assert blocks["claims"] == [canary["answer"]]
    assert examples_block([{"claims": ["{{claims}}"]}]) == (
        '<examples>[{"claims": ["{\\u007bclaims}}"]}]</examples>'
    )


def test_bad_options_are_refused_before_any_request(tmp_path):
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        with pytest.raises(AlignError, match="cannot be tuned"):
            align(labelled(10), metric="answer_relevancy", label="human", llm=llm, out=tmp_path)
        with pytest.raises(AlignError, match="between 0 and 1"):
            align(
                labelled(10),
                metric="faithfulness",
                label="human",
                llm=llm,
                out=tmp_path,
                held_out=1,
            )
        one_unfaithful = [r for r in labelled(10) if r["human"] == 1] + labelled(2)[1:]
        with pytest.raises(Exception, match="at least two rows labelled 0"):
            align(one_unfaithful, metric="faithfulness", label="human", llm=llm, out=tmp_path)
        assert server.requests == []


def test_cli_writes_the_report_and_a_prompt_set_that_judge_eval_uses(tmp_path):
    data = tmp_path / "labels.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in labelled(40)), encoding="utf-8")
    with FakeLLMServer(chat=shown_a_person) as server:
        common = ["--model", "openai/judge", "--api-base", server.base_url, "--api-key", "k"]
        common += ["--cache", str(tmp_path / "cache.sqlite"), "--no-progress"]
        out = tmp_path / "aligned"
        done = run(
            "align", data, "--metric", "faithfulness", "--label", "human", "--examples", "3",
            "--candidates", "openai/other-judge", "--out", out, *common,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "examples-3" in done.stdout and "held-out rows" in done.stdout
        report = json.loads((out / "align.json").read_text())
        assert [c["name"] for c in report["candidates"]] == [
            "built-in",
            "examples-3",
            "openai/other-judge",
        ]
        assert report["chosen"] == "examples-3"
        assert "examples-3" in (out / "align.html").read_text()
        held = [json.loads(line) for line in data.read_text().splitlines()]
        held_rows = tmp_path / "held.jsonl"
        held_rows.write_text(
            "".join(json.dumps(held[i]) + "\n" for i in report["split"]["held_out"])
        )
        server.requests.clear()
        evaluated = run(
            "eval", held_rows, "--metrics", "faithfulness", "--prompts", out / "prompts",
            "--out", tmp_path / "run", *common,
        )  # fmt: skip
        assert evaluated.returncode == 0, evaluated.stderr
        assert not example_markers(server) & set(report["split"]["held_out"])
        results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").open()]
        assert [r["scores"]["faithfulness"] >= 0.5 for r in results] == [
            r["human"] == 1 for r in (held[i] for i in report["split"]["held_out"])
        ]
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())["config"]
        assert summary["prompts"]["verify"] == report["candidates"][1]["prompts"]["verify"]
        bad = run(
            "align", data, "--metric", "faithfulness", "--held-out", "0", "--out", out, *common
        )
        assert bad.returncode == 2 and "--held-out 0" in bad.stderr
