"""One API shape: the public names, arguments that are never silently ignored, and a custom
scorer's failure that stays that metric's error."""

from __future__ import annotations

import json
import math
import threading
import time

import pytest
from pydantic import BaseModel

import judge
from judge.errors import JudgeError
from judge.llm.session import LLMSession
from judge.testing import FakeLLMServer
from tests.helpers.judging import ANSWER, CONTEXTS, QUESTION, TRUTH

SAMPLE = {"question": QUESTION, "answer": ANSWER, "contexts": CONTEXTS, "ground_truth": TRUTH}


class Rating(BaseModel):
    rating: int
    reason: str


PROMPT = """<<<system>>>
Rate the answer 0-5. Reply with {"rating": 0-5, "reason": "..."}.
<<<user>>>
<question>{{question}}</question>
<answer>{{answer}}</answer>"""


def rating_reply(body: dict) -> str:
    return json.dumps({"rating": 4, "reason": "mostly right"})


def test_public_names_are_importable_from_the_top():
    for name in ("judged_metric", "Metric", "MetricScore", "compare", "Comparison", "score"):
        assert name in judge.__all__ and getattr(judge, name) is not None
    assert judge.judged_metric.__module__ == "judge.metrics.custom"
    assert callable(judge.compare) and judge.compare.__module__ == "judge.comparison.evaluations"
    assert "LLMSession" not in judge.__all__  # internal: judge.llm.session.LLMSession


def test_score_and_evaluate_take_metrics_by_keyword_alike():
    with pytest.raises(TypeError):
        judge.evaluate([SAMPLE], ["faithfulness"])  # type: ignore[misc]
    with pytest.raises(TypeError):
        judge.score(QUESTION, ANSWER, CONTEXTS, TRUTH, ["faithfulness"])  # type: ignore[misc]


@pytest.mark.parametrize("given", [{"embeddings": True}, {"cache": True}, {"both": True}])
def test_a_session_with_embeddings_or_cache_beside_it_is_an_error(tmp_path, given):
    session = LLMSession(judge.LLM("openai/m", api_base="http://127.0.0.1:9/v1", api_key="k"))
    kwargs = {
        "embeddings": judge.Embeddings("openai/e") if "cache" not in given else None,
        "cache": tmp_path / "c.sqlite" if "embeddings" not in given else None,
    }
    with pytest.raises(JudgeError, match=r"beside an LLMSession.*LLMSession\(\.\.\.\)"):
        judge.score(QUESTION, ANSWER, CONTEXTS, llm=session, **kwargs)
    with pytest.raises(JudgeError, match="beside an LLMSession"):
        judge.evaluate([SAMPLE], metrics=["faithfulness"], llm=session, progress=False, **kwargs)


def test_a_raising_custom_scorer_is_that_metrics_judge_error():
    def broken(reply: Rating) -> float:
        return reply.rating / 0

    crashes = judge.judged_metric("crashes", prompt=PROMPT, output=Rating, score=broken)
    works = judge.judged_metric("works", prompt=PROMPT, output=Rating, score=lambda r: r.rating / 5)
    with FakeLLMServer(chat=rating_reply) as server:
        llm = judge.LLM("openai/m", api_base=server.base_url, api_key="k")
        result = judge.evaluate(
            [SAMPLE, {**SAMPLE, "answer": "Another answer."}],
            metrics=[crashes, works],
            llm=llm,
            progress=False,
        )
        one = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=[crashes, works], llm=llm)
    for row in result.rows:
        assert row.scores["works"] == pytest.approx(0.8)
        assert math.isnan(row.scores["crashes"]) and row.reasons["crashes"] == "judge_error"
        assert "ZeroDivisionError: division by zero" in row.errors["crashes"]
    assert math.isnan(one.scores["crashes"]) and one.reasons["crashes"] == "judge_error"
    assert "the scorer of metric 'crashes' raised ZeroDivisionError" in one.errors["crashes"]
    assert result.summary["crashes"].errored == 2 and result.summary["works"].scored == 2


def test_evaluate_concurrency_leaves_the_judges_request_limit_alone():
    in_flight, peak, lock = 0, 0, threading.Lock()

    def slow(body: dict) -> str:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.05)
        with lock:
            in_flight -= 1
        return rating_reply(body)

    metric = judge.judged_metric("rated", prompt=PROMPT, output=Rating, score=lambda r: 1.0)
    rows = [{**SAMPLE, "answer": f"Answer {i}."} for i in range(6)]
    with FakeLLMServer(chat=slow) as server:
        llm = judge.LLM("openai/m", api_base=server.base_url, api_key="k", max_concurrency=2)
        result = judge.evaluate(rows, metrics=[metric], llm=llm, concurrency=6, progress=False)
    assert [r.scores["rated"] for r in result.rows] == [1.0] * 6
    assert peak == 2  # six samples in flight, but never more requests than the LLM allows


def test_undefined_is_nan_in_python_and_pandas_and_null_in_json(tmp_path):
    with FakeLLMServer(chat=rating_reply) as server:
        llm = judge.LLM("openai/m", api_base=server.base_url, api_key="k")
        metric = judge.judged_metric("rated", prompt=PROMPT, output=Rating, score=lambda r: 0.5)
        rows = [SAMPLE, {**SAMPLE, "contexts": []}]
        result = judge.evaluate(rows, metrics=[metric, "faithfulness"], llm=llm, progress=False)
        one = judge.score(QUESTION, ANSWER, [], metrics=["faithfulness"], llm=llm)
        # A metric no row could score (its judge undecided everywhere): NaN in the summary
        # object, null in summary.json. One that no row has the fields for is refused.
        undecided = judge.judged_metric(
            "undecided", prompt=PROMPT, output=Rating, score=lambda r: (math.nan, "undecided")
        )
        nothing = judge.evaluate([SAMPLE], metrics=[undecided], llm=llm, progress=False)
        with pytest.raises(judge.InputFormatError, match="would score no row"):
            judge.evaluate([rows[1]], metrics=["faithfulness"], llm=llm, progress=False)
    undefined = result.rows[1]
    assert isinstance(undefined, judge.ResultRow)
    assert math.isnan(undefined.scores["faithfulness"])
    assert undefined.reasons["faithfulness"] == "no_contexts"
    assert math.isnan(one.scores["faithfulness"]) and one.reasons == undefined.reasons
    assert type(one.errors) is type(undefined.errors) is dict  # metric -> message, both
    assert math.isnan(result.to_pandas()["faithfulness"][1])
    result.write_jsonl(tmp_path / "results.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert lines[1]["scores"]["faithfulness"] is None and lines[1]["scores"]["rated"] == 0.5
    back = judge.ResultRow.from_json(lines[1])
    assert math.isnan(back.scores["faithfulness"]) and back.to_json() == lines[1]
    summary = nothing.summary["undecided"]
    assert math.isnan(summary.mean) and math.isnan(summary.ci_low)
    assert nothing.summary_dict()["metrics"]["undecided"]["mean"] is None
    json.dumps(nothing.summary_dict(), allow_nan=False)  # strict JSON: no NaN literal anywhere
    comparison = judge.compare(nothing, nothing)
    assert math.isnan(comparison.metrics["undecided"].mean_a)
    assert comparison.to_dict()["metrics"]["undecided"]["mean_a"] is None
    json.dumps(comparison.to_dict(), allow_nan=False)


def test_an_sqlite_failure_is_that_metrics_judge_error_not_the_runs(tmp_path):
    cache = judge.Cache(tmp_path / "c.sqlite")
    cache.close()  # every later read or write fails inside sqlite3
    metric = judge.judged_metric("rated", prompt=PROMPT, output=Rating, score=lambda r: 1.0)
    with FakeLLMServer(chat=rating_reply) as server:
        llm = judge.LLM("openai/m", api_base=server.base_url, api_key="k")
        result = judge.evaluate(
            [SAMPLE, {**SAMPLE, "answer": "Other."}],
            metrics=[metric],
            llm=llm,
            cache=cache,
            progress=False,
        )
    for row in result.rows:
        assert math.isnan(row.scores["rated"]) and row.reasons["rated"] == "judge_error"
        assert (
            "CacheError" in row.errors["rated"]
            and "reading the cache failed" in row.errors["rated"]
        )


def test_a_fresh_empty_cache_is_named_in_the_run_config(tmp_path):
    metric = judge.judged_metric("rated", prompt=PROMPT, output=Rating, score=lambda r: 1.0)
    with FakeLLMServer(chat=rating_reply) as server:
        llm = judge.LLM("openai/m", api_base=server.base_url, api_key="k")
        cache = judge.Cache(tmp_path / "new.sqlite")  # empty, so len(cache) == 0
        result = judge.evaluate([SAMPLE], metrics=[metric], llm=llm, cache=cache, progress=False)
    assert result.config["cache"] == str(tmp_path / "new.sqlite")
    assert result.config["cache_mode"] == "read-write"
