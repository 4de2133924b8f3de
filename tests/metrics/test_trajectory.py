"""trajectory_accuracy: the LLM-judged tool-call metric, asked only when the deterministic
comparison leaves it open (the calls made differ from the expected ones); the same calls
are sound and no call where calls were expected is unsound, with no request. Judged
through the real HTTP path (the fake server's heuristic judge: calls that call every
expected tool by name are sound)."""

from __future__ import annotations

import json
import math

import judge
from judge.metrics.tools import parse_tool_calls, settled_trajectory
from judge.testing import FakeLLMServer
from judge.testing.replies import data_blocks
from tests.helpers.cli import eval_args, run

WEATHER = [
    {"name": "geocode", "arguments": {"city": "Lyon"}},
    {"name": "forecast", "arguments": {"lat": 45.76, "lon": 4.84, "days": 1}},
]


def row(ident: str, called: list | str | None, **more) -> dict:
    record = {
        "id": ident,
        "question": "What will the weather be in Lyon tomorrow?",
        "answer": "Sunny, 24 C.",
        "contexts": ["Lyon: sunny tomorrow."],
        "expected_tools": WEATHER,
        **more,
    }
    if called is not None:
        record["tools_called"] = called
    return record


ROWS = [
    # the expected calls exactly (1.0 for 1, keys in another order): settled sound
    row(
        "same",
        [
            {"name": "geocode", "input_parameters": {"city": "Lyon"}},
            {"name": "forecast", "input_parameters": {"days": 1.0, "lon": 4.84, "lat": 45.76}},
        ],
    ),
    # nothing called where two calls were expected: settled unsound
    row("none", []),
    # other arguments (a city name instead of coordinates), every tool called: judged sound
    row(
        "other_arguments",
        [
            {"name": "geocode", "input_parameters": {"city": "Lyon, France"}},
            {
                "name": "forecast",
                "input_parameters": {"city": "Lyon", "days": 1},
                "output": {"sky": "sunny", "celsius": 24},
            },
        ],
    ),
    # the forecast never asked for: judged unsound
    row("no_forecast", [{"name": "geocode", "input_parameters": {"city": "Lyon"}}]),
    # nothing expected: no score
    {**row("unlabelled", [{"name": "geocode"}]), "expected_tools": None},
    row("broken", "not a list"),
]


def test_the_judge_is_asked_only_when_the_calls_differ_from_the_expected_ones(
    models, fake_llm_server: FakeLLMServer
):
    server = fake_llm_server
    result = judge.evaluate(
        ROWS, metrics=["trajectory_accuracy", "tool_call_recall"], llm=models["llm"], progress=False
    )
    rows = {r.id: r for r in result.rows}
    scores = {i: r.scores["trajectory_accuracy"] for i, r in rows.items()}
    assert scores["same"] == 1.0
    assert scores["none"] == 0.0
    assert scores["other_arguments"] == 1.0
    assert scores["no_forecast"] == 0.0
    assert math.isnan(scores["unlabelled"]) and math.isnan(scores["broken"])
    assert rows["unlabelled"].reasons["trajectory_accuracy"] == "no_expected_tools"
    assert rows["broken"].reasons["trajectory_accuracy"] == "invalid_tool_calls"
    # side by side with the deterministic ones: recall says what is missing, the judge
    # whether what was done instead still serves the goal
    assert rows["other_arguments"].scores["tool_call_recall"] == 1.0
    assert rows["no_forecast"].scores["tool_call_recall"] == 0.5
    # settled rows carry how, judged rows the judge's reply
    assert rows["same"].evidence["trajectory"] == {"settled": "same_calls", "verdict": "sound"}
    assert rows["none"].evidence["trajectory"] == {
        "settled": "nothing_called",
        "verdict": "unsound",
    }
    assert rows["no_forecast"].evidence["trajectory"]["verdict"] == "unsound"
    # two requests: the two trajectories that differ, nothing for the others
    bodies = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(bodies) == 2
    blocks = [data_blocks(b["messages"][1]["content"]) for b in bodies]
    shown = next(b for b in blocks if len(b["called"]) == 2)
    assert shown["request"] == ["user: What will the weather be in Lyon tomorrow?"]
    assert shown["expected"] == WEATHER
    assert shown["called"][1] == {
        "name": "forecast",
        "arguments": {"city": "Lyon", "days": 1},
        "result": '{"celsius":24,"sky":"sunny"}',  # a recorded result, as JSON text
    }
    assert shown["answer"] == "Sunny, 24 C."
    assert shown["outcome"] == ""


def test_settled_trajectory_leaves_every_difference_to_the_judge():
    expected = parse_tool_calls(WEATHER)
    assert expected is not None

    def settled(calls: list) -> str | None:
        return settled_trajectory(parse_tool_calls(calls), expected)

    assert settled(WEATHER) == "same_calls"
    assert settled([]) == "nothing_called"
    assert settled(list(reversed(WEATHER))) is None  # order
    assert settled([*WEATHER, WEATHER[0]]) is None  # a call more
    assert settled([WEATHER[0], {**WEATHER[1], "arguments": {"days": 2}}]) is None
    assert settled([WEATHER[0], {"name": "weather"}]) is None  # another tool
    # an expected call without arguments checks the name only
    bare = parse_tool_calls([{"name": "geocode"}])
    assert bare is not None
    assert settled_trajectory(parse_tool_calls([{"name": "geocode", "args": {"x": 1}}]), bare)
    # nothing expected and nothing called is the expected trajectory
    assert settled_trajectory([], []) == "same_calls"
    assert settled_trajectory(parse_tool_calls(WEATHER), []) is None


def test_judge_eval_scores_a_conversations_tool_calls_turn_by_turn(
    models, fake_llm_server: FakeLLMServer, tmp_path
):
    chat = {
        "id": "trip",
        "reference": "The user knows tomorrow's weather in Lyon.",
        "turns": [
            {"role": "user", "content": "I am going to Lyon."},
            {"role": "assistant", "content": "Have a good trip.", "contexts": ["x"]},
            {"role": "user", "content": "What will the weather be there tomorrow?"},
            {
                "role": "assistant",
                "content": "Sunny, 24 C.",
                "contexts": ["Lyon: sunny tomorrow."],
                "tools_called": [{"name": "forecast", "input_parameters": {"city": "Lyon"}}],
                "expected_tools": WEATHER,
            },
        ],
    }
    data = tmp_path / "chats.jsonl"
    data.write_text(json.dumps(chat) + "\n", encoding="utf-8")
    done = run(*eval_args(data, fake_llm_server, tmp_path, "--metrics", "trajectory_accuracy"))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    by_turn = {line["turn"]: line for line in lines}
    assert by_turn[2]["reasons"]["trajectory_accuracy"] == "no_expected_tools"
    assert by_turn[4]["scores"]["trajectory_accuracy"] == 0.0  # geocode never called
    (body,) = [r.body for r in fake_llm_server.requests if r.path.endswith("/chat/completions")]
    blocks = data_blocks(body["messages"][1]["content"])
    # the judge reads the conversation the request continues, and on the final turn the
    # conversation's expected outcome
    assert blocks["request"] == [
        "user: I am going to Lyon.",
        "assistant: Have a good trip.",
        "user: What will the weather be there tomorrow?",
    ]
    assert blocks["outcome"] == "The user knows tomorrow's weather in Lyon."


def test_a_conversations_tool_calls_are_gathered_with_their_results(
    models, fake_llm_server: FakeLLMServer
):
    """OpenAI's messages (tool_calls on an assistant message, results by tool_call_id) and
    RAGAS's (tool_calls with args, tool results in order) give the turn's tools_called."""
    openai_chat = {
        "id": "openai",
        "turns": [
            {"role": "user", "content": "What will the weather be in Lyon tomorrow?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "forecast", "arguments": '{"city": "Lyon"}'},
                    },
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "geocode", "arguments": '{"city": "Lyon"}'},
                    },
                ],
            },
            # answered out of order: matched by id
            {"role": "tool", "tool_call_id": "call_1", "content": "45.76, 4.84"},
            {"role": "tool", "tool_call_id": "call_2", "content": "sunny"},
            {"role": "assistant", "content": "Sunny.", "expected_tools": WEATHER},
        ],
    }
    ragas_chat = {
        "id": "ragas",
        "user_input": [
            {"type": "human", "content": "What will the weather be in Lyon tomorrow?"},
            {
                "type": "ai",
                "content": "",
                "tool_calls": [{"name": "forecast", "args": {"city": "Lyon", "days": 1}}],
            },
            {"type": "tool", "content": "sunny"},
            {"type": "ai", "content": "Sunny.", "expected_tools": WEATHER},
        ],
    }
    result = judge.evaluate(
        [openai_chat, ragas_chat],
        metrics=["trajectory_accuracy", "tool_call_recall"],
        llm=models["llm"],
        progress=False,
    )
    rows = {r.id: r for r in result.rows}
    assert rows["openai#5"].scores["tool_call_recall"] == 1.0
    assert rows["openai#5"].scores["trajectory_accuracy"] == 1.0  # judged: the order differs
    assert rows["ragas#4"].scores["tool_call_recall"] == 0.5
    assert rows["ragas#4"].scores["trajectory_accuracy"] == 0.0  # geocode never called
    bodies = [r.body for r in fake_llm_server.requests if r.path.endswith("/chat/completions")]
    called = sorted((data_blocks(b["messages"][1]["content"])["called"] for b in bodies), key=len)
    assert called == [
        [{"name": "forecast", "arguments": {"city": "Lyon", "days": 1}, "result": "sunny"}],
        [
            {"name": "forecast", "arguments": {"city": "Lyon"}, "result": "sunny"},
            {"name": "geocode", "arguments": {"city": "Lyon"}, "result": "45.76, 4.84"},
        ],
    ]
