"""`judge estimate`: a run's judged mean corrected by a labels file (PPI), the labels joined
to the rows by id, how the labelled rows were drawn, and the command as a user runs it."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

import judge
from judge.errors import InputFormatError, JudgeError
from judge.labels.estimate import estimate, read_label_file
from judge.testing import heuristic_judge
from tests.helpers.cli import run
from tests.helpers.corrected_runs import (
    RANDOM,
    labels_for,
    scores_of,
    write_jsonl,
    write_run,
)
from tests.helpers.labels import row


def test_estimate_is_ppi_of_the_rows_joined_by_id(tmp_path):
    scores = scores_of(40)
    results = write_run(tmp_path / "run", scores)
    chosen = sorted(random.Random(7).sample(range(40), 15))
    labels = write_jsonl(tmp_path / "l.jsonl", labels_for(chosen, scores, sample=RANDOM))
    result = estimate(results, labels=labels, label="ok", metric="faithfulness")
    rest = [s for i, s in enumerate(scores) if i not in chosen]
    direct = judge.ppi_mean(
        rest, [scores[i] for i in chosen], [r["ok"] for r in labels_for(chosen, scores)]
    )
    assert (result.ppi.mean, result.ppi.low, result.ppi.high) == (
        direct.mean,
        direct.low,
        direct.high,
    )
    assert result.ppi.n_labelled == 15 and result.ppi.n_unlabelled == 25
    assert result.random and result.warnings == []
    data = result.to_dict()
    assert data["ppi"]["mean"] == direct.mean and data["random_sample"] is True
    assert data["samples"] == {json.dumps(RANDOM, sort_keys=True): 15}
    text = result.table()
    assert "judge only" in text and "labels only" in text and "PPI" in text
    assert "WARNING" not in text


def test_ids_match_as_text_and_the_latest_label_of_each_annotator_counts(tmp_path):
    results = write_run(tmp_path / "run", [0.2, 0.9, 0.6, 0.1, 0.8], ids=[0, 1, 2, 3, 4])
    records = [
        {"id": "0", "ok": 1, "annotator": "ana", "sample": RANDOM},
        {"id": 0, "ok": 0, "annotator": "ana", "sample": RANDOM},  # ana changed her mind
        {"id": 1, "ok": 1, "annotator": "ana", "sample": RANDOM},
        {"id": 1, "ok": 0, "annotator": "bo", "sample": RANDOM},  # two annotators: 0.5
        {"id": 2, "ok": None, "annotator": "bo", "sample": RANDOM},  # skipped
        {"id": 3, "ok": "true", "annotator": "bo", "sample": RANDOM},
    ]
    found = read_label_file(records, label="ok")
    assert found.labels == {"0": 0.0, "1": 0.5, "3": 1.0}
    assert found.skipped == {"2"} and found.annotators == {"ana": 2, "bo": 2}
    only_bo = read_label_file(records, label="ok", annotator="bo")
    assert only_bo.labels == {"1": 0.0, "3": 1.0}
    result = estimate(results, labels=records, label="ok", metric="faithfulness")
    assert result.ppi.n_labelled == 3
    assert result.ppi.labels_only.mean == pytest.approx(0.5)
    assert any("1 rows were skipped" in w for w in result.warnings)
    assert any("drawn from 40 rows, the run has 5" in w for w in result.warnings)


def test_labels_without_a_random_sample_warn_or_are_refused(tmp_path):
    scores = scores_of(40)
    results = write_run(tmp_path / "run", scores)
    records = labels_for(range(12), scores, sample=RANDOM)
    records += labels_for(range(12, 20), scores, sample={"method": "disagreements"})
    records += labels_for(range(20, 24), scores)
    result = estimate(results, labels=records, label="ok", metric="faithfulness")
    assert not result.random
    assert any(
        w.startswith("12 of 24 labelled rows record no random sample") for w in result.warnings
    )
    with pytest.raises(JudgeError, match="12 of 24 labelled rows record no random sample"):
        estimate(results, labels=records, label="ok", metric="faithfulness", require_random=True)
    random_only = records[:12]
    assert estimate(
        results, labels=random_only, label="ok", metric="faithfulness", require_random=True
    ).random


def test_nan_scores_and_unknown_ids_are_left_out_and_said(tmp_path):
    scores = scores_of(40)
    scores[5] = scores[30] = math.nan
    results = write_run(tmp_path / "run", scores)
    records = labels_for(range(12), scores, sample=RANDOM)
    records.append({"id": "elsewhere", "ok": 1, "sample": RANDOM})
    result = estimate(results, labels=records, label="ok", metric="faithfulness")
    assert result.ppi.left_out == (1, 1)
    assert result.ppi.n_labelled == 11 and result.ppi.n_unlabelled == 27
    assert any(
        "1 labelled ids are no row of the run, left out: 'elsewhere'" in w for w in result.warnings
    )


def test_a_lower_is_better_metric_is_read_as_one_minus_its_score(tmp_path):
    scores = scores_of(40)
    results = write_run(tmp_path / "run", [1 - s for s in scores], metric="hallucination_rate")
    records = labels_for(range(15), scores, sample=RANDOM)
    flipped = estimate(results, labels=records, label="ok", metric="hallucination_rate")
    straight = estimate(
        write_run(tmp_path / "up", scores), labels=records, label="ok", metric="faithfulness"
    )
    assert flipped.orientation.startswith("1 - score")
    assert flipped.ppi.mean == pytest.approx(straight.ppi.mean)
    assert flipped.ppi.lam > 0.5


@pytest.mark.parametrize(
    ("records", "ids", "metric", "message"),
    [
        (
            [{"id": "r0", "other": 1}],
            None,
            "faithfulness",
            r"no label column 'ok' \(columns: id, other\)",
        ),
        ([{"row": 0, "ok": 1}], None, "faithfulness", "no 'id' field in the labels"),
        ([{"id": "r0", "ok": "yes"}], None, "faithfulness", "label 'ok' is 'yes'"),
        ([{"id": "zz", "ok": 1}], None, "faithfulness", "no labelled id is a row of"),
        (
            [{"id": "r0", "ok": 1}],
            None,
            "relevance",
            r"no metric 'relevance' in the run \(metrics: faithfulness\)",
        ),
        ([{"id": "a", "ok": 1}], ["a", "a", "b"], "faithfulness", "ids 'a' name several rows"),
        ([{"id": "r0", "ok": 1}], None, "faithfulness", "1 labelled row with a judged score"),
    ],
)
def test_bad_labels_or_runs_are_errors(tmp_path, records, ids, metric, message):
    results = write_run(tmp_path / "run", [0.5, 0.7, 0.2], ids=ids)
    with pytest.raises(InputFormatError, match=message):
        estimate(results, labels=records, label="ok", metric=metric)


def test_the_command_on_a_judged_run(tmp_path, fake_llm_server):
    # faithfulness under the heuristic judge: supported / (supported + unsupported) claims
    fake_llm_server.chat = heuristic_judge
    claims = [(s, u) for s in range(4) for u in range(4) if s + u][:14] * 3
    data = write_jsonl(tmp_path / "data.jsonl", [row(i, s, u) for i, (s, u) in enumerate(claims)])
    done = run(
        "eval",
        data,
        "--metrics",
        "faithfulness",
        "--model",
        "openai/judge",
        "--api-base",
        fake_llm_server.base_url,
        "--api-key",
        "k",
        "--out",
        tmp_path / "out",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    scores = [s / (s + u) for s, u in claims]
    chosen = sorted(random.Random(3).sample(range(len(claims)), 20))
    # people call an answer faithful when at most one claim is unsupported, and row 0 not
    said = [int(claims[i][1] <= 1 and i != 0) for i in chosen]
    sample = {"method": "random", "seed": 3, "of": len(claims)}
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [
            {"id": f"r{i}", "faithful": y, "annotator": "ana", "sample": sample}
            for i, y in zip(chosen, said, strict=True)
        ],
    )
    args = [
        "estimate",
        tmp_path / "out",
        "--labels",
        labels,
        "--label",
        "faithful",
        "--metric",
        "faithfulness",
    ]
    shown = run(*args, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    rest = [s for i, s in enumerate(scores) if i not in chosen]
    direct = judge.ppi_mean(rest, [scores[i] for i in chosen], said)
    assert data["ppi"]["mean"] == pytest.approx(direct.mean, abs=1e-12)
    assert (data["ppi"]["low"], data["ppi"]["high"]) == pytest.approx((direct.low, direct.high))
    assert data["n_labelled"] == 20 and data["n_unlabelled"] == len(claims) - 20
    assert data["judge_only"]["mean"] == pytest.approx(np.mean(scores))
    assert data["random_sample"] and shown.stderr == ""
    text = run(*args, "--confidence", "0.9")
    assert text.returncode == 0 and " 90% interval" in text.stdout
    assert f"PPI: 20 labelled rows and {len(claims) - 20} judged" in text.stdout

    unsampled = write_jsonl(
        tmp_path / "picked.jsonl",
        [{"id": f"r{i}", "faithful": y} for i, y in zip(chosen, said, strict=True)],
    )
    warned = run(
        "estimate",
        tmp_path / "out",
        "--labels",
        unsampled,
        "--label",
        "faithful",
        "--metric",
        "faithfulness",
        "--format",
        "json",
    )
    assert warned.returncode == 0
    assert "judge: warning: 20 of 20 labelled rows record no random sample" in warned.stderr
    assert "--require-random refuses" in warned.stderr
    refused = run(
        "estimate",
        tmp_path / "out",
        "--labels",
        unsampled,
        "--label",
        "faithful",
        "--metric",
        "faithfulness",
        "--require-random",
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert "leave out --require-random" in refused.stderr
    wrong = run(
        "estimate",
        tmp_path / "out",
        "--labels",
        labels,
        "--label",
        "faithful",
        "--metric",
        "recall",
    )
    assert wrong.returncode == 2 and "name one of them with --metric" in wrong.stderr
    bad_level = run(*args, "--confidence", "95")
    assert bad_level.returncode == 2 and "not between 0 and 1" in bad_level.stderr
    floor = round((direct.low + direct.mean) / 2, 3)  # the mean meets it, the interval not
    gated = run(*args, "--gate", f"faithfulness>={floor}")
    assert gated.returncode == 1
    assert (
        f"FAILED threshold: faithfulness: the PPI interval's lower end {direct.low:.4f} <"
        in gated.stderr
    )
    assert "0 of 1 met" in gated.stdout
    passed = run(*args, "--gate", f"faithfulness>={round(direct.low - 0.01, 3)}")
    assert passed.returncode == 0 and "1 of 1 met" in passed.stdout
    elsewhere = run(*args, "--gate", "relevance>=0.5")
    assert elsewhere.returncode == 2
    assert (
        "--gate 'relevance>=0.5' names relevance: the estimate corrects --metric faithfulness alone"
        in elsewhere.stderr
    )


def test_a_gate_is_met_only_by_the_whole_ppi_interval(tmp_path):
    scores = scores_of(40)
    results = write_run(tmp_path / "run", scores)
    records = labels_for(range(15), scores, sample=RANDOM)
    plain = estimate(results, labels=records, label="ok", metric="faithfulness")
    low, high = plain.ppi.low, plain.ppi.high
    below, inside = round(low - 0.01, 3), round((low + high) / 2, 3)
    met = estimate(
        results,
        labels=records,
        label="ok",
        metric="faithfulness",
        gates=[f"faithfulness>={below}", f"faithfulness<={round(high + 0.01, 3)}"],
    )
    assert met.missed == [] and len(met.gates) == 2
    assert "2 of 2 met" in met.table()
    # the mean meets this floor, the interval's lower end does not
    assert plain.ppi.mean > inside
    missed = estimate(
        results,
        labels=records,
        label="ok",
        metric="faithfulness",
        gates=[f"faithfulness>={inside}"],
    )
    assert missed.missed == [f"faithfulness: the PPI interval's lower end {low:.4f} < {inside:g}"]
    assert missed.to_dict()["gates"] == {
        "gates": [f"faithfulness>={inside:g}"],
        "missed": missed.missed,
    }
    with pytest.raises(
        JudgeError, match=r"gates=\['relevance>=0.5'\] names relevance: .*metric='faithfulness'"
    ):
        estimate(
            results, labels=records, label="ok", metric="faithfulness", gates=["relevance>=0.5"]
        )


def test_a_gate_on_a_lower_is_better_metric_caps_one_minus_the_corrected_mean(tmp_path):
    scores = scores_of(40)
    results = write_run(tmp_path / "run", [1 - s for s in scores], metric="hallucination_rate")
    records = labels_for(range(15), scores, sample=RANDOM)
    result = estimate(results, labels=records, label="ok", metric="hallucination_rate")
    worst = 1 - result.ppi.low  # the interval's upper end, on the metric's scale
    cap = round(worst - 0.01, 3)
    capped = estimate(
        results,
        labels=records,
        label="ok",
        metric="hallucination_rate",
        gates=[f"hallucination_rate<={cap}"],
    )
    assert capped.missed == [
        f"hallucination_rate: the PPI interval's upper end {worst:.4f} > {cap:g}"
    ]
    loose = estimate(
        results,
        labels=records,
        label="ok",
        metric="hallucination_rate",
        gates=[f"hallucination_rate<={round(worst + 0.01, 3)}"],
    )
    assert loose.missed == []
