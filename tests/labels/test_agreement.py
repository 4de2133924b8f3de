"""`judge.agreement` against the fake server: each label kind, NaN rows counted by reason,
bad labels refused before any request, undefined measures, the --by breakdown, the report."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel
from scipy import stats
from sklearn import metrics as skm

import judge
from judge.errors import InputFormatError
from judge.labels import kinds
from judge.labels.html import render_agreement
from judge.testing import FakeLLMServer, data_blocks, heuristic_judge
from judge.testing.replies import FakeHTTPError
from tests.helpers.labels import BINARY, CONTEXTS, PAIRS, SCORES, SUPPORTED, UNSUPPORTED, row


def failing_on(marker: str):
    """The heuristic judge, except for requests holding `marker`: HTTP 400, a judge_error."""

    def chat(body: dict[str, Any]) -> str:
        if marker in json.dumps(body):
            raise FakeHTTPError(400, "scripted refusal")
        return heuristic_judge(body)

    return chat


@pytest.fixture
def server():
    with FakeLLMServer(chat=heuristic_judge) as fake:
        yield fake


def llm(server: FakeLLMServer) -> judge.LLM:
    return judge.LLM("openai/judge", api_base=server.base_url, api_key="k", max_retries=0)


def run(server: FakeLLMServer, data: Any, **kwargs: Any) -> judge.AgreementResult:
    kwargs.setdefault("metric", "faithfulness")
    return judge.agreement(data, llm=llm(server), progress=False, **kwargs)


def test_binary_labels_match_an_independent_computation(server):
    result = run(server, BINARY, label="faithful")
    labels = [r["faithful"] for r in BINARY[:8]]
    o = result.overall
    assert (o.rows, o.scored, o.unscored) == (9, 8, {"empty_answer": 1})
    assert o.counts == {"positive": 4, "negative": 4}
    m = o.measures
    assert m["auroc"].value == pytest.approx(skm.roc_auc_score(labels, SCORES))
    predicted = [int(s >= 0.5) for s in SCORES]
    assert m["balanced_accuracy@0.5"].value == pytest.approx(
        skm.balanced_accuracy_score(labels, predicted)
    )
    assert m["f1_negative@0.5"].value == pytest.approx(skm.f1_score(labels, predicted, pos_label=0))
    assert m["kappa@0.5"].value == pytest.approx(skm.cohen_kappa_score(labels, predicted))
    # cuts at 1/3 and 2/3 both give balanced accuracy 0.75, equally near 0.5: the lower wins
    assert m["best_threshold"].value == pytest.approx(1 / 3)
    assert m["balanced_accuracy@best"].value == pytest.approx(0.75)
    for measure in m.values():
        assert measure.ci_low <= measure.value <= measure.ci_high
    assert result.config["orientation"] == "score" and result.config["model"] == "openai/judge"
    assert len(result.evaluation.rows) == 9 and result.metric == "faithfulness"


def test_the_worst_disagreements_come_first_with_the_judges_evidence(server):
    result = run(server, BINARY, label="faithful", disagreements=2)
    worst = result.disagreements
    assert [d["row"] for d in worst] == [7, 6]  # gap 1.0, then 2/3; row 3 (gap 0.5) cut off
    assert worst[0]["label"] == 0 and worst[0]["score"] == 1.0 and worst[0]["gap"] == 1.0
    claims = worst[1]["evidence"]["answer_claims"]
    assert claims == [SUPPORTED[0] + ".", UNSUPPORTED[0] + ".", UNSUPPORTED[1] + "."]
    page = render_agreement(result)
    assert "Worst disagreements" in page and "Python was created by Larry Wall." in page
    assert "not found" in page and "judge <b>0.333</b>" in page and "label <b>1</b>" in page
    assert "http" not in page.lower()  # self-contained


def test_each_disagreement_shows_its_contexts_and_ground_truth(server):
    rows = [{**r, "ground_truth": f"Truth of row {i}."} for i, r in enumerate(BINARY)]
    result = run(server, rows, label="faithful", disagreements=2)
    page = render_agreement(result)
    side = page[page.index("Worst disagreements") :]
    assert side.count("<b>retrieved contexts</b>") == 2
    at = [side.index(c) for c in CONTEXTS]  # the first disagreement's, in retrieval order
    assert at == sorted(at)
    assert "<b>ground truth</b> Truth of row 7." in side
    assert "<b>ground truth</b> Truth of row 6." in side


def test_rows_the_judge_fails_on_are_counted_by_reason(server):
    server.chat = failing_on("capital of Spain")
    result = run(server, BINARY, label="faithful")
    # rows 4 and 6 hold that claim: the judge's calls fail for them
    assert result.overall.unscored == {"empty_answer": 1, "judge_error": 2}
    assert result.overall.scored == 6
    assert result.to_dict()["overall"]["unscored"] == {"empty_answer": 1, "judge_error": 2}


def test_by_breaks_the_measures_down_per_group(server):
    result = run(server, BINARY, label="faithful", by="lang")
    assert list(result.groups) == ["en", "zh"]
    en = result.groups["en"]
    assert (en.rows, en.scored, en.unscored) == (5, 4, {"empty_answer": 1})
    expected, _ = kinds.binary(np.array([1, 2 / 3, 0, 1 / 3]), np.array([1.0, 1, 0, 1]))
    assert en.measures == expected
    zh = result.groups["zh"]
    assert zh.measures["auroc"].value == pytest.approx(
        skm.roc_auc_score([1, 0, 0, 0], [1, 1 / 2, 0, 1])
    )
    assert "by lang:" in result.table() and "\nen " in result.table()


def test_one_class_is_reported_undefined_not_a_crash(server):
    only_faithful = [r for r in BINARY if r["faithful"] == 1]
    result = run(server, only_faithful, label="faithful")
    auroc = result.overall.measures["auroc"]
    assert math.isnan(auroc.value) and "needs both 0 and 1" in auroc.note
    data = result.to_dict()
    assert data["overall"]["measures"]["auroc"]["value"] is None  # null in JSON
    json.dumps(data, allow_nan=False)
    assert "needs both 0 and 1" in result.table()


def test_graded_labels_match_scipy(server):
    grades = [5, 4, 4, 2, 1, 2, 3, 1]
    rows = [{**r, "grade": g} for r, g in zip(BINARY[:8], grades, strict=True)]
    result = run(server, rows, label="grade", kind="graded")
    m = result.overall.measures
    assert m["spearman"].value == pytest.approx(stats.spearmanr(SCORES, grades).statistic)
    assert m["kendall_tau_b"].value == pytest.approx(stats.kendalltau(SCORES, grades).statistic)
    assert m["pearson"].value == pytest.approx(stats.pearsonr(SCORES, grades).statistic)
    assert result.overall.counts == {"distinct_labels": 5, "distinct_scores": 5}
    assert result.disagreements[0]["row"] == 7  # top score, bottom grade


def test_pairwise_preferences(server):
    result = run(server, PAIRS, label="better", pair="pair")
    assert result.kind == "pairwise"  # implied by the pair column
    o = result.overall
    assert o.counts == {"pairs": 4, "compared": 4, "wins": 2, "ties": 1, "losses": 1}
    assert o.measures["accuracy"].value == pytest.approx(0.625)
    assert o.measures["tie_rate"].value == pytest.approx(0.25)
    assert o.measures["sign_test_p"].value == stats.binomtest(2, 3).pvalue == 1.0
    assert [d["pair"] for d in result.disagreements] == ["c", "b"]
    assert result.disagreements[0]["margin"] == 1.0
    assert result.disagreements[0]["preferred"]["row"] == 4
    page = render_agreement(result)
    assert "pair c" in page and "preferred</b> row 4" in page


def test_an_unscored_row_leaves_its_pair_out(server):
    rows = [*PAIRS, row(8, 0, 0, pair="e", better=1), row(9, 1, 0, pair="e", better=0)]
    result = run(server, rows, label="better", pair="pair")
    o = result.overall
    assert o.counts["pairs"] == 5 and o.counts["compared"] == 4
    assert o.unscored == {"empty_answer": 1} and o.scored == 9


def test_a_lower_is_better_metric_is_compared_as_one_minus_the_score(server):
    result = run(server, BINARY, label="faithful", metric="hallucination_rate")
    assert result.config["orientation"] == "1 - score (lower is better)"
    hallucinates = [0, 0, 1, 1, 1, 1, 1, 0]
    labels = [r["faithful"] for r in BINARY[:8]]
    expected = skm.roc_auc_score(labels, [1 - h for h in hallucinates])
    assert expected > 0.5 and result.overall.measures["auroc"].value == pytest.approx(expected)


class Rating(BaseModel):
    rating: int
    reason: str


RATE = """<<<system>>>
Rate how well the answer is grounded, 0-4. Reply with {"rating": 0-4, "reason": "..."}.
<<<user>>>
<answer>{{answer}}</answer>"""


def test_a_custom_metric_with_scripted_replies(server):
    ratings = dict(zip((r["answer"] for r in BINARY[:5]), [4, 3, 3, 0, 1], strict=True))

    def scripted(body: dict[str, Any]) -> str:
        rating = ratings[data_blocks(body["messages"][-1]["content"])["answer"]]
        return json.dumps({"rating": rating, "reason": f"scripted {rating}"})

    server.chat = scripted
    rated = judge.judged_metric("rated", prompt=RATE, output=Rating, score=lambda r: r.rating / 4)
    rows = [{**r, "grade": g} for r, g in zip(BINARY[:5], [5, 4, 3, 2, 1], strict=True)]
    result = run(server, rows, metric=rated, label="grade", kind="graded")
    assert result.metric == "rated"
    # ranks of the ratings 4, 3, 3, 0, 1 against grades 5..1
    assert result.overall.measures["spearman"].value == pytest.approx(
        stats.spearmanr([4, 3, 3, 0, 1], [5, 4, 3, 2, 1]).statistic
    )
    assert result.disagreements[0]["evidence"]["rated"]["reason"].startswith("scripted")
    assert server.count() == 5


@pytest.mark.parametrize(
    ("rows", "kwargs", "message"),
    [
        (BINARY, {"label": "human"}, "no label column 'human'"),
        (
            [*BINARY, row(9, 1, 0, faithful=2), row(10, 1, 0, faithful="yes")],
            {"label": "faithful"},
            "must be 0 or 1 (1 = faithful/relevant; a graded scale: --kind graded); "
            "rows 9 (2), 10 ('yes')",
        ),
        ([*BINARY, row(9, 1, 0)], {"label": "faithful"}, "rows 9 (None)"),
        (
            [{**r, "faithful": "high"} for r in BINARY],
            {"label": "faithful", "kind": "graded"},
            "graded labels in 'faithful' must be a number; rows 0 ('high'), 1",
        ),
        (BINARY, {"label": "faithful", "by": "source"}, "no --by column 'source'"),
        (PAIRS, {"label": "better", "kind": "pairwise"}, "need a pair column (--pair COLUMN)"),
        (PAIRS, {"label": "better", "pair": "pair_id"}, "no pair column 'pair_id'"),
        (
            [{**r, "better": 1} if r["id"] == "r1" else r for r in PAIRS],
            {"label": "better", "pair": "pair"},
            "pairs 'a' (2 rows, 2 preferred) are not",
        ),
        (
            [*PAIRS, row(8, 1, 0, pair="d", better=0)],
            {"label": "better", "pair": "pair"},
            "pairs 'd' (3 rows, 1 preferred) are not",
        ),
        (
            [{**r, "lang": r["id"]} for r in PAIRS],
            {"label": "better", "pair": "pair", "by": "lang"},
            "must share their 'lang' value",
        ),
        (BINARY, {"label": "faithful", "kind": "ordinal"}, "kind 'ordinal' is not one of"),
    ],
)
def test_bad_labels_are_refused_before_any_request(server, rows, kwargs, message):
    with pytest.raises(InputFormatError) as caught:
        run(server, rows, **kwargs)
    assert message in str(caught.value)
    assert server.count() == 0
