"""Tool calls against expected ones, attacked with test sets as other tools write them
(issue 40)."""

from __future__ import annotations

import json

from judge.metrics.tools import (
    TOOL_ARGUMENT_MATCH,
    parse_tool_calls,
    score_tool_calls,
    settled_trajectory,
)


def test_an_expected_call_whose_arguments_are_null_gives_none_to_compare():
    """DeepEval's ToolCall(name="search") dumps as input_parameters null: no arguments
    expected, as DeepEval compares none. They were read as {} expected, so any call made
    with arguments scored tool_argument_match 0 and was sent to the trajectory judge."""
    expected = parse_tool_calls(
        json.dumps([{"name": "search", "input_parameters": None, "output": None}]),
        "expected_tools",
        strict=True,
    )
    called = parse_tool_calls([{"name": "search", "input_parameters": {"q": "Lyon"}}])
    scores = score_tool_calls(called, expected)
    assert scores.scores[TOOL_ARGUMENT_MATCH] != scores.scores[TOOL_ARGUMENT_MATCH]  # NaN
    assert scores.reasons[TOOL_ARGUMENT_MATCH] == "no_expected_arguments"
    assert settled_trajectory(called, expected or []) == "same_calls"
