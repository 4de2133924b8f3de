"""Property tests: load_rows, judge.evaluate and the TREC readers on arbitrary input, and the
edge sizes (10,000 contexts, a 5 MB context, invalid UTF-8).

The contract under test: a whole-input problem is one `InputFormatError`; anything wrong
with a single row is that row's `error`, never an exception, and never stops the run.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pandas
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import judge
from judge import LLM
from judge.errors import InputFormatError
from judge.ir import read_qrels, read_run
from judge.llm.pricing import estimate_tokens
from judge.run.data import COLUMNS, load_rows
from judge.testing import FakeLLMServer, heuristic_judge

KEYS = (
    "question",
    "answer",
    "contexts",
    "ground_truth",
    "id",
    "user_input",
    "response",
    "retrieved_contexts",
    "reference",
    "retrieved_ids",
    "relevance",
    "other",
)
HUGE = "x" * 100_000
DEEP = "[" * 100_000  # huge text that a CSV-style "JSON list in a cell" reader may choke on
SPECIAL_TEXTS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "😀👍🏽🇨🇳",
    "مرحبا بالعالم",
    "שלום \u202eevil\u202c",
    "\ufeffBOM",
    "什么是 RAG？",
    '["a", "b"]',
    '{"d": 1}',
    "[1, 2]",
    "nan",
    "null",
    HUGE,
    DEEP,
]
# Lone surrogates (category Cs) are not valid JSON text, so they are left out.
texts = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=30),
    st.sampled_from(SPECIAL_TEXTS),
)
scalars = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    texts,
)
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=8,
)
values = st.one_of(
    json_like,
    st.lists(texts, max_size=5),  # the shape of contexts and retrieved ids
    st.dictionaries(texts, st.integers(-2, 3), max_size=3),  # the shape of relevance
)
plain_rows = st.dictionaries(st.sampled_from(KEYS), values, max_size=6)
# Most rows have a question, so that the per-row paths are what is exercised.
rows_with_question = st.builds(lambda q, rest: {**rest, "question": q}, texts, plain_rows)
# ... and some are well formed, so that the judges are called on odd but valid text.
well_formed = st.fixed_dictionaries(
    {"question": texts, "answer": texts, "contexts": st.lists(texts, max_size=4)},
    optional={"ground_truth": texts, "id": scalars, "other": json_like},
)
records = st.lists(st.one_of(well_formed, rows_with_question, plain_rows), max_size=6)

NAN_CELL = [  # a DataFrame's missing cell in an unused column is a float NaN
    {"question": "q", "answer": "a b.", "contexts": ["a b"], "other": "note"},
    {"question": "q", "answer": "a b.", "contexts": ["a b"], "other": math.nan},
]


def _has_question_column(rows: list[dict[str, Any]]) -> bool:
    return any(name in row for row in rows for name in COLUMNS["question"].names)


def _check_rows(given_rows: list[Any], rows: list[Any], columns: dict[str, str]) -> None:
    """One Row per record, in order: a Sample, or else a non-empty error."""
    assert [r.number for r in rows] == list(range(len(given_rows)))
    for record, row in zip(given_rows, rows, strict=True):
        if row.sample is None:
            assert isinstance(row.error, str) and row.error.strip(), row
        else:
            assert row.error is None
            assert row.sample.question == record[columns["question"]]
            assert isinstance(row.sample.contexts, tuple)
            assert all(isinstance(c, str) for c in row.sample.contexts)
            assert row.sample.answer is None or isinstance(row.sample.answer, str)


def _load_or_whole_input_error(data: Any, given_rows: list[Any]) -> None:
    try:
        rows, columns, _ = load_rows(data)
    except InputFormatError as exc:
        assert not given_rows or not _has_question_column(given_rows), exc
        return
    _check_rows(given_rows, rows, columns)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
@example([{"question": "q", "relevance": {"d1": math.inf}}])  # grade that int() cannot take
@example([{"question": "q", "contexts": DEEP}])  # nested deeper than json's recursion limit
@example([{"question": "q", "relevance": DEEP}])
@example([{"user_input": "q", "other": [math.nan, {"x": None}]}])
@example([{"answer": "no question column"}])
@example([{"user_input": [{}]}])  # a conversation that cannot be read: its error row
@example([])
def test_load_rows_gives_one_row_per_record_or_a_whole_input_error(given_rows):
    _load_or_whole_input_error(given_rows, given_rows)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.sampled_from([".jsonl", ".json"]))
@example([{"question": "q", "retrieved_ids": DEEP}], ".jsonl")
@example([{"question": "q", "other": math.nan}, {"question": "q", "id": math.inf}], ".jsonl")
def test_load_rows_from_files_of_such_rows(given_rows, suffix):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"data{suffix}"
        if suffix == ".jsonl":  # NaN and Infinity are written as Python's json writes them
            path.write_text("".join(json.dumps(r) + "\n" for r in given_rows), encoding="utf-8")
        else:
            path.write_text(json.dumps(given_rows), encoding="utf-8")
        _load_or_whole_input_error(str(path), given_rows)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(json_like, max_size=4), st.sampled_from([".jsonl", ".json"]))
@example([{"question": "q"}, 42], ".jsonl")  # a line that is JSON but not an object
@example([{"question": "q"}, "text"], ".jsonl")
@example([{"question": "q"}, None], ".json")
@example([[{"question": "q"}]], ".jsonl")
def test_load_rows_on_files_of_arbitrary_json_values(items, suffix):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"data{suffix}"
        if suffix == ".jsonl":
            path.write_text("".join(json.dumps(v) + "\n" for v in items), encoding="utf-8")
        else:
            path.write_text(json.dumps(items), encoding="utf-8")
        try:
            rows, _, _ = load_rows(str(path))
        except InputFormatError:
            return
        assert all(isinstance(v, dict) for v in items)  # anything else: a whole-input error
        assert len(rows) == len(items)
        assert all(r.sample is not None or (r.error or "").strip() for r in rows)


JUDGED = ["faithfulness", "context_precision"]
NAN_REASONS = {"row_error", "empty_answer", "no_contexts", "no_claims", "judge_error"}


def _unscorable(rows: list[dict[str, Any]]) -> bool:
    """Whether a metric of JUDGED lacks its fields in every readable row, or no row is
    readable (a run is then refused): faithfulness needs an answer and contexts in one
    row, context_precision contexts."""
    samples = [r.sample for r in load_rows(rows)[0] if r.sample is not None]
    with_contexts = [s for s in samples if s.contexts]
    answered = [s for s in with_contexts if s.answer is not None and s.answer.strip()]
    return not (with_contexts and answered)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one server for all examples is what we want
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(records)
@example(NAN_CELL)
def test_evaluate_reports_every_row_once_with_scores_in_range(fake_llm_server, given_rows):
    fake_llm_server.chat = heuristic_judge
    llm = LLM("openai/x", api_base=fake_llm_server.base_url, api_key="x", max_retries=0, timeout=30)
    try:
        result = judge.evaluate(given_rows, metrics=JUDGED, llm=llm, progress=False)
    except InputFormatError as exc:
        assert not given_rows or not _has_question_column(given_rows) or _unscorable(given_rows), (
            exc
        )
        return
    assert not _unscorable(given_rows)  # no metric that scores no row for want of fields
    assert [r.row for r in result.rows] == list(range(len(given_rows)))
    for row in result.rows:
        assert set(row.scores) == set(JUDGED)
        for metric, value in row.scores.items():
            if math.isnan(value):
                assert row.reasons.get(metric) in NAN_REASONS, row
                if row.reasons[metric] == "row_error":
                    assert row.error
                if row.reasons[metric] == "judge_error":
                    assert row.errors[metric]
            else:
                assert isinstance(value, float) and 0.0 <= value <= 1.0, row
    for summary in result.summary.values():
        assert summary.scored + summary.errored + sum(summary.nan.values()) == len(given_rows)


def test_evaluate_dataframe_with_a_missing_cell_in_an_unused_column(fake_llm_server):
    """A missing cell of a DataFrame is NaN; a column judge does not read must not matter."""
    fake_llm_server.chat = heuristic_judge
    llm = LLM("openai/x", api_base=fake_llm_server.base_url, api_key="x", max_retries=0)
    frame = pandas.DataFrame(
        [
            {"question": "q", "answer": "a b.", "contexts": ["a b"], "note": "checked"},
            {"question": "q2", "answer": "a b.", "contexts": ["a b"]},
        ]
    )
    result = judge.evaluate(frame, metrics=["faithfulness"], llm=llm, progress=False)
    assert [r.scores["faithfulness"] for r in result.rows] == [1.0, 1.0]


# Edge sizes ---------------------------------------------------------------------------------

REFUSED_JUDGES = ("You check numbered", "You judge how useful")  # verify, context grading


def _score_oversized(server: FakeLLMServer, contexts: list[str]) -> judge.SampleResult:
    server.chat = heuristic_judge
    llm = LLM(
        "openai/x",
        api_base=server.base_url,
        api_key="x",
        max_retries=0,
        context_window=128_000,
    )
    return judge.score(
        "When was Python 3.0 released?",
        "Python 3.0 was released in 2008.",
        contexts,
        metrics=JUDGED,
        llm=llm,
    )


@pytest.mark.parametrize(
    "contexts",
    [
        pytest.param([f"context {i}: " + "word " * 20 for i in range(10_000)], id="10k-contexts"),
        pytest.param(["Python 3.0 came out in 2008. " + "filler " * 714_286], id="5MB-context"),
    ],
)
def test_oversized_requests_are_refused_before_sending(fake_llm_server, contexts):
    assert sum(len(c) for c in contexts) > 4 * 128_000  # over the window by the 4-chars rule
    result = _score_oversized(fake_llm_server, contexts)
    for metric in JUDGED:
        assert math.isnan(result.scores[metric])
        assert result.reasons[metric] == "judge_error"
        assert result.errors[metric].startswith("ContextWindowError:")
        assert "context window of 128,000" in result.errors[metric]
        assert "it was not sent" in result.errors[metric]
    # Only the small claims request reached the server, never the oversized ones.
    bodies = [r.body for r in fake_llm_server.requests]
    assert len(bodies) == 1
    assert bodies[0]["messages"][0]["content"].startswith("You split")
    assert not any(b["messages"][0]["content"].startswith(REFUSED_JUDGES) for b in bodies)
    assert all(len(json.dumps(b)) < 20_000 for b in bodies)


def test_a_reask_over_the_context_window_is_not_sent_either(fake_llm_server):
    """The re-ask carries the model's bad reply: that request must fit the window too."""

    def chat(body):
        if body["messages"][0]["content"].startswith("You check numbered"):
            return "Every claim looks fine to me. " + "blah " * 4_000  # ~5,000 tokens, no JSON
        return heuristic_judge(body)

    fake_llm_server.chat = chat
    window = 3_000
    llm = LLM(
        "openai/x",
        api_base=fake_llm_server.base_url,
        api_key="x",
        max_retries=0,
        context_window=window,
    )
    result = judge.score(
        "When was Python 3.0 released?",
        "Python 3.0 was released in 2008.",
        ["Python 3.0 came out in 2008."],
        metrics=["faithfulness"],
        llm=llm,
    )
    assert math.isnan(result.scores["faithfulness"])
    assert result.reasons["faithfulness"] == "judge_error"
    sizes = [
        sum(estimate_tokens(m["content"]) for m in r.body["messages"])
        for r in fake_llm_server.requests
    ]
    assert all(size <= window for size in sizes), sizes


def test_invalid_utf8_in_a_jsonl_row_is_a_clear_input_error(tmp_path, fake_llm_server):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"question": "fine"}\n{"question": "caf\xe9 \xff"}\n')
    with pytest.raises(InputFormatError) as caught:
        load_rows(path)
    message = str(caught.value)
    assert str(path) in message and "utf-8" in message.lower()
    assert "Traceback" not in message
    llm = LLM("openai/x", api_base=fake_llm_server.base_url, api_key="x")
    with pytest.raises(InputFormatError, match="utf-8"):
        judge.evaluate(path, metrics=JUDGED, llm=llm, progress=False)
    assert fake_llm_server.count() == 0


# TREC readers --------------------------------------------------------------------------------

TREC_TOKENS = st.sampled_from(
    [
        "q1",
        "q2",
        "Q0",
        "0",
        "d1",
        "d2",
        "1",
        "2",
        "-1",
        "3.5",
        "1e309",
        "-inf",
        "nan",
        "NaN",
        "x",
        "１",  # full-width digit
        "1_0",
        "9" * 5000,  # past Python's int-to-str digit limit
        "\x00",
        "é",
        "\u00a0",
        "\u2028",
        "run",
    ]
)
trec_lines = st.lists(st.lists(TREC_TOKENS, max_size=7).map(" ".join), max_size=8)
trec_bytes = st.one_of(
    st.binary(max_size=300),
    trec_lines.map(lambda lines: "\n".join(lines).encode("utf-8")),
    trec_lines.map(lambda lines: "\r\n".join(lines).encode("utf-8") + b"\xff\xfe"),
)


@settings(max_examples=300, deadline=None)
@given(trec_bytes)
@example(b"q1 0 d1 1\nq1 0 d1 2\n")
@example(b"q1 Q0 d1 1 nan run\n")
@example(b"\xef\xbb\xbfq1 0 d1 1\n")  # a UTF-8 byte order mark
def test_trec_readers_parse_or_raise_input_format_error(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "file.txt"
        path.write_bytes(data)
        try:
            qrels = read_qrels(path)
        except InputFormatError as exc:
            assert str(path) in str(exc)
        else:
            for query, docs in qrels.items():
                assert isinstance(query, str) and query
                assert all(isinstance(d, str) and type(g) is int for d, g in docs.items())
        try:
            run = read_run(path)
        except InputFormatError as exc:
            assert str(path) in str(exc)
        else:
            for query, docs in run.items():
                assert isinstance(query, str) and query
                for doc, score in docs.items():
                    assert isinstance(doc, str) and isinstance(score, float)
                    assert not math.isnan(score)
