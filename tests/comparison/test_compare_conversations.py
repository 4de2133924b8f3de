"""`judge compare` and the regression gate on turns of conversations (issue 40): the paired
bootstrap and the randomisation test resample conversations, not turns, and say so."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import judge
from judge.comparison.evaluations import compare
from judge.comparison.many import compare_many
from judge.pytest_plugin.assertions import ScoreAssertionError
from judge.stats import bootstrap_ci, permutation_p_value
from tests.helpers.cli import run


def write_turns(
    path: Path, scores: np.ndarray, *, conversations: bool = True, ids: str = "c"
) -> Path:
    """results.jsonl of `scores` (conversations x turns), each row an assistant turn."""
    lines = []
    for c, turns in enumerate(scores):
        for t, score in enumerate(turns):
            row = {
                "row": len(lines),
                "id": f"c{c}-t{t}",
                "question": f"question {c}.{t}",
                "scores": {"faithfulness": float(score)},
                "reasons": {},
                "errors": {},
                "error": None,
            }
            if conversations:
                row.update(conversation_id=f"{ids}{c}", turn=2 * t + 2)
            lines.append(json.dumps(row) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def shifted_by_conversation(seed: int, shifts: list[float], turns: int = 5) -> tuple:
    """A: noisy scores; B: A moved by one shift per conversation (its turns alike)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.3, 0.7, size=(len(shifts), turns))
    b = a + np.array(shifts)[:, None] + rng.normal(0.0, 0.01, size=a.shape)
    return a, b


def test_compare_resamples_conversations_and_the_p_value_flips_whole_conversations(tmp_path):
    shifts = [0.2, 0.15, -0.1, 0.05, 0.1, -0.05, 0.2, 0.0]
    a, b = shifted_by_conversation(4, shifts)
    result = compare(write_turns(tmp_path / "a.jsonl", a), write_turns(tmp_path / "b.jsonl", b))
    metric = result.metrics["faithfulness"]
    assert (metric.n, metric.conversations) == (40, 8)
    diff = (b - a).ravel()
    # Reference: every one of the 2^8 sign patterns, one sign per conversation, applied to
    # its 5 turns, the mean taken over the 40 turns.
    observed = abs(diff.mean())
    flips = [np.repeat(s, 5) for s in itertools.product([1.0, -1.0], repeat=8)]
    extreme = sum(abs((f * diff).mean()) >= observed - 1e-12 for f in flips)
    assert metric.p_value == pytest.approx(extreme / 256, abs=1e-15)
    assert metric.p_value > 0.1 and permutation_p_value(diff) < 0.001  # turns: "significant"
    # The interval is the bootstrap of the conversations' mean differences (equal sizes).
    means = (b - a).mean(axis=1)
    assert (metric.ci_low, metric.ci_high) == pytest.approx(bootstrap_ci(means), rel=1e-12)
    turns_low, turns_high = bootstrap_ci(diff)
    assert metric.ci_high - metric.ci_low > 1.5 * (turns_high - turns_low)
    assert "CI and p resampled by conversation (8 conversations, 40 turns)." in result.table()
    assert result.to_dict()["resampled"] == {
        "unit": "conversation",
        "conversations": 8,
        "turns": 40,
    }


def test_rows_that_are_no_turns_compare_as_before(tmp_path):
    a, b = shifted_by_conversation(4, [0.2, -0.1, 0.05])
    plain_a = write_turns(tmp_path / "a.jsonl", a, conversations=False)
    plain_b = write_turns(tmp_path / "b.jsonl", b, conversations=False)
    turns_b = write_turns(tmp_path / "tb.jsonl", b)
    for other in (plain_b, turns_b):  # conversations on one side only: pairs resampled
        result = compare(plain_a, other)
        metric = result.metrics["faithfulness"]
        diff = (b - a).ravel()
        assert (metric.ci_low, metric.ci_high) == bootstrap_ci(diff)
        assert metric.p_value == permutation_p_value(diff)
        assert metric.conversations is None and result.resampled is None
        assert "resampled" not in result.table()
        assert "resampled" not in result.to_dict()
        assert "conversations" not in result.to_dict()["metrics"]["faithfulness"]
        assert "by_turn" not in result.to_dict() and "turn position" not in result.table()


def test_conversations_joined_by_either_run_are_one_unit(tmp_path):
    a, b = shifted_by_conversation(2, [0.1, 0.2, -0.1, 0.0])
    base = write_turns(tmp_path / "a.jsonl", a)
    # B's ids name other conversations: c0 and c1 of A are one conversation in B.
    lines = write_turns(tmp_path / "b.jsonl", b, ids="x").read_text().replace('"x1"', '"x0"')
    (tmp_path / "b.jsonl").write_text(lines)
    result = compare(base, tmp_path / "b.jsonl")
    assert result.metrics["faithfulness"].conversations == 3


def test_compare_many_and_the_cli_say_what_was_resampled(tmp_path):
    a, b = shifted_by_conversation(6, [0.2, 0.1, -0.1, 0.15, 0.05, 0.0])
    base, other = write_turns(tmp_path / "a.jsonl", a), write_turns(tmp_path / "b.jsonl", b)
    many = compare_many(base, [other, other])
    versus = many.versus[0].comparison.metrics["faithfulness"]
    assert versus.conversations == 6
    assert many.runs[0].resampled is not None and many.runs[0].resampled.units == 6
    assert "CI and p resampled by conversation (6 conversations, 30 turns)" in many.table()
    done = run("compare", base, other)
    assert "CI and p resampled by conversation (6 conversations, 30 turns)." in done.stdout
    doc = json.loads(run("compare", base, other, "--format", "json").stdout)
    assert doc["resampled"]["conversations"] == 6
    assert doc["metrics"]["faithfulness"]["conversations"] == 6


def test_the_regression_gate_resamples_conversations(tmp_path, capsys):
    # Five conversations got worse and one better: 25 of 30 turns worse looks decisive
    # turn by turn, but it is six conversations, and 5 of 6 is p = 4/64 by conversation.
    a, b = shifted_by_conversation(8, [-0.2, -0.2, -0.2, -0.2, -0.2, 0.1])
    b = a + np.round(b - a, 1)  # each conversation's turns moved alike
    base = write_turns(tmp_path / "a.jsonl", a)
    comparison = judge.assert_no_regression(write_turns(tmp_path / "b.jsonl", b), base)
    assert comparison.metrics["faithfulness"].p_value == pytest.approx(4 / 64)
    shown = capsys.readouterr().out
    assert "resampled by conversation (6 conversations, 30 turns)" in shown
    plain_a = write_turns(tmp_path / "pa.jsonl", a, conversations=False)
    plain_b = write_turns(tmp_path / "pb.jsonl", b, conversations=False)
    with pytest.raises(ScoreAssertionError, match="significantly worse"):
        judge.assert_no_regression(plain_b, plain_a)


def test_compare_breaks_the_differences_down_by_turn_position(tmp_path):
    a = np.array([[0.5, 0.5, 0.5], [0.25, 0.75, 0.5]])
    b = np.array([[0.5, 0.75, 1.0], [0.25, 0.25, 0.5]])
    base, other = write_turns(tmp_path / "a.jsonl", a), write_turns(tmp_path / "b.jsonl", b)
    lines = other.read_text().splitlines(keepends=True)
    # B's rows out of order and one turn unscored: positions come from `turn`, not rows.
    undefined = json.loads(lines[2])
    undefined["scores"]["faithfulness"] = None
    other.write_text(
        "".join([lines[4], lines[0], json.dumps(undefined) + "\n", lines[1], lines[3], lines[5]])
    )
    result = compare(base, other)
    assert [(t["position"], t["pairs"]) for t in result.by_turn] == [(1, 2), (2, 2), (3, 2)]
    third = result.by_turn[2]["metrics"]["faithfulness"]
    assert third == {"n": 1, "mean_a": 0.5, "mean_b": 0.5, "delta": 0.0}  # c0's unscored
    second = result.by_turn[1]["metrics"]["faithfulness"]
    assert second == {"n": 2, "mean_a": 0.625, "mean_b": 0.5, "delta": -0.125}
    assert result.to_dict()["by_turn"] == result.by_turn
    table = result.table()
    assert "Δ by turn position" in table
    assert "faithfulness           +0.000   -0.125   +0.000" in table
    run("compare", base, other, "--out", tmp_path / "cmp")
    html = (tmp_path / "cmp" / "compare.html").read_text(encoding="utf-8")
    assert "<h2>Δ by turn position</h2>" in html and "<td class=n>-0.125</td>" in html
    run("compare", base, base, "--out", tmp_path / "same")
    html = (tmp_path / "same" / "compare.html").read_text(encoding="utf-8")
    assert "resampled by conversation" in html
    plain = write_turns(tmp_path / "p.jsonl", a, conversations=False)
    run("compare", plain, plain, "--out", tmp_path / "plain")
    html = (tmp_path / "plain" / "compare.html").read_text(encoding="utf-8")
    assert "turn position" not in html and "resampled" not in html
