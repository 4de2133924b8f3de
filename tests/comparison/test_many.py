"""Many runs against a baseline: the runs table over each run's own rows, paired tests over
the shared questions with Holm across every (run, metric) pair, and per question what got
worse and better with the judge's evidence and both answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from judge.comparison.evaluations import compare
from judge.comparison.html import render_many
from judge.comparison.many import compare_many, run_labels
from judge.errors import InputFormatError, JudgeError
from judge.stats import bootstrap_ci, holm

N = 30
RNG = np.random.default_rng(7)
BASE_F = (0.3 + 0.4 * RNG.random(N)).round(3)  # faithfulness in [0.3, 0.7]
BASE_R = (0.2 + 0.6 * RNG.random(N)).round(3)  # context_recall


def row(i: int, faithfulness: float, recall: float, answer: str, qid: str | None = None) -> dict:
    """A results.jsonl row as judge eval writes it, with a faithfulness judgment behind it."""
    return {
        "row": i,
        "id": qid or f"q{i}",
        "question": f"What does rule {i} say?",
        "answer": answer,
        "contexts": [f"Rule {i} says the refund window is {i} days."],
        "ground_truth": f"The refund window is {i} days.",
        "error": None,
        "scores": {"faithfulness": faithfulness, "context_recall": recall},
        "reasons": {},
        "errors": {},
        "evidence": {
            "answer_claims": [answer],
            "answer_verdicts": [
                {
                    "verdict": "supported" if faithfulness >= 0.5 else "unsupported",
                    "reason": f"claim of {answer!r} checked against rule {i}",
                    "context": 0 if faithfulness >= 0.5 else None,
                }
            ],
        },
        "usage": {},
    }


def write_run(folder: Path, faithfulness, recall, answer: str, ids=None) -> Path:
    folder.mkdir(parents=True)
    ids = ids or [f"q{i}" for i in range(len(faithfulness))]
    lines = [
        json.dumps(row(i, float(f), float(r), f"{answer} {i}", qid))
        for i, (f, r, qid) in enumerate(zip(faithfulness, recall, ids, strict=True))
    ]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def runs(tmp_path) -> dict[str, Path]:
    return {
        "base": write_run(tmp_path / "base", BASE_F, BASE_R, "base answer"),
        "same": write_run(tmp_path / "same", BASE_F, BASE_R, "same answer"),
        "worse": write_run(tmp_path / "worse", BASE_F - 0.25, BASE_R, "worse answer"),
        "better": write_run(tmp_path / "better", BASE_F + 0.2, BASE_R, "better answer"),
    }


def test_runs_table_is_each_runs_own_mean_and_interval(runs):
    many = compare_many(runs["base"], [runs["same"], runs["worse"], runs["better"]])
    assert many.baseline == "base" and [r.label for r in many.runs] == [
        "base",
        "same",
        "worse",
        "better",
    ]
    assert many.metrics == ["faithfulness", "context_recall"]
    worse = many.runs[2].metrics["faithfulness"]
    values = np.array([json.loads(x)["scores"]["faithfulness"] for x in _lines(runs["worse"])])
    assert worse.mean == pytest.approx(values.mean()) and worse.scored == N
    assert (worse.ci_low, worse.ci_high) == bootstrap_ci(values)


def _lines(folder: Path) -> list[str]:
    return (folder / "results.jsonl").read_text().splitlines()


def test_holm_runs_across_every_run_and_metric_together(runs):
    many = compare_many(runs["base"], [runs["same"], runs["worse"], runs["better"]])
    tested = [(v.label, m) for v in many.versus for m in v.comparison.metrics.values()]
    assert len(tested) == 6
    # The raw p-values are the two-run test's, pair by pair ...
    for label, m in tested:
        alone = compare(runs["base"], runs[label]).metrics[m.metric]
        assert m.p_value == alone.p_value and m.delta == alone.delta
    # ... and the adjustment is Holm's over all six at once, not per run.
    raw = [m.p_value for _, m in tested]
    expected = holm([p for p in raw if not math.isnan(p)])
    assert [m.p_adjusted for _, m in tested if not math.isnan(m.p_value)] == expected
    assert many.tests == len(expected) and "across all" in many.to_dict()["adjustment"]
    faith = {label: m for label, m in tested if m.metric == "faithfulness"}
    assert [(run, m.metric) for run, m in many.regressions()] == [("worse", "faithfulness")]
    assert faith["better"].significant and not faith["better"].worse
    assert not faith["same"].significant and faith["same"].delta == 0


def test_runs_with_different_question_sets_pair_the_shared_ones(tmp_path, runs):
    part = write_run(tmp_path / "part", BASE_F[:20] - 0.25, BASE_R[:20], "partial")
    extra_ids = [f"q{i}" for i in range(15)] + [f"new{i}" for i in range(15)]
    mixed = write_run(tmp_path / "mixed", BASE_F, BASE_R, "mixed", ids=extra_ids)
    many = compare_many(runs["base"], [part, mixed], metrics=["faithfulness"])
    part_vs, mixed_vs = many.versus
    assert len(part_vs.comparison.keys) == 20 and part_vs.comparison.unmatched_a == [
        f"q{i}" for i in range(20, N)
    ]
    assert part_vs.comparison.metrics["faithfulness"].n == 20
    assert many.runs[1].rows == 20 and many.runs[1].metrics["faithfulness"].scored == 20
    # "mixed" shares ids q0..q14 but numbers the rest anew: its questions are all the
    # baseline's, so it is matched by question, as the two-run compare matches it.
    assert mixed_vs.matched_by == "question" and len(mixed_vs.comparison.keys) == N
    assert (
        mixed_vs.comparison.metrics["faithfulness"].n
        == compare(runs["base"], mixed).metrics["faithfulness"].n
    )
    assert not mixed_vs.worse and not mixed_vs.better


def test_per_question_diffs_hold_evidence_and_both_answers(tmp_path, runs):
    drops = BASE_F.copy()
    drops[4] -= 0.3  # the largest drop
    drops[9] -= 0.1
    drops[11] += 0.2  # and one gain
    mixed = write_run(tmp_path / "mixed", drops, BASE_R, "mixed answer")
    many = compare_many(runs["base"], [runs["same"], mixed])
    same, vs = many.versus
    assert not same.worse and not same.better
    assert [q.run.id for q in vs.worse] == ["q4", "q9"]
    assert [q.run.id for q in vs.better] == ["q11"]
    top = vs.worse[0]
    assert top.drop == pytest.approx(0.3)
    assert [c.metric for c in top.worse] == ["faithfulness"] and not top.better
    data = many.to_dict()["versus_baseline"][1]["worse"][0]
    assert (
        data["baseline"]["answer"] == "base answer 4" and data["run"]["answer"] == "mixed answer 4"
    )
    assert data["worse"][0]["delta"] == pytest.approx(-0.3)
    verdicts = data["run"]["evidence"]["answer_verdicts"]
    assert verdicts[0]["reason"] == "claim of 'mixed answer 4' checked against rule 4"
    assert data["baseline"]["evidence"]["answer_claims"] == ["base answer 4"]
    assert json.loads(json.dumps(many.to_dict())) == many.to_dict()  # plain JSON


def test_lower_is_better_metric_counts_a_rise_as_worse(tmp_path):
    def write(name: str, rates: list[float]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        lines = []
        for i, r in enumerate(rates):
            sample = row(i, 1.0, 1.0, "a")
            sample["scores"] = {"hallucination_rate": r}
            lines.append(json.dumps(sample))
        (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
        return folder

    base = write("base", [0.0] * 12)
    worse = write("worse", [1.0] * 12)
    other = write("other", [0.0] * 12)
    many = compare_many(base, [worse, other])
    assert [(run, m.metric) for run, m in many.regressions()] == [("worse", "hallucination_rate")]
    assert len(many.versus[0].worse) == 12 and many.versus[0].worse[0].worse[0].gain == -1.0


def test_labels_are_folder_names_made_unique(tmp_path):
    a = tmp_path / "x" / "out"
    b = tmp_path / "y" / "out"
    assert run_labels([a, b, tmp_path / "z" / "results.jsonl", tmp_path / "w.jsonl"]) == [
        "x/out",
        "y/out",
        "z",
        "w",
    ]
    assert run_labels([a, a]) == ["out", "out (2)"]
    assert run_labels([a, b], names=["old", "new"]) == ["old", "new"]
    with pytest.raises(JudgeError, match="give 2 distinct names"):
        run_labels([a, b], names=["same", "same"])


def test_errors_say_what_to_do(tmp_path, runs):
    with pytest.raises(JudgeError, match="at least one run"):
        compare_many(runs["base"], [])
    lone = tmp_path / "lone"
    lone.mkdir()
    sample = row(0, 1.0, 1.0, "a")
    sample["scores"] = {"answer_relevancy": 1.0}
    (lone / "results.jsonl").write_text(json.dumps(sample) + "\n")
    with pytest.raises(InputFormatError, match="share no metric"):
        compare_many(runs["base"], [runs["same"], lone])


def test_html_shows_the_table_the_changes_and_escapes_everything(tmp_path, runs):
    drops = BASE_F.copy()
    drops[2] -= 0.4
    tricky = write_run(tmp_path / "<i>tricky", drops, BASE_R, "<script>alert(1)</script>")
    many = compare_many(runs["base"], [runs["worse"], tricky])
    html = render_many(many)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; 2" in html
    assert "<i>tricky" not in html and "&lt;i&gt;tricky vs base" in html
    assert "across all 4 (run, metric) tests together" in html
    assert "faithfulness: worse" in html  # the worse run's significant change
    assert "claim of &#x27;base answer 2&#x27; checked against rule 2" in html  # evidence
    # "worse" dropped on all 30 questions: the first 25 are shown, the rest counted
    assert html.count("<details class=sample>") == 25 + 1
    assert "and 5 more in comparison.json" in html
