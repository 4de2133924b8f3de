"""The tool-call scores on expected vs called tools, worked out by hand, hostile calls
included: malformed JSON, no name, huge and deeply nested arguments, duplicates."""

from __future__ import annotations

import json
import math

import pytest

from judge.metrics.tools import (
    TOOL_METRICS,
    canonical_arguments,
    parse_tool_calls,
    score_tool_calls,
)


def scored(called, expected) -> dict:
    result = score_tool_calls(
        parse_tool_calls(called, "tools_called"),
        parse_tool_calls(expected, "expected_tools", strict=True),
    )
    return {**result.scores, "reasons": result.reasons, "calls": result.calls}


def call(name, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def test_every_expected_call_made_in_order_with_its_arguments_scores_one():
    expected = [call("search", q="a"), call("fetch", url="u")]
    assert {
        k: v for k, v in scored(expected, expected).items() if k in TOOL_METRICS
    } == dict.fromkeys(TOOL_METRICS, 1.0)


def test_precision_and_recall_count_calls_matched_by_name_one_to_one():
    # Three calls: search twice (one expected), fetch (expected), lookup (not expected).
    called = [call("search", q="a"), call("search", q="a"), call("fetch"), call("lookup")]
    expected = [call("search", q="a"), call("fetch"), call("summarise")]
    got = scored(called, expected)
    assert got["tool_call_precision"] == 2 / 4
    assert got["tool_call_recall"] == 2 / 3
    assert got["tool_argument_match"] == 1.0
    assert [c["expected"] for c in got["calls"]] == [0, None, 1, None]


def test_names_are_exact():
    got = scored([call("Search")], [call("search")])
    assert got["tool_call_precision"] == 0.0 and got["tool_call_recall"] == 0.0
    assert got["reasons"] == {
        "tool_argument_match": "no_matched_calls",
        "tool_call_order": "no_matched_calls",
    }


def test_calls_with_identical_arguments_are_paired_first():
    # search(b) then search(a) against search(a), search(b): both arguments match, and
    # the order is half kept (the longest run in expected order is one call of two).
    got = scored(
        [call("search", q="b"), call("search", q="a")],
        [call("search", q="a"), call("search", q="b")],
    )
    assert got["tool_argument_match"] == 1.0
    assert got["tool_call_order"] == 0.5
    assert [c["expected"] for c in got["calls"]] == [1, 0]


def test_order_is_the_longest_run_in_the_expected_order_over_the_matched_calls():
    expected = [call(n) for n in "abcde"]
    called = [call(n) for n in "aebcd"]  # a, b, c, d in order; e out of place
    assert scored(called, expected)["tool_call_order"] == 4 / 5
    called = [call(n) for n in "edcba"]
    assert scored(called, expected)["tool_call_order"] == 1 / 5
    # Unmatched calls do not count against the order.
    called = [call("x"), call("a"), call("y"), call("b")]
    assert scored(called, expected)["tool_call_order"] == 1.0


def test_arguments_are_compared_as_json():
    expected = [{"name": "f", "arguments": {"a": 1, "b": [1.0, {"c": True}]}}]
    same = [{"name": "f", "arguments": json.dumps({"b": [1, {"c": True}], "a": 1.0})}]
    assert scored(same, expected)["tool_argument_match"] == 1.0
    true_is_not_one = [{"name": "f", "arguments": {"a": 1, "b": [1, {"c": 1}]}}]
    assert scored(true_is_not_one, expected)["tool_argument_match"] == 0.0
    assert canonical_arguments('{"b": 2, "a": 1.0}') == '{"a":1,"b":2}'
    assert canonical_arguments(None) == "{}"


def test_the_field_names_of_deepeval_ragas_and_openai_are_read():
    expected = [call("search", q="a")]
    for made in (
        {"name": "search", "input_parameters": {"q": "a"}},  # DeepEval's ToolCall
        {"name": "search", "args": {"q": "a"}},  # RAGAS's ToolCall
        {"type": "function", "function": {"name": "search", "arguments": '{"q": "a"}'}},
    ):
        assert scored([made], expected)["tool_argument_match"] == 1.0, made


def test_an_expected_call_without_arguments_checks_the_name_only():
    got = scored([call("search", q="anything")], [{"name": "search"}])
    assert got["tool_call_recall"] == 1.0
    assert math.isnan(got["tool_argument_match"])
    assert got["reasons"] == {"tool_argument_match": "no_expected_arguments"}
    assert scored([call("search")], ["search", call("fetch", u=1)])["tool_call_recall"] == 0.5


def test_malformed_arguments_match_nothing_and_say_so():
    expected = [call("search", q="a")]
    got = scored([{"name": "search", "arguments": '{"q": "a"'}], expected)
    assert got["tool_call_precision"] == 1.0  # the right tool
    assert got["tool_argument_match"] == 0.0  # not its arguments
    assert got["calls"] == [
        {"name": "search", "note": "arguments_not_json", "expected": 0, "arguments_match": False}
    ]
    nan = scored([{"name": "search", "arguments": '{"q": NaN}'}], expected)  # NaN is no JSON
    assert nan["calls"][0]["note"] == "arguments_not_json"


def test_calls_without_a_name_are_made_calls_that_match_nothing():
    got = scored(
        [{"arguments": {"q": "a"}}, {"name": ""}, 7, call("search", q="a")], [call("search", q="a")]
    )
    assert got["tool_call_precision"] == 1 / 4
    assert [c.get("note") for c in got["calls"]] == ["no_name", "no_name", "no_name", None]


def test_huge_and_deeply_nested_arguments():
    huge = {"rows": [{"i": i, "text": "y" * 100} for i in range(20_000)]}
    reordered = {"rows": [{"text": "y" * 100, "i": float(i)} for i in range(20_000)]}
    assert scored([call("load", **reordered)], [call("load", **huge)])["tool_argument_match"] == 1.0
    deep = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit
    got = scored([{"name": "load", "arguments": deep}], [call("load", **huge)])
    assert got["calls"][0]["note"] == "arguments_not_json"
    assert got["tool_argument_match"] == 0.0


def test_undefined_scores_are_nan_with_a_reason():
    none_expected = score_tool_calls(parse_tool_calls([call("a")]), None)
    assert all(math.isnan(v) for v in none_expected.scores.values())
    assert none_expected.reasons == dict.fromkeys(TOOL_METRICS, "no_expected_tools")
    empty = scored([call("a")], [])
    assert empty["tool_call_precision"] == 0.0  # a call where none was expected
    assert empty["reasons"] == {
        "tool_call_recall": "empty_expected_tools",
        "tool_argument_match": "empty_expected_tools",
        "tool_call_order": "empty_expected_tools",
    }
    nothing_called = scored([], [call("a")])
    assert nothing_called["tool_call_recall"] == 0.0
    assert nothing_called["reasons"] == {
        "tool_call_precision": "no_tools_called",
        "tool_argument_match": "no_matched_calls",
        "tool_call_order": "no_matched_calls",
    }
    both_empty = scored([], [])
    assert both_empty["reasons"]["tool_call_precision"] == "no_tools_called"
    assert score_tool_calls(None, None).to_dict()["scores"] == dict.fromkeys(TOOL_METRICS)


def test_a_row_field_is_read_as_a_list_and_a_bad_one_refused():
    assert parse_tool_calls(None) is None and parse_tool_calls("  ") is None
    assert parse_tool_calls(float("nan")) is None
    assert [c.name for c in parse_tool_calls('[{"name": "a"}, {"name": "b"}]')] == ["a", "b"]
    assert [c.name for c in parse_tool_calls({"name": "a"})] == ["a"]
    with pytest.raises(ValueError, match="tools_called must be a list of tool calls"):
        parse_tool_calls("not json", "tools_called")
    with pytest.raises(ValueError, match="tools_called must be a list"):
        parse_tool_calls(3, "tools_called")
    with pytest.raises(ValueError, match=r"expected_tools\[1\] has no name"):
        parse_tool_calls([{"name": "a"}, {"arguments": {}}], "expected_tools", strict=True)
    with pytest.raises(ValueError, match=r"expected_tools\[0\] \(a\): its arguments are not JSON"):
        parse_tool_calls([{"name": "a", "arguments": "{"}], "expected_tools", strict=True)
