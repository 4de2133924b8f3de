"""The faster paths of a large run give what the plain ones gave: bootstrap intervals with
shared draws, a tally filled as rows finish, results.jsonl cut from the row file, NaN to null."""

from __future__ import annotations

import json
import math
import random
from collections import OrderedDict

import numpy as np
import pytest

from judge.json_values import dumps_nan_as_null, nan_to_null
from judge.llm.transport import Fields
from judge.run.checkpoint import Checkpoint
from judge.run.evaluate import evaluate
from judge.run.results import EvaluationResult, ResultRow, RowTally
from judge.stats import TIED_FROM, bootstrap_ci, bootstrap_ci_of, bootstrap_cis, expanded_tail
from tests.helpers.judging import GOOD

METRICS = ["faithfulness", "context_recall"]


def test_bootstrap_of_several_columns_equals_each_alone():
    rng = np.random.default_rng(7)
    columns = [rng.random(50), rng.random(50) * 0.5, rng.random(37), np.array([]), rng.random(1)]
    together = bootstrap_cis(columns)
    assert together[:3] + together[4:] == [bootstrap_ci(c) for c in columns[:3] + columns[4:]]
    assert all(math.isnan(v) for v in together[3])
    assert together[0] != together[1]  # each column its own interval, not the first one's


def index_draw_interval(values: np.ndarray) -> tuple[float, float]:
    """The interval of resampled row indices (bootstrap_ci_of always draws those), at the
    expanded level of bootstrap_ci's."""
    level = 1 - 2 * expanded_tail(values.size)
    low, high, _ = bootstrap_ci_of(
        lambda w: (w @ values / values.size)[:, None], values.size, level
    )
    return (float(low[0]), float(high[0]))


def test_a_large_column_of_few_values_resamples_their_counts_to_the_same_interval():
    rng = np.random.default_rng(11)
    tied = rng.integers(0, 7, TIED_FROM) / 6  # scores such as 2/6: seven distinct values
    [(low, high)] = bootstrap_cis([tied])
    assert (low, high) == bootstrap_ci(tied) and low < tied.mean() < high
    by_index = index_draw_interval(tied)
    assert (low, high) != by_index  # another random stream ...
    width = by_index[1] - by_index[0]
    assert abs(low - by_index[0]) < 0.05 * width and abs(high - by_index[1]) < 0.05 * width


def test_small_or_continuous_columns_draw_row_indices_as_before():
    rng = np.random.default_rng(12)
    small = rng.integers(0, 3, 500) / 2  # few values, but below TIED_FROM
    continuous = rng.random(TIED_FROM)
    columns = [small, continuous]
    for values, interval in zip(columns, bootstrap_cis(columns), strict=True):
        # The same draws; only the order of the sums differs (a mean against weights).
        assert interval == pytest.approx(index_draw_interval(values), rel=1e-12, abs=0)


def rows_of_every_kind() -> list[ResultRow]:
    """Scored, NaN with a reason, judge errors, a bad input row; tricky text."""
    rows = []
    for i in range(40):
        row = ResultRow(i, f"s{i}", f'Q {i}, "row": {i} «é» 中', "A", ["c"], None)
        row.scores = {"faithfulness": i / 40, "context_recall": math.nan}
        row.reasons = {"context_recall": "no_ground_truth"}
        row.evidence = {"claims": ["x", 'y, "row": 3}'], "similarities": [0.5, math.nan]}
        if i % 7 == 3:
            row.scores["faithfulness"] = math.nan
            row.reasons["faithfulness"] = "judge_error"
            row.errors = {"faithfulness": "InvalidOutputError: bad"}
        rows.append(row)
    rows.append(ResultRow(40, error="missing question"))
    return rows


def test_a_tally_filled_out_of_order_equals_one_filled_in_order():
    rows = rows_of_every_kind()
    in_order = RowTally(METRICS)
    for row in rows:
        in_order.add(row)
    shuffled = list(enumerate(rows))
    random.Random(3).shuffle(shuffled)
    sized = RowTally(METRICS, size=len(rows))
    for at, row in shuffled:
        sized.add(row, at=at)
    assert sized.summaries(METRICS) == in_order.summaries(METRICS)
    assert list(sized.row_failed) == list(in_order.row_failed)
    assert sized.worst(50) == in_order.worst(50)
    assert (sized.failed, sized.judged, sized.judge_errored) == (7, 40, 6)
    assert (in_order.failed, in_order.judged, in_order.judge_errored) == (7, 40, 6)
    with pytest.raises(ValueError, match="exactly when"):
        sized.add(rows[0])


def test_results_jsonl_cut_from_the_row_file_equals_each_row_encoded(tmp_path):
    rows = rows_of_every_kind()
    spill = Checkpoint(None, "f" * 64)
    offsets = [spill.append(r.row, "0" * 64, r) for r in reversed(rows)][::-1]
    spill.close()
    on_disk = EvaluationResult(spill.rows(offsets, METRICS), METRICS, {}, {})
    in_memory = EvaluationResult(rows, METRICS, {}, {})
    on_disk.write_jsonl(tmp_path / "disk.jsonl")
    in_memory.write_jsonl(tmp_path / "memory.jsonl")
    written = (tmp_path / "disk.jsonl").read_bytes()
    assert written == (tmp_path / "memory.jsonl").read_bytes()
    first = json.loads(written.splitlines()[0])
    assert first["question"] == 'Q 0, "row": 0 «é» 中' and first["row"] == 0
    assert first["scores"]["context_recall"] is None
    assert on_disk.summary == in_memory.summary


def test_a_temporary_row_file_is_buffered_but_readable_before_it_is_closed(tmp_path):
    rows = rows_of_every_kind()[:3]
    spill = Checkpoint(None, "f" * 64, temporary_dir=tmp_path)
    offsets = [spill.append(r.row, "0" * 64, r) for r in rows]
    assert spill.path.stat().st_size == 0  # not written through row by row
    assert [r.question for r in spill.rows(offsets, METRICS)] == [r.question for r in rows]
    checkpoint = Checkpoint(tmp_path / "ck.jsonl", "f" * 64)
    checkpoint.append(rows[0].row, "0" * 64, rows[0])
    assert checkpoint.path.stat().st_size > 0  # a checkpoint's row is on disk at once
    spill.close()
    checkpoint.close()


def test_a_resumed_run_writes_the_results_of_an_uninterrupted_one(tmp_path, models):
    rows = [{**GOOD, "id": str(i), "answer": f"{GOOD['answer']} Row {i}."} for i in range(4)]
    checkpoint = tmp_path / "checkpoint.jsonl"
    whole = evaluate(rows, **models, checkpoint=checkpoint, progress=False)
    whole.write_jsonl(tmp_path / "whole.jsonl")
    lines = checkpoint.read_text(encoding="utf-8").splitlines()
    checkpoint.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    resumed = evaluate(rows, **models, checkpoint=checkpoint, progress=False)
    resumed.write_jsonl(tmp_path / "resumed.jsonl")
    assert resumed.config["resumed_rows"] == 2

    # Byte for byte but for usage: identical requests of rows run together are made once
    # and counted in one row (a rerun of half the rows shares other requests).
    def without_usage(name: str) -> list[dict]:
        lines = (tmp_path / name).read_text(encoding="utf-8").splitlines()
        return [{k: v for k, v in json.loads(line).items() if k != "usage"} for line in lines]

    assert without_usage("resumed.jsonl") == without_usage("whole.jsonl")
    kept = [json.loads(line)["row"] for line in lines[:2]]  # rows finish in any order
    assert [resumed.rows[i].usage for i in kept] == [whole.rows[i].usage for i in kept]
    assert resumed.summary == whole.summary


def test_nan_to_null_reaches_subclasses_and_tuples():
    ordered = OrderedDict(a=np.float64("nan"), b=(1.0, math.nan), c=[True, None, "x", 2])
    assert nan_to_null({"k": ordered, "f": float("nan")}) == {
        "k": {"a": None, "b": [1.0, None], "c": [True, None, "x", 2]},
        "f": None,
    }
    assert nan_to_null(np.float64(0.25)) == 0.25


@pytest.mark.parametrize(
    "value",
    [
        {"b": [1.0, 0.5], "a": {"z": "é 中", "y": None, "x": True}},  # no NaN: encoded at once
        {"s": math.nan, "e": {"sims": [0.1, math.nan], "t": (1.0, np.float64("nan"))}},
        {"inf": math.inf, "n": math.nan, "m": -math.inf},  # infinities stay, NaN go
        {"x": np.float64(0.25), "o": OrderedDict(b=1, a=[math.nan])},
        [math.nan, {"k": 2}],
    ],
)
def test_encoding_with_nan_as_null_equals_copying_then_encoding(value):
    expected = json.dumps(nan_to_null(value), ensure_ascii=False, sort_keys=True)
    assert dumps_nan_as_null(value) == expected
    assert "NaN" not in expected


def test_a_rows_line_has_null_for_every_nan_and_reads_back_as_the_row():
    row = ResultRow(
        3,
        "id3",
        scores={"faithfulness": math.nan, "answer_relevancy": 1, "context_recall": None},
        evidence={"similarities": [0.5, math.nan], "claims": ("a", "b")},
    )
    line = row.json_line()
    assert line == json.dumps(row.to_json(), ensure_ascii=False, sort_keys=True)
    data = json.loads(line)
    assert data["scores"] == {"answer_relevancy": 1.0, "context_recall": None, "faithfulness": None}
    assert data["evidence"]["similarities"] == [0.5, None]
    back = ResultRow.from_json(data)
    assert math.isnan(back.scores["faithfulness"]) and back.scores["answer_relevancy"] == 1.0
    assert back.json_line() == line


def test_a_reply_of_the_openai_route_reads_as_the_sdk_models_did():
    reply = Fields(
        {
            "model": "m-1",
            "choices": [{"message": {"content": "{}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }
    )
    assert reply.choices[0].message.content == "{}" and reply.choices[0].finish_reason == "stop"
    assert reply.usage.prompt_tokens == 3 and reply.model == "m-1"
    assert getattr(reply, "system_fingerprint", None) is None
    with pytest.raises(AttributeError):
        _ = reply.choices[0].logprobs
