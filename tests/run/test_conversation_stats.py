"""Summaries of conversations' turns (issue 40): the bootstrap resamples conversations, the
report breaks the means down by turn position, and rows that are no turns keep today's
numbers byte for byte."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import judge
from judge.cli.finish import finish_run
from judge.llm.config import LLM
from judge.pytest_plugin.assertions import ScoreAssertionError
from judge.run.evaluate import evaluate
from judge.run.gates import Gates
from judge.run.merge import merge_shards
from judge.run.results import EvaluationResult
from judge.run.rows import ResultRow, RowTally
from judge.stats import bootstrap_ci, bootstrap_cis, cluster_bootstrap_cis
from judge.testing import heuristic_judge
from tests.helpers.shards import rows as shard_rows


def tally_of(rows: list[ResultRow], metrics: list[str]) -> RowTally:
    tally = RowTally(metrics)
    for row in rows:
        tally.add(row)
    return tally


def correlated(seed: int, conversations: int = 20, turns: int = 5) -> list[ResultRow]:
    """Conversations whose turns share one score (intra-class correlation 1: the design
    effect is 1 + (turns - 1) * 1 = turns)."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(conversations):
        value = float(rng.random())
        for t in range(turns):
            rows.append(
                ResultRow(
                    row=len(rows),
                    id=f"c{c}-{t}",
                    scores={"m": value},
                    conversation_id=f"c{c}",
                    turn=2 * t + 2,
                )
            )
    return rows


def as_plain_rows(rows: list[ResultRow]) -> list[ResultRow]:
    return [ResultRow(row=r.row, id=r.id, scores=dict(r.scores)) for r in rows]


def test_ordinary_rows_keep_todays_numbers():
    """Numbers printed by the code before conversations existed (commit a9b3900), the
    interval since made Hesterberg's expanded percentile one (wider by a few 1e-4 here)."""
    rng = np.random.default_rng(7)
    rows = [
        ResultRow(row=i, scores={"a": float(rng.random()), "b": float(rng.integers(0, 3)) / 2})
        for i in range(100)
    ]
    tally = tally_of(rows, ["a", "b"])
    summary = tally.summaries(["a", "b"])
    assert (summary["a"].mean, summary["a"].ci_low, summary["a"].ci_high) == (
        0.48294311191175376,
        0.42654033687751525,
        0.5392015396880664,
    )
    assert (summary["b"].ci_low, summary["b"].ci_high) == (0.47, 0.63)
    assert tally.clusters() is None and tally.turn_positions() is None
    assert str(tally.resampling()) == "resampled by row (100 rows)"
    assert "conversation_ids" not in tally.to_json()
    result = EvaluationResult(rows, ["a", "b"], {}, {})
    assert set(result.summary_dict()) == {
        "metrics",
        "rows",
        "rows_with_errors",
        "judge_errors",
        "usage",
        "config",
    }
    assert "turn" not in result.table() and "conversation" not in result.table()


def test_correlated_turns_get_the_interval_of_their_conversations():
    rows = correlated(seed=3)
    clustered = tally_of(rows, ["m"]).summary("m")
    plain = tally_of(as_plain_rows(rows), ["m"]).summary("m")
    values = np.array([r.scores["m"] for r in rows])
    # Rows that are no turns: resampled one by one, as before.
    assert (plain.ci_low, plain.ci_high) == bootstrap_ci(values)
    # Conversations of equal size: the turn-weighted mean of drawn conversations is the
    # mean of their means, so the interval is the plain bootstrap of the 20 means.
    means = values.reshape(20, 5).mean(axis=1)
    assert (clustered.ci_low, clustered.ci_high) == pytest.approx(bootstrap_ci(means), rel=1e-12)
    assert clustered.mean == pytest.approx(plain.mean, rel=1e-15)
    # Wider by about the square root of the design effect (5 turns, correlation 1).
    ratio = (clustered.ci_high - clustered.ci_low) / (plain.ci_high - plain.ci_low)
    assert 1.8 < ratio < 2.7, ratio


def test_the_conversation_interval_covers_the_true_mean_and_the_turn_interval_does_not():
    """Over 200 seeded data sets of 20 correlated conversations (true mean 0.5), the
    conversation interval covers the mean about 95% of the time; the turn interval, which
    takes 100 correlated turns for 100 independent ones, far less."""
    covered = {"conversation": 0, "turn": 0}
    for seed in range(200):
        rng = np.random.default_rng(1000 + seed)
        shared = rng.random(20)  # each conversation's level, uniform: mean 0.5
        noise = rng.normal(0.0, 0.05, size=(20, 5))  # turns vary a little around it
        values = (shared[:, None] + noise).ravel()
        clusters = np.repeat(np.arange(20), 5)
        [(low, high)] = cluster_bootstrap_cis([values], [clusters])
        covered["conversation"] += low <= 0.5 <= high
        [(low, high)] = bootstrap_cis([values])
        covered["turn"] += low <= 0.5 <= high
    assert covered["conversation"] >= 0.88 * 200, covered
    assert covered["turn"] <= 0.75 * 200, covered


def test_order_of_adding_and_shards_do_not_change_the_numbers():
    rows = correlated(seed=5, conversations=7, turns=3)
    rows[4].scores["m"] = math.nan  # a turn the metric could not score
    rows.append(ResultRow(row=len(rows), scores={"m": 0.25}))  # a row that is no turn
    one = tally_of(rows, ["m"])
    backwards = RowTally(["m"], size=len(rows))
    for row in reversed(rows):
        backwards.add(row, at=row.row)
    parts = []
    for i in range(3):  # dealt round-robin, as `judge eval --shard I/3` deals them
        part = tally_of(rows[i::3], ["m"])
        parts.append(json.loads(json.dumps(part.to_json())))  # as shard.json holds it
    merged = RowTally.interleave(parts)
    for other in (backwards, merged):
        assert other.summaries(["m"]) == one.summaries(["m"])
        assert other.by_turn(["m"]) == one.by_turn(["m"])
        assert other.resampling() == one.resampling()
    assert str(one.resampling()) == "resampled by conversation (8 conversations, 22 turns)"
    # Another numbering of the same conversations (a part's, in first-seen order) is the
    # same clusters: the numbers do not depend on how the ids were numbered.
    assert one.clusters().tolist() == merged.clusters().tolist()
    assert one.clusters().tolist()[:7] == [0, 0, 0, 1, 1, 1, 2]
    bad = dict(parts[0], conversation=[99] * int(parts[0]["rows"]))
    with pytest.raises(ValueError, match="conversation number"):
        RowTally.interleave([bad, *parts[1:]])


def test_means_by_turn_position_rank_turns_within_each_conversation():
    def turn(conversation: str, number: int, score: float) -> ResultRow:
        return ResultRow(row=0, scores={"m": score}, conversation_id=conversation, turn=number)

    rows = [
        turn("b", 4, 0.5),  # b's 2nd assistant turn, added first
        turn("a", 2, 1.0),
        turn("a", 6, 0.0),
        turn("b", 2, 0.25),
        turn("a", 4, math.nan),
        ResultRow(row=0, scores={"m": 0.75}),  # no turn: in no position
    ]
    for i, row in enumerate(rows):
        row.row = i
    result = EvaluationResult(rows, ["m"], {}, {})
    positions = result.tally.turn_positions()
    assert positions.tolist() == [2, 1, 3, 1, 2, 0]
    by_turn = result.summary_dict()["by_turn"]
    assert by_turn == [
        {"position": 1, "turns": 2, "metrics": {"m": {"mean": 0.625, "scored": 2}}},
        {"position": 2, "turns": 2, "metrics": {"m": {"mean": 0.5, "scored": 1}}},
        {"position": 3, "turns": 1, "metrics": {"m": {"mean": 0.0, "scored": 1}}},
    ]
    assert result.summary_dict()["resampled"] == {
        "unit": "conversation",
        "conversations": 3,
        "turns": 6,
    }
    table = result.table()
    assert "95% CI resampled by conversation (3 conversations, 6 turns)." in table
    assert "   turn 1   turn 2   turn 3" in table
    assert "m                         0.625    0.500    0.000" in table


def test_the_report_shows_the_means_by_turn_only_for_conversations(tmp_path):
    rows = correlated(seed=1, conversations=3, turns=2)
    result = EvaluationResult(rows, ["m"], {}, {})
    result.write(tmp_path / "conv", record=False)
    html = (tmp_path / "conv" / "report.html").read_text(encoding="utf-8")
    assert "Mean by turn position" in html and "resampled by conversation" in html
    summary = json.loads((tmp_path / "conv" / "summary.json").read_text(encoding="utf-8"))
    assert [t["position"] for t in summary["by_turn"]] == [1, 2]
    plain = EvaluationResult(as_plain_rows(rows), ["m"], {}, {})
    plain.write(tmp_path / "plain", record=False)
    html = (tmp_path / "plain" / "report.html").read_text(encoding="utf-8")
    assert "Mean by turn position" not in html and "resampled" not in html
    summary = json.loads((tmp_path / "plain" / "summary.json").read_text(encoding="utf-8"))
    assert "by_turn" not in summary and "resampled" not in summary


def test_judge_merge_of_conversation_shards_gives_the_one_process_summary(
    tmp_path, fake_llm_server, monkeypatch
):
    """Shards of a conversations' run (its turns dealt round-robin, so a conversation's
    turns land in several shards), merged from their recorded tallies or by parsing their
    rows, give the summary of the same rows in one process."""
    fake_llm_server.chat = heuristic_judge
    n, count = 12, 3

    def as_turns(rows: list[ResultRow]) -> list[ResultRow]:
        for row in rows:  # conversations of 4 turns: rows 0-3, 4-7, 8-11
            row.conversation_id, row.turn = f"chat{row.row // 4}", 2 * (row.row % 4) + 2
        return rows

    dirs = []
    for i in range(1, count + 1):
        sharded = evaluate(
            shard_rows(n),
            metrics=["faithfulness", "context_recall"],
            llm=LLM("openai/judge", api_base=fake_llm_server.base_url, api_key="k"),
            cache=tmp_path / "cache.sqlite",
            shard=f"{i}/{count}",
            progress=False,
        )
        turns = EvaluationResult(
            as_turns(list(sharded.rows)), sharded.metrics, sharded.config, sharded.usage
        )
        finish_run(turns, tmp_path / f"s{i}", Gates())
        dirs.append(tmp_path / f"s{i}")
        record = json.loads((tmp_path / f"s{i}" / "shard.json").read_text(encoding="utf-8"))
        assert record["tally"]["conversation_ids"] == ["chat0", "chat1", "chat2"]
    rows = as_turns([row for d in dirs for row in written_rows(d)])
    rows.sort(key=lambda r: r.row)
    whole = EvaluationResult(rows, ["faithfulness", "context_recall"], {}, {})
    assert whole.summary["faithfulness"].scored > 4  # something to resample
    with monkeypatch.context() as m:  # from the shards' recorded tallies, no row parsed
        m.setattr(ResultRow, "from_json", lambda data: pytest.fail("a row was parsed"))
        fast = merge_shards(dirs, tmp_path / "fast.jsonl")
    for d in dirs:  # without the records: every row parsed
        (d / "shard.json").unlink()
    parsed = merge_shards(dirs, tmp_path / "parsed.jsonl")
    for merged in (fast, parsed):
        assert merged.summary == whole.summary
        assert merged.tally.resampling() == whole.tally.resampling()
        assert merged.summary_dict()["by_turn"] == whole.summary_dict()["by_turn"]
    assert str(whole.tally.resampling()) == "resampled by conversation (3 conversations, 12 turns)"


def written_rows(folder: Path) -> list[ResultRow]:
    return [
        ResultRow.from_json(json.loads(line))
        for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
    ]


def test_a_failed_assert_evaluation_says_the_intervals_resampled_conversations():
    rows = correlated(seed=1, conversations=4, turns=2)
    with pytest.raises(ScoreAssertionError) as caught:
        judge.assert_evaluation(EvaluationResult(rows, ["m"], {}, {}), fail_under={"m": 0.99})
    assert "(the intervals resampled by conversation (4 conversations, 8 turns)" in str(
        caught.value
    )
    with pytest.raises(ScoreAssertionError) as caught:
        plain = EvaluationResult(as_plain_rows(rows), ["m"], {}, {})
        judge.assert_evaluation(plain, fail_under={"m": 0.99})
    assert "resampled" not in str(caught.value)
