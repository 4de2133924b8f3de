"""`judge.dry_run`: every row checked and every request counted with none sent; the counts
it predicts are those a real run against the fake server then makes."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import pytest
from pydantic import BaseModel

import judge
from judge.errors import InputFormatError, UnknownMetricError
from judge.llm.pricing import token_prices
from judge.metrics.custom import judged_metric
from judge.run.dry_run import (
    NO_RETRIEVED_IDS,
    OVER_CONTEXT_WINDOW,
    DryRun,
    Estimate,
    MetricCheck,
    dry_run,
)
from judge.testing import FakeLLMServer

CHAT = "/v1/chat/completions"
EMBED = "/v1/embeddings"

# Distinct texts in every row, so no request of one row repeats another's.
ROWS = [
    {
        "id": "good",
        "question": "Who created Python?",
        "answer": "Guido van Rossum created Python. Python was released in 1991.",
        "contexts": ["Python was created by Guido van Rossum.", "Bananas are yellow."],
        "ground_truth": "Guido van Rossum created Python.",
    },
    {
        "id": "good2",
        "question": "What colour are ripe bananas?",
        "answer": "Ripe bananas are yellow.",
        "contexts": ["Ripe bananas turn yellow."],
        "ground_truth": "They are yellow.",
    },
    {
        "id": "no_truth",
        "question": "Where is the Eiffel Tower?",
        "answer": "The Eiffel Tower is in Paris.",
        "contexts": ["The Eiffel Tower stands in Paris, France."],
    },
    {
        "id": "no_contexts",
        "question": "When did the Berlin Wall fall?",
        "answer": "The Berlin Wall fell in 1989.",
        "contexts": [],
        "ground_truth": "It fell in 1989.",
    },
    {
        "id": "empty_answer",
        "question": "What is the capital of Japan?",
        "answer": "",
        "contexts": ["Tokyo is the capital of Japan."],
        "ground_truth": "Tokyo is the capital.",
    },
    {"id": "unreadable", "question": "Is this row readable?", "contexts": "not a list"},
]
# By hand, for the four default metrics (faithfulness, answer_relevancy, context_precision,
# context_recall): the claims of the answer and of the ground truth (one call each), one
# verify call for both, one reverse-questions call, one grading call per sample:
#   good, good2: 5 chat + 1 embedding; no_truth: claims of the answer, verify, reverse,
#   grade = 4 + 1; no_contexts: reverse only = 1 + 1; empty_answer: claims of the truth,
#   verify, grade = 3 + 0; unreadable: nothing.
DEFAULT_CHAT, DEFAULT_EMBED = 5 + 5 + 4 + 1 + 3, 4


@pytest.fixture
def server(models, fake_llm_server: FakeLLMServer) -> FakeLLMServer:
    return fake_llm_server


def actual_reasons(result, name: str) -> dict[str, int]:
    reasons = Counter(row.reasons.get(name) for row in result.rows)
    reasons.pop(None, None)
    return dict(reasons)


def test_default_metrics_predict_the_requests_a_run_then_makes(models, server):
    dry = dry_run(ROWS, llm=models["llm"], embeddings=models["embeddings"], max_error_rate=0.2)
    assert server.count() == 0  # nothing was sent: not even a model check
    assert (dry.total.chat_requests, dry.total.embedding_requests) == (
        DEFAULT_CHAT,
        DEFAULT_EMBED,
    )
    assert dry.total.by_judge == {
        "claims": 6,
        "verify": 4,
        "reverse_questions": 4,
        "context_relevance": 4,
    }
    assert dry.usable and dry.problems == []
    assert dry.unreadable == [
        (5, "contexts must be a list of strings (a JSON list in CSV), got 'not a list'")
    ]

    result = judge.evaluate(ROWS, progress=False, **models)
    assert (server.count(CHAT), server.count(EMBED)) == (DEFAULT_CHAT, DEFAULT_EMBED)
    for check in dry.metrics:
        assert check.not_scored == actual_reasons(result, check.name), check.name
        scored = sum(not math.isnan(row.scores[check.name]) for row in result.rows)
        assert check.scored == scored, check.name


@pytest.mark.parametrize(
    "metrics",
    [
        ["faithfulness"],
        ["context_recall"],
        ["answer_correctness"],
        ["context_focus", "context_relevance", "context_ndcg@3"],
        ["citation_accuracy", "faithfulness_strict", "hallucination_rate"],
        ["faithfulness", "context_recall", "answer_correctness", "answer_relevancy"],
    ],
)
def test_each_metric_set_predicts_a_runs_requests(models, server, metrics):
    dry = dry_run(ROWS, metrics=metrics, max_error_rate=1, **models)
    assert server.count() == 0
    result = judge.evaluate(ROWS, metrics=metrics, progress=False, **models)
    assert (dry.total.chat_requests, dry.total.embedding_requests) == (
        server.count(CHAT),
        server.count(EMBED),
    )
    for check in dry.metrics:
        assert check.not_scored == actual_reasons(result, check.name), check.name


def test_each_metric_alone_and_the_shared_total(models, server):
    dry = dry_run(ROWS, metrics=["faithfulness", "context_recall"], max_error_rate=1, **models)
    alone = {m.name: m.estimate.chat_requests for m in dry.metrics}
    # Each alone: claims of its text + verify, in the 3 rows it scores (good, good2 and
    # no_truth for faithfulness; good, good2 and empty_answer for context_recall).
    assert alone == {"faithfulness": 2 * 3, "context_recall": 2 * 3}
    # Together the verify call is shared: claims of both texts, then one verify, in good
    # and good2; no_truth and empty_answer as alone.
    assert dry.total.chat_requests == (2 + 1) * 2 + 2 + 2 == 10 < sum(alone.values())
    assert server.count() == 0


def test_a_custom_metric_counts_its_request(models, server):
    class Rating(BaseModel):
        rating: int
        reason: str

    custom = judged_metric(
        "rated",
        prompt="<<<system>>>\nRate 0-5.\n<<<user>>>\n<answer>{{answer}}</answer>",
        output=Rating,
        score=lambda r: r.rating / 5,
    )
    dry = dry_run(ROWS, metrics=[custom], max_error_rate=1, **models)
    # Every readable row has an answer field (empty counts): five requests.
    assert dry.total.chat_requests == 5 and dry.metrics[0].scored == 5
    assert server.count() == 0
    server.chat = lambda body: json.dumps({"rating": 4, "reason": "fine"})
    judge.evaluate(ROWS, metrics=[custom], progress=False, **models)
    assert server.count(CHAT) == 5


def test_no_embedding_model_leaves_the_default_out_and_refuses_it_named(models, server):
    default = dry_run(ROWS, llm=models["llm"], max_error_rate=0.2)
    assert [m.name for m in default.metrics] == [
        "faithfulness",
        "context_precision",
        "context_recall",
    ]
    assert default.usable and any("answer_relevancy" in n for n in default.notes)

    named = dry_run(ROWS, metrics=["answer_relevancy"], llm=models["llm"], max_error_rate=0.2)
    (check,) = named.metrics
    assert check.cannot_run is not None and "embeddings=Embeddings(" in check.cannot_run
    assert check.scored == 4 and check.estimate.chat_requests == 4  # what it would take
    assert named.total.chat_requests == 0  # a run would not start
    assert not named.usable and "answer_relevancy needs an embedding model" in named.problems[0]
    assert server.count() == 0


def test_a_metric_that_scores_no_row_makes_the_data_unusable(models, server):
    rows = [{k: v for k, v in r.items() if k != "ground_truth"} for r in ROWS[:3]]
    dry = dry_run(rows, metrics=["faithfulness", "context_recall"], **models)
    recall = dry.metrics[1]
    assert (recall.scored, recall.not_scored) == (0, {"no_ground_truth": 3})
    assert dry.problems == [
        "context_recall would score no row (3 no_ground_truth): no ground_truth column (looked "
        "for ground_truth, reference, ground_truths; columns: question, answer, contexts, id); "
        "map yours with column_map={'ground_truth': ...}, or leave it out (metrics='faithfulness')"
    ]
    assert server.count() == 0


def test_empty_answers_and_missing_contexts_everywhere(models, server):
    rows = [
        {"question": "Q one?", "answer": " ", "contexts": ["c"]},
        {"question": "Q two?", "answer": "An answer.", "contexts": []},
    ]
    dry = dry_run(rows, metrics=["faithfulness"], **models)
    assert dry.metrics[0].not_scored == {"empty_answer": 1, "no_contexts": 1}
    assert dry.total.chat_requests == 0 and not dry.usable
    assert server.count() == 0


def test_unreadable_rows_count_against_max_error_rate(models, server):
    rows = [*ROWS[:2], ROWS[5]]
    assert not dry_run(rows, metrics=["faithfulness"], **models).usable  # 1 of 3 > 0.05
    within = dry_run(rows, metrics=["faithfulness"], max_error_rate=0.5, **models)
    assert within.usable and within.metrics[0].not_scored == {"row_error": 1}
    assert "cannot be read" in dry_run(rows, metrics=["faithfulness"], **models).problems[0]
    assert server.count() == 0


def test_requests_over_the_context_window_are_refused(models, server):
    llm = judge.LLM("openai/judge-model", api_base=server.base_url, context_window=600)
    long_row = dict(ROWS[0], id="long", contexts=["Python is a language. " * 200])
    dry = dry_run([ROWS[1], long_row], metrics=["context_precision"], llm=llm)
    assert dry.context_window == 600
    assert dry.metrics[0].not_scored == {OVER_CONTEXT_WINDOW: 1}
    assert (dry.total.chat_requests, dry.total.refused, dry.rows_over_window) == (1, 1, 1)
    assert not dry.usable and "context window of 600" in dry.problems[-1]
    assert server.count() == 0


def test_cost_from_a_known_price_and_never_a_false_zero(server):
    rows = ROWS[:2]
    if token_prices("openai/gpt-4o-mini") is None:
        pytest.skip("litellm's price map is not installed")
    priced = dry_run(rows, metrics=["faithfulness"], llm=judge.LLM("openai/gpt-4o-mini"))
    prompt, completion = token_prices("openai/gpt-4o-mini") or (0, 0)
    e = priced.total
    assert e.cost == pytest.approx(e.prompt_tokens * prompt + e.completion_tokens * completion)
    assert e.cost > 0
    unpriced = dry_run(rows, metrics=["faithfulness"], llm=judge.LLM("openai/no-such-model-x"))
    assert unpriced.total.cost is None and "price of openai/no-such-model-x" in unpriced.notes[0]
    no_model = dry_run(rows, metrics=["faithfulness"])
    assert no_model.total.cost is None and no_model.total.chat_requests == 4
    assert "no judge model" in no_model.notes[0] and no_model.usable
    assert "price unknown" in unpriced.table() and "no model" in no_model.table()
    assert server.count() == 0


def test_retrieval_rows_without_judgments_or_ranking(server):
    rows = [
        {"question": "a?", "retrieved_ids": ["d1", "d2"], "relevance": ["d1"]},
        {"question": "b?", "retrieved_ids": ["d3"], "relevance": None},
        {"question": "c?", "retrieved_ids": None, "relevance": ["d4"]},
    ]
    dry = dry_run(rows, metrics=["ndcg@10", "recall@10"])
    for check in dry.metrics:
        assert check.kind == "retrieval"
        assert (check.scored, check.not_scored) == (2, {"no_relevance_judgments": 1})
        assert check.warnings == {NO_RETRIEVED_IDS: 1}
    assert dry.total.chat_requests == 0 and dry.usable


def test_columns_are_mapped_as_a_run_maps_them(models, server):
    rows = [{"asked": r["question"], "response": r.get("answer")} for r in ROWS[:2]]
    with pytest.raises(InputFormatError, match="question"):
        dry_run(rows, metrics=["answer_relevancy"], **models)
    dry = dry_run(rows, metrics=["answer_relevancy"], column_map={"question": "asked"}, **models)
    assert (dry.total.chat_requests, dry.total.embedding_requests) == (2, 2)
    with pytest.raises(UnknownMetricError, match="faithfulness"):
        dry_run(rows, metrics=["faithfullness"], column_map={"question": "asked"}, **models)
    assert server.count() == 0


def test_a_shard_counts_its_own_rows(models, server):
    whole = dry_run(ROWS, metrics=["faithfulness"], max_error_rate=1, **models)
    halves = [
        dry_run(ROWS, metrics=["faithfulness"], max_error_rate=1, shard=f"{i}/2", **models)
        for i in (1, 2)
    ]
    assert [h.rows for h in halves] == [3, 3]
    assert sum(h.total.chat_requests for h in halves) == whole.total.chat_requests == 6


def test_the_json_and_the_table_say_it_is_an_estimate(models, server):
    dry = dry_run(ROWS, max_error_rate=0.2, **models)
    data = dry.to_dict()
    assert data["dry_run"] is True and data["usable"] is True
    assert data["total"]["chat_requests"] == DEFAULT_CHAT
    assert any("estimate" in a for a in data["assumptions"])
    table = dry.table()
    assert "no request was made" in table and "shared judgments once" in table
    assert "1 no_ground_truth" in table


def test_a_bad_max_error_rate_is_refused_in_python_words():
    with pytest.raises(judge.JudgeError, match=r"^max_error_rate 2"):
        dry_run(ROWS, max_error_rate=2)


def test_the_top_level_names():
    assert judge.dry_run is dry_run and "dry_run" in judge.__all__ and "DryRun" in judge.__all__


def test_a_cost_below_a_hundredth_of_a_cent_is_not_shown_as_zero():
    tiny = Estimate(chat_requests=1, prompt_tokens=10, cost=0.00004)
    nothing = Estimate()
    nothing.priced(None, None)
    check = MetricCheck("faithfulness", "judged", scored=1, estimate=tiny)
    shown = DryRun("d.jsonl", 1, [], "openai/gpt-4o-mini", None, None, [check], tiny).table()
    assert "<$0.0001" in shown and "$0.0000" not in shown
    free = DryRun("d.jsonl", 1, [], "openai/gpt-4o-mini", None, None, [], nothing).table()
    total = next(line for line in free.splitlines() if line.startswith("total"))
    assert re.search(r"\s\$0\s", total)  # nothing is sent: a true 0
