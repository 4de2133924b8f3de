"""report.html as a reader meets it: the worst samples in full (question, contexts with the
judge's grades, ground truth, answer, scores and the judgments behind them) with their
order stated, histograms with counts and axes, no dead cache path, and data that never
breaks out of the page."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from judge.cli.main import main
from judge.run.report_html import WORST_ORDER, histogram_svg, render_report
from judge.run.results import EvaluationResult
from judge.run.rows import ResultRow
from tests.helpers.report_page import parse
from tests.helpers.svg import svg_texts

ROOT = Path(__file__).resolve().parents[2]
METRICS = ["faithfulness", "context_precision"]


def row(i: int, scores: dict[str, float], **fields) -> ResultRow:
    return ResultRow(
        row=i,
        id=f"s{i}",
        question=f"Question {i}?",
        answer=f"Answer {i}.",
        contexts=[f"Context {i}.0 text.", f"Context {i}.1 text."],
        ground_truth=f"Truth {i}.",
        scores=scores,
        **fields,
    )


GRADED = {
    "answer_claims": ["Claim one.", "Claim two."],
    "answer_verdicts": [
        {"claim": 0, "context": 0, "reason": "Context 0 says so.", "verdict": "supported"},
        {"claim": 1, "context": None, "reason": "No context names a date.", "verdict": "not_found"},
    ],
    "context_grades": [
        {"context": 0, "grade": 3, "reason": "Gives the answer."},
        {"context": 1, "grade": 0, "reason": "About something else."},
    ],
}


def result_of(rows: list[ResultRow]) -> EvaluationResult:
    config = {"source": "t.jsonl", "metrics": METRICS, "cache": None}
    return EvaluationResult(rows, METRICS, config, {"requests": 0, "cost": None})


def sample_rows() -> list[ResultRow]:
    nan = math.nan
    return [
        row(0, {"faithfulness": 1.0, "context_precision": 1.0}),  # perfect: never "worst"
        row(1, {"faithfulness": 0.5, "context_precision": 1.0}),  # mean 0.75
        row(2, {"faithfulness": 0.2, "context_precision": 0.4}, evidence=GRADED),  # mean 0.3
        ResultRow(row=3, error="missing question"),  # bad input: first
        row(4, {"faithfulness": 0.4, "context_precision": 0.2}),  # mean 0.3, after row 2
        row(  # a judge failed: listed with the failures, though its other score is 1.0
            5,
            {"faithfulness": nan, "context_precision": 1.0},
            reasons={"faithfulness": "judge_error"},
            errors={"faithfulness": "the reply was not JSON"},
        ),
        row(  # 1.0 where defined, no_contexts elsewhere: not worst either
            6, {"faithfulness": nan, "context_precision": 1.0}, reasons={"faithfulness": "x"}
        ),
    ]


def test_worst_rows_are_failures_then_lowest_mean_with_perfect_rows_left_out():
    result = result_of(sample_rows())
    assert [r.row for r in result.worst()] == [3, 5, 2, 4, 1]
    assert [r.row for r in result.worst(2)] == [3, 5]


def test_the_report_states_the_order_and_shows_each_worst_sample_in_full():
    page = parse(render_report(result_of(sample_rows())))
    section = page.sections["Worst samples"]
    assert WORST_ORDER in " ".join(section.split())
    assert [s.split("·")[0].split()[:2] for s in page.samples] == [
        ["row", "3"], ["row", "5"], ["row", "2"], ["row", "4"], ["row", "1"]
    ]  # fmt: skip
    graded = page.samples[2]
    for text in (
        "Question 2?",
        "Context 2.0 text.",
        "Context 2.1 text.",
        "Truth 2.",
        "Answer 2.",
        "mean 0.300",
        "Gives the answer.",
        "About something else.",
        "No context names a date.",
    ):
        assert text in graded, text
    # the contexts in retrieval order, each with its grade
    assert graded.index("Context 2.0 text.") < graded.index("Context 2.1 text.")
    assert "3 – gives the answer" in graded and "0 – about something else" in graded
    assert "not found" in graded  # the unsupported claim and why
    failed = page.samples[1]
    assert "judge_error" in failed and "the reply was not JSON" in failed
    assert "missing question" in page.samples[0]


def test_a_run_with_no_imperfect_row_says_so():
    rows = [row(0, {"faithfulness": 1.0, "context_precision": 1.0})]
    page = parse(render_report(result_of(rows)))
    assert "No row scored below 1 and none failed" in page.sections["Worst samples"]
    assert page.samples == []


def test_data_never_breaks_out_of_the_page():
    canaries = json.loads((ROOT / "fixtures/injection/canaries.json").read_text("utf-8"))
    attack = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    rows = []
    for i, c in enumerate(canaries["canaries"]):
        rows.append(
            ResultRow(
                row=i,
                id=attack,
                question=c["question"] + attack,
                answer=c["answer"] + attack,
                contexts=[*c["contexts"], attack],
                ground_truth=(c.get("ground_truth") or "") + attack,
                scores={"faithfulness": 0.0, "context_precision": 0.5},
                errors={"faithfulness": attack},
                evidence={
                    "answer_claims": [attack],
                    "answer_verdicts": [
                        {"claim": 0, "context": attack, "reason": attack, "verdict": attack}
                    ],
                    "context_grades": [{"context": 0, "grade": attack, "reason": attack}],
                    attack: attack,
                },
            )
        )
    text = render_report(result_of(rows))
    page = parse(text)
    assert "script" not in page.tags and "img" not in page.tags
    assert not [a for a in page.attributes if a.startswith("on") or a == "src"]
    assert "<script" not in text.lower()
    assert all(attack in sample for sample in page.samples)


def test_histograms_have_counts_axes_and_say_what_nan_left_out():
    svg = histogram_svg([0.0, 0.05, 0.5, 0.55, 0.58, 1.0], "faithfulness", left_out=2)
    shown = svg_texts(svg)
    assert "faithfulness (n=6; 2 NaN left out)" in shown
    assert {"2", "3", "1"} <= set(shown)  # a count on every bar that has rows
    assert {"0", "0.5", "1"} <= set(shown)  # the x axis: the score range
    assert "rows" in shown and "score" in " ".join(shown)


def test_demo_report_end_to_end(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    text = (tmp_path / "demo" / "report.html").read_text("utf-8")
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text("utf-8"))
    # the demo's cache is deleted after the run: its path is not shown as if it were there
    assert summary["config"]["cache"] == "a temporary cache (deleted after the run)"
    assert "demo.sqlite" not in text and tempfile.gettempdir() not in text
    page = parse(text)
    assert "a temporary cache (deleted after the run)" in page.sections["Configuration"]
    assert WORST_ORDER in " ".join(page.sections["Worst samples"].split())
    assert 0 < len(page.samples) <= 10
    assert all("question" in s and "answer" in s for s in page.samples)
    assert "NaN left out" in page.sections["Distributions"]
    assert text == render_report(result_again(tmp_path / "demo"))  # deterministic


def result_again(folder: Path) -> EvaluationResult:
    rows = [
        ResultRow.from_json(json.loads(line))
        for line in (folder / "results.jsonl").read_text("utf-8").splitlines()
    ]
    summary = json.loads((folder / "summary.json").read_text("utf-8"))
    return EvaluationResult(rows, summary["config"]["metrics"], summary["config"], summary["usage"])
