"""Tool calls against the expected ones: deterministic scores, no judge model.

An agent's calls (`tools_called`, or a trace's tool spans) are compared with the calls
the test set expects (`expected_tools`), each a name and, optionally, its arguments:

- calls are matched one to one by name (exact, case-sensitive): for each name, the
  expected calls are first paired with a call of identical arguments (the earliest not
  yet paired), then, in order, with the remaining calls of that name. A call without a
  name matches nothing;
- `tool_call_precision`: matched calls / calls made;
- `tool_call_recall`: matched calls / calls expected;
- `tool_argument_match`: of the matched pairs whose expected call gives arguments (null
  arguments are none given, as DeepEval dumps a ToolCall without them), the
  share whose arguments are equal as JSON: both parsed (JSON text is read), keys sorted,
  an integral float equal to the integer (JSON has one number type); arguments that are
  not JSON (malformed text, NaN) equal nothing; a call that records no arguments has {};
- `tool_call_order`: of the matched calls, the longest run in the expected order (the
  longest common subsequence of the expected calls and the calls made, counted on the
  matched pairs) over the number matched: 1.0 when every matched call came in the
  expected order; one matched call is in order.

An undefined score is NaN with a reason (`REASONS`), never 0.

`trajectory_accuracy` is judged on top of these: the judge is asked only when the calls
made differ from the expected ones (`settled_trajectory` settles the rest, no request).
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.json_values import canonical_json

NAN = float("nan")

TOOL_CALL_PRECISION = "tool_call_precision"
TOOL_CALL_RECALL = "tool_call_recall"
TOOL_ARGUMENT_MATCH = "tool_argument_match"
TOOL_CALL_ORDER = "tool_call_order"
TOOL_METRICS = (TOOL_CALL_PRECISION, TOOL_CALL_RECALL, TOOL_ARGUMENT_MATCH, TOOL_CALL_ORDER)
DESCRIPTIONS = {
    TOOL_CALL_PRECISION: "tool calls matching an expected one (by name) / calls made",
    TOOL_CALL_RECALL: "expected tool calls made (by name) / calls expected",
    TOOL_ARGUMENT_MATCH: "matched calls whose arguments equal the expected ones as JSON",
    TOOL_CALL_ORDER: "matched calls in the expected order (longest common subsequence)",
}

# NaN reasons.
NO_EXPECTED_TOOLS = "no_expected_tools"  # the row or trace gives no expected_tools
EMPTY_EXPECTED_TOOLS = "empty_expected_tools"  # expected_tools is [] (recall is 0/0)
NO_TOOLS_CALLED = "no_tools_called"  # nothing was called (precision is 0/0)
NO_MATCHED_CALLS = "no_matched_calls"  # no call matched an expected one: nothing to compare
NO_EXPECTED_ARGUMENTS = "no_expected_arguments"  # no matched expected call gives arguments
REASONS = {
    NO_EXPECTED_TOOLS: "no expected_tools given for the row or trace: nothing to compare with",
    EMPTY_EXPECTED_TOOLS: "expected_tools is empty: recall, argument match and order are "
    "0/0 (precision is 0 when tools were called anyway)",
    NO_TOOLS_CALLED: "no tool was called: precision is 0/0",
    NO_MATCHED_CALLS: "no call matched an expected tool by name: no arguments or order to compare",
    NO_EXPECTED_ARGUMENTS: "no matched expected call gives arguments: nothing to compare them with",
}

# A row's tools_called or expected_tools that is no list of calls (judge eval's reason).
INVALID_TOOL_CALLS = "invalid_tool_calls"

# What a call says of itself, per call.
NO_NAME = "no_name"  # a call without a name (matches nothing)
ARGUMENTS_NOT_JSON = "arguments_not_json"  # its arguments cannot be read as JSON


@dataclass(frozen=True)
class ToolCall:
    """One tool call: its name (None when it has none), its arguments as canonical JSON
    text (None when they cannot be read as JSON), and a note (`no_name`,
    `arguments_not_json`) when something is wrong with it."""

    name: str | None
    arguments: str | None
    has_arguments: bool = True
    note: str | None = None
    # What the call returned, when recorded (DeepEval's `output`, or `result`): shown to
    # the trajectory judge, never compared.
    result: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The call as JSON values (its arguments left out: they may be huge)."""
        out: dict[str, Any] = {"name": self.name}
        if self.note is not None:
            out["note"] = self.note
        return out


def _normalised(value: Any) -> Any:
    """A JSON value with integral floats as integers, so 1.0 and 1 are one number."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _normalised(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalised(item) for item in value]
    return value


def canonical_arguments(value: Any) -> str | None:
    """Arguments as canonical JSON text (sorted keys, integral floats as integers), or None
    when they are not JSON: text that does not parse, NaN or infinities, keys that are not
    text, nesting past Python's limit. None (not recorded) is {}.

    Args:
        value: a mapping (or any JSON value), or JSON text of one.
    """
    if value is None:
        value = {}
    try:
        if isinstance(value, (str, bytes)):
            value = json.loads(value)
        return canonical_json(_normalised(value))
    except (ValueError, TypeError, RecursionError):
        return None


def tool_call(item: Any) -> ToolCall:
    """One call as a test set or a trace gives it: {"name", "arguments"} (DeepEval's
    "input_parameters", RAGAS's "args", "input" too), or OpenAI's {"function": {"name",
    "arguments"}}; a bare name is a call whose arguments are not checked."""
    if isinstance(item, str):
        return ToolCall(item or None, None, has_arguments=False, note=None if item else NO_NAME)
    if not isinstance(item, Mapping):
        return ToolCall(None, None, has_arguments=False, note=NO_NAME)
    function = item.get("function")
    if isinstance(function, Mapping):
        item = {**item, **function}
    name = item.get("name")
    name = str(name) if isinstance(name, (str, int)) and not isinstance(name, bool) else None
    name = name or None
    has_arguments = False
    raw: Any = None
    for key in ("arguments", "input_parameters", "args", "input"):
        # null is none given (DeepEval dumps ToolCall(name=...) with input_parameters null)
        if item.get(key) is not None:
            has_arguments, raw = True, item[key]
            break
    arguments = canonical_arguments(raw)
    note = NO_NAME if name is None else (ARGUMENTS_NOT_JSON if arguments is None else None)
    return ToolCall(name, arguments, has_arguments, note, _result(item))


def _result(item: Mapping[str, Any]) -> str | None:
    """A call's recorded result as text (JSON text for a value that is not text)."""
    for key in ("output", "result"):
        value = item.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            return value
        try:
            return canonical_json(_normalised(value))
        except (ValueError, TypeError, RecursionError):
            return str(value)
    return None


def parse_tool_calls(
    value: Any, what: str = "tools", *, strict: bool = False
) -> list[ToolCall] | None:
    """A list of tool calls from a row's field: a list (or JSON text of one) of calls as
    `tool_call` reads them; None when absent (None, NaN, blank text).

    Args:
        value: the field's value.
        what: the field's name, for the error.
        strict: refuse a call without a name or with arguments that are not JSON (the
            expected calls: a test set's mistake, not an agent's).

    Raises:
        ValueError: the value is not a list of calls (the message names `what`).
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise ValueError(
                f"{what} must be a list of tool calls ({{'name', 'arguments'}}), or JSON text "
                f"of one; got {value!r:.80}"
            ) from None
    if isinstance(value, Mapping):
        value = [value]  # one call alone
    if not isinstance(value, (list, tuple)):
        raise ValueError(
            f"{what} must be a list of tool calls ({{'name', 'arguments'}}), got "
            f"{type(value).__name__}"
        )
    calls = [tool_call(item) for item in value]
    if strict:
        for n, call in enumerate(calls):
            if call.note == NO_NAME:
                raise ValueError(f"{what}[{n}] has no name: give each call a name")
            if call.note == ARGUMENTS_NOT_JSON:
                raise ValueError(
                    f"{what}[{n}] ({call.name}): its arguments are not JSON (an object, or "
                    "JSON text of one)"
                )
    return calls


@dataclass
class ToolCallScores:
    """The four scores (NaN with a reason when undefined), and per call made the expected
    call it matched (its index, or None) and whether their arguments are equal."""

    scores: dict[str, float]
    reasons: dict[str, str] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The scores as JSON values: NaN as null, with the reasons and the calls."""
        return {
            "scores": {k: None if math.isnan(v) else v for k, v in self.scores.items()},
            "reasons": dict(self.reasons),
            "calls": self.calls,
        }


def _matched(called: Sequence[ToolCall], expected: Sequence[ToolCall]) -> dict[int, int]:
    """call index -> expected index, one to one by name: identical arguments first, then
    the remaining calls of each name in order."""
    by_name: dict[str, list[int]] = {}
    for c, call in enumerate(called):
        if call.name is not None:
            by_name.setdefault(call.name, []).append(c)
    pairs: dict[int, int] = {}
    paired: set[int] = set()
    for e, exp in enumerate(expected):  # identical arguments first
        if exp.name is None or not exp.has_arguments or exp.arguments is None:
            continue
        for c in by_name.get(exp.name, ()):
            if c not in pairs and called[c].arguments == exp.arguments:
                pairs[c] = e
                paired.add(e)
                break
    for e, exp in enumerate(expected):
        if e in paired or exp.name is None:
            continue
        for c in by_name.get(exp.name, ()):
            if c not in pairs:
                pairs[c] = e
                break
    return pairs


def _in_order(expected_indices: Sequence[int]) -> int:
    """The length of the longest increasing run (not necessarily contiguous): the matched
    calls, in the order made, that follow the expected order."""
    tails: list[int] = []
    for index in expected_indices:
        place = bisect.bisect_left(tails, index)
        if place == len(tails):
            tails.append(index)
        else:
            tails[place] = index
    return len(tails)


def score_tool_calls(
    called: Sequence[ToolCall] | None, expected: Sequence[ToolCall] | None
) -> ToolCallScores:
    """The tool-call scores of one row or trace.

    Args:
        called: the calls made, in order (`parse_tool_calls`, or a trace's tool spans); None
            is taken as no call.
        expected: the calls expected, in order; None when the row gives none.
    """
    called = list(called or ())
    if expected is None:
        return ToolCallScores(
            dict.fromkeys(TOOL_METRICS, NAN),
            dict.fromkeys(TOOL_METRICS, NO_EXPECTED_TOOLS),
            [{**c.to_dict(), "expected": None} for c in called],
        )
    pairs = _matched(called, expected)
    scores: dict[str, float] = {}
    reasons: dict[str, str] = {}
    calls = []
    equal_arguments = 0
    compared = 0
    for c, call in enumerate(called):
        detail = {**call.to_dict(), "expected": pairs.get(c)}
        if c in pairs:
            exp = expected[pairs[c]]
            if exp.has_arguments:
                same = call.arguments is not None and call.arguments == exp.arguments
                detail["arguments_match"] = same
                compared += 1
                equal_arguments += same
        calls.append(detail)
    matched = len(pairs)
    if called:
        scores[TOOL_CALL_PRECISION] = matched / len(called)
    else:
        scores[TOOL_CALL_PRECISION], reasons[TOOL_CALL_PRECISION] = NAN, NO_TOOLS_CALLED
    if not expected:
        for name in (TOOL_CALL_RECALL, TOOL_ARGUMENT_MATCH, TOOL_CALL_ORDER):
            scores[name], reasons[name] = NAN, EMPTY_EXPECTED_TOOLS
        return ToolCallScores(scores, reasons, calls)
    scores[TOOL_CALL_RECALL] = matched / len(expected)
    if not matched:
        for name in (TOOL_ARGUMENT_MATCH, TOOL_CALL_ORDER):
            scores[name], reasons[name] = NAN, NO_MATCHED_CALLS
        return ToolCallScores(scores, reasons, calls)
    if compared:
        scores[TOOL_ARGUMENT_MATCH] = equal_arguments / compared
    else:
        scores[TOOL_ARGUMENT_MATCH], reasons[TOOL_ARGUMENT_MATCH] = NAN, NO_EXPECTED_ARGUMENTS
    scores[TOOL_CALL_ORDER] = _in_order([pairs[c] for c in sorted(pairs)]) / matched
    return ToolCallScores(scores, reasons, calls)


def row_tool_calls(extra: Mapping[str, Any]) -> tuple[list[ToolCall] | None, list[ToolCall] | None]:
    """A row's calls made (`tools_called`) and expected (`expected_tools`), each None when
    the row has none.

    Args:
        extra: the row's other columns (`Sample.extra`).

    Raises:
        ValueError: either is not a list of calls, or an expected call has no name or
            arguments that are not JSON (the message names the column).
    """
    called = parse_tool_calls(extra.get("tools_called"), "tools_called")
    expected = parse_tool_calls(extra.get("expected_tools"), "expected_tools", strict=True)
    return called, expected


# The trajectory verdicts, and how a trajectory was settled without the judge.
SOUND, UNSOUND = "sound", "unsound"
SAME_CALLS = "same_calls"  # the calls made are the expected ones: sound
NOTHING_CALLED = "nothing_called"  # calls were expected and none was made: unsound


def settled_trajectory(
    called: Sequence[ToolCall] | None, expected: Sequence[ToolCall]
) -> str | None:
    """How the deterministic scores settle a trajectory (`SAME_CALLS`, `NOTHING_CALLED`),
    or None when the judge must decide: the calls made differ from the expected ones in
    a name, an argument the expected call gives, their order or their number.

    Args:
        called: the calls made (None: none).
        expected: the calls expected.
    """
    called = list(called or ())
    if not called:
        return SAME_CALLS if not expected else NOTHING_CALLED
    if len(called) != len(expected):
        return None
    scores = score_tool_calls(called, expected).scores
    arguments = scores[TOOL_ARGUMENT_MATCH]
    same = (
        scores[TOOL_CALL_PRECISION] == 1.0
        and scores[TOOL_CALL_RECALL] == 1.0
        and scores[TOOL_CALL_ORDER] == 1.0
        and (math.isnan(arguments) or arguments == 1.0)  # NaN: no expected call gives any
    )
    return SAME_CALLS if same else None


def settled_verdict(how: str) -> str:
    """The verdict a settled trajectory gets (`settled_trajectory`'s answer)."""
    return SOUND if how == SAME_CALLS else UNSOUND


# A recorded result longer than this is cut for the judge: the calls decide, not all
# of what a search returned (a long tool output would make every request long).
RESULT_CHARS = 1000


def judged_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """Calls as the trajectory judge reads them: name, arguments (as JSON values; left out
    for an expected call that gives none, null with a note when not JSON) and the
    recorded result, cut at `RESULT_CHARS` characters."""
    out: list[dict[str, Any]] = []
    for call in calls:
        entry: dict[str, Any] = {"name": call.name or ""}
        if call.has_arguments:
            entry["arguments"] = None if call.arguments is None else json.loads(call.arguments)
        if call.note is not None:
            entry["note"] = call.note
        if call.result is not None:
            cut = len(call.result) > RESULT_CHARS
            entry["result"] = call.result[:RESULT_CHARS] + (" [cut]" if cut else "")
        out.append(entry)
    return out
