"""`rag_judge` on a conversation: every assistant turn judged with the conversation before
it, a failure showing each failing turn's claims with their verdicts and sources, test cases
from a conversations file, the JUnit properties and the report's rows. Run the way users
run it (pytester, the plugin from its entry point, the fake server's heuristic judge: a
sentence is a claim, supported by the first piece of evidence holding all its words)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import judge
from judge.conversations import turn_records
from judge.errors import InputFormatError
from judge.pytest_plugin import ConversationResult, ScoreAssertionError, cases
from judge.pytest_plugin.conversation import turn_samples
from judge.testing import FakeLLMServer
from tests.helpers.pytester import judge_args, judging, load_judged_modules

load_judged_modules()

# Turn 2: one claim from its context, one invented. Turn 4: one from the user's first
# message (history), one from turn 2's supported claim (history), one from its context,
# and turn 2's invention repeated (no evidence: an unsupported claim supports nothing).
CHAT = {
    "id": "parcel",
    "turns": [
        {"role": "user", "content": "My parcel weighs four kilos. Which options exist?"},
        {
            "role": "assistant",
            "content": "Express delivery takes one day. Mars parcels travel free.",
            "contexts": ["Express delivery takes one day."],
        },
        {"role": "user", "content": "Send it express then."},
        {
            "role": "assistant",
            "content": "My parcel weighs four kilos. Express delivery takes one day. "
            "Mars parcels travel free. Couriers collect parcels daily.",
            "contexts": ["Couriers collect parcels daily."],
        },
    ],
}
# Every claim of every turn supported; turn 4's first only by what the user said.
GROUNDED = {
    "id": "weight",
    "turns": [
        {"role": "user", "content": "My parcel weighs four kilos."},
        {"role": "assistant", "content": "Noted.", "contexts": ["Noted."]},
        {"role": "user", "content": "What will it cost?"},
        {
            "role": "assistant",
            "content": "My parcel weighs four kilos. Parcels cost ten euros.",
            "contexts": ["Parcels cost ten euros."],
        },
    ],
}


@pytest.fixture
def server(fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    return judging(fake_llm_server, monkeypatch)


def write_tests(pytester: pytest.Pytester, body: str) -> None:
    header = f"import judge\nCHAT = {CHAT!r}\nGROUNDED = {GROUNDED!r}\n"
    pytester.makepyfile(test_chat=header + body)


def test_a_failing_turn_shows_each_claim_with_its_verdict_and_source(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(
        pytester,
        """
def test_chat(rag_judge):
    result = rag_judge.score_conversation(CHAT, metrics=["faithfulness"])
    judge.assert_scores(result, faithfulness=0.8)
""",
    )
    result = pytester.runpytest(*judge_args(server, tmp_path / "cache.sqlite"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ScoreAssertionError: 2 of 2 turns of conversation 'parcel' failed "
            "faithfulness >= 0.8",
            "*  turn 2: 'My parcel weighs four kilos. Which options exist?'",
            "*    faithfulness: 0.500, threshold >= 0.8",
            "*      answer claim 2 not found: 'Mars parcels travel free.'*",
            "*      answer claim 1 supported by context 1: 'Express delivery takes one day.'",
            "*  turn 4: 'Send it express then.'",
            "*    faithfulness: 0.750, threshold >= 0.8",
            "*      answer claim 3 not found: 'Mars parcels travel free.'*",
            "*      answer claim 1 supported by conversation, turn 1 (user): "
            "'My parcel weighs four kilos.'",
            "*      answer claim 2 supported by conversation, turn 2 (assistant): "
            "'Express delivery takes one day.'",
            "*      answer claim 4 supported by context 1: 'Couriers collect parcels daily.'",
        ]
    )


def test_a_claim_only_the_user_stated_passes_and_earlier_turns_are_not_asked_again(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(
        pytester,
        """
def test_grounded(rag_judge):
    result = rag_judge.assert_scores(GROUNDED, faithfulness=1.0)
    last = result.turn(4)
    verdicts = last.evidence["answer_verdicts"]
    assert [(v["verdict"], v["source"]) for v in verdicts] == [
        ("supported", "history"), ("supported", "contexts")
    ]
    assert (verdicts[0]["turn"], verdicts[0]["role"]) == (1, "user")
    assert [t.sample.turn for t in result.turns] == [2, 4]
""",
    )
    cache = tmp_path / "cache.sqlite"
    xml = tmp_path / "junit.xml"
    pytester.runpytest(*judge_args(server, cache), f"--junitxml={xml}").assert_outcomes(passed=1)
    # Each turn asks what a single-turn row asks (claims, then verdicts): turn 4 rests on
    # turn 2's judgments, made once, not looked up again (not even in the cache).
    asked = len(server.requests)
    assert asked == 4
    props = {p.get("name"): p.get("value") for p in ET.parse(xml).getroot().iter("property")}
    assert (props["judge.usage.requests"], props["judge.usage.cache_hits"]) == ("4", "0")
    replay = pytester.runpytest(*judge_args(server, cache), "--judge-replay")
    replay.assert_outcomes(passed=1)
    assert len(server.requests) == asked  # replayed: not one request


def test_judge_evaluate_gives_the_same_verdicts_as_the_fixture(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    rows = judge.evaluate(
        [CHAT],
        metrics=["faithfulness", "supported_by_history"],
        llm=judge.LLM("openai/judge-model", api_base=server.base_url, api_key="k"),
        progress=False,
    ).rows
    expected = {r.turn: (r.scores, r.evidence["answer_verdicts"]) for r in rows}
    write_tests(
        pytester,
        f"""
def test_same(rag_judge):
    result = rag_judge.score_conversation(CHAT, metrics=["faithfulness", "supported_by_history"])
    got = {{t.sample.turn: (t.scores, t.evidence["answer_verdicts"]) for t in result.turns}}
    assert got == {expected!r}
""",
    )
    pytester.runpytest(*judge_args(server, tmp_path / "cache.sqlite")).assert_outcomes(passed=1)


def test_cases_of_a_conversations_file_are_one_test_per_conversation(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    deepeval = {  # DeepEval's shape, no id: named by its number and first user message
        "turns": [
            {"role": "user", "content": "Parcels cost what?"},
            {
                "role": "assistant",
                "content": "Parcels cost ten euros.",
                "retrieval_context": ["Parcels cost ten euros."],
            },
        ]
    }
    data = tmp_path / "chats.jsonl"
    data.write_text("".join(json.dumps(c) + "\n" for c in (CHAT, GROUNDED, deepeval)))
    write_tests(
        pytester,
        f"""
import pytest
from judge.pytest_plugin import cases

@pytest.mark.parametrize("chat", cases({str(data)!r}))
def test_each(rag_judge, chat):
    rag_judge.assert_scores(chat, faithfulness=1.0)
""",
    )
    xml = tmp_path / "junit.xml"
    report = tmp_path / "report"
    result = pytester.runpytest(
        *judge_args(server, tmp_path / "cache.sqlite"),
        "-v",
        f"--junitxml={xml}",
        "--judge-report",
        str(report),
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_each?parcel? FAILED*",
            "*test_each?weight? PASSED*",
            "*test_each?2-Parcels-cost-what? PASSED*",
        ],
        consecutive=False,
    )
    # Each turn a sample's call: its scores as properties, numbered from the second.
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(xml).getroot().iter("testcase")
    }
    weight = props["test_each[weight]"]
    assert (weight["judge.faithfulness"], weight["judge.faithfulness#2"]) == ("1.0", "1.0")
    assert weight["judge.usage.samples"] == "2"
    # The report's rows are the turns, grouped by the test's conversation.
    rows = [json.loads(line) for line in (report / "results.jsonl").read_text().splitlines()]
    test = "test_chat.py::test_each"
    assert [(r["id"], r["conversation_id"], r["turn"]) for r in rows] == [
        (f"{test}[{case}]::{cid}#{turn}", f"{test}[{case}]::{cid}", turn)
        for case, cid, turn in [
            ("2-Parcels-cost-what", "conversation", 2),  # the record has no id
            ("parcel", "parcel", 2),
            ("parcel", "parcel", 4),
            ("weight", "weight", 2),
            ("weight", "weight", 4),
        ]
    ]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["resampled"] == {"unit": "conversation", "conversations": 3, "turns": 5}


def test_cases_of_a_flat_table_of_turns_carry_each_turns_history(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    """A flat table of turns (conversation_id, turn) gave its rows as they were: a turn's
    claim supported only by what the user said in an earlier turn failed as invented (and
    a CSV's contexts, JSON text, were refused). It gives one case per conversation."""
    data = tmp_path / "turns.csv"
    data.write_text(
        "conversation_id,turn,question,answer,contexts\n"
        'weight,1,My parcel weighs four kilos.,Noted.,"[""Noted.""]"\n'
        "weight,2,What will it cost?,My parcel weighs four kilos. Parcels cost ten euros.,"
        '"[""Parcels cost ten euros.""]"\n',
        encoding="utf-8",
    )
    write_tests(
        pytester,
        f"""
import pytest
from judge.pytest_plugin import cases

@pytest.mark.parametrize("chat", cases({str(data)!r}))
def test_each(rag_judge, chat):
    result = rag_judge.assert_scores(chat, faithfulness=1.0)
    assert [t.sample.turn for t in result.turns] == [2, 4]
""",
    )
    result = pytester.runpytest(*judge_args(server, tmp_path / "cache.sqlite"), "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_each?weight? PASSED*"])


def test_a_list_of_messages_is_a_conversation_and_a_broken_one_says_why() -> None:
    cid, samples = turn_samples(GROUNDED["turns"])
    assert cid == "conversation" and [s.id for s in samples] == ["conversation#2", "conversation#4"]
    assert [m.content for m in samples[1].history][:1] == ["My parcel weighs four kilos."]
    cid, _ = turn_samples(GROUNDED["turns"], conversation_id="mine")
    assert cid == "mine"
    with pytest.raises(InputFormatError, match=r"message 2: role 'robot' is not one of"):
        turn_samples([{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}])
    with pytest.raises(InputFormatError, match="no assistant message after a user message"):
        turn_samples({"id": "q", "turns": [{"role": "user", "content": "hello?"}]})
    with pytest.raises(InputFormatError, match="a conversation is a mapping"):
        turn_samples("hello")


def test_assert_scores_on_a_conversation_needs_a_turn_and_names_the_metrics() -> None:
    with pytest.raises(ScoreAssertionError, match="has no judged turn"):
        judge.assert_scores(ConversationResult("empty"), faithfulness=0.5)


def test_async_tests_await_conversations_and_a_replay_miss_names_the_turn(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(
        pytester,
        """
import asyncio
import pytest

@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_at_once(rag_judge, anyio_backend):
    chat, grounded = await asyncio.gather(
        rag_judge.ascore_conversation(CHAT, metrics=["faithfulness"]),
        rag_judge.ascore_conversation(GROUNDED, metrics=["faithfulness"]),
    )
    assert [t["faithfulness"] for t in chat.turns] == [0.5, 0.75]
    assert chat.means() == {"faithfulness": 0.625}
    judge.assert_scores(grounded, faithfulness=1.0)
""",
    )
    cache = tmp_path / "cache.sqlite"
    pytester.runpytest(*judge_args(server, cache)).assert_outcomes(passed=1)
    write_tests(
        pytester,
        """
def test_new(rag_judge):
    rag_judge.score_conversation({**CHAT, "id": "never"}, metrics=["knowledge_retention"])
""",
    )
    replay = pytester.runpytest(*judge_args(server, cache), "--judge-replay")
    replay.assert_outcomes(failed=1)
    replay.stdout.fnmatch_lines(["*ReplayMiss: knowledge_retention of 'never#*"])


def test_cases_refuse_a_conversation_of_an_earlier_ones_id(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    """Two conversations of one id were two cases, judged and reported as two, where
    `judge eval` judges the first alone (one id would make them one conversation): the
    file is refused at collection, naming both, as a flat table giving a turn twice is."""
    data = tmp_path / "chats.jsonl"
    forked = {**GROUNDED, "id": "parcel"}
    data.write_text("".join(json.dumps(c) + "\n" for c in (CHAT, GROUNDED, forked)))
    twice = "conversations 0 and 2 (numbered from 0 in the input) have the same id 'parcel'"
    with pytest.raises(InputFormatError) as caught:
        cases(data)
    assert twice in str(caught.value) and "give each conversation its own id" in str(caught.value)
    assert [p.id for p in cases(data, limit=2)] == ["parcel", "weight"]  # the cases given
    write_tests(
        pytester,
        f"""
import pytest
from judge.pytest_plugin import cases

@pytest.mark.parametrize("chat", cases({str(data)!r}))
def test_each(rag_judge, chat):
    rag_judge.assert_scores(chat, faithfulness=0.5)
""",
    )
    result = pytester.runpytest(*judge_args(server, tmp_path / "cache.sqlite"))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*InputFormatError: *{twice}*"])
    assert server.count() == 0


def test_cases_refuse_a_row_at_an_earlier_rows_place() -> None:
    """Rows giving their own conversation_id, turn and history: two rows at one place were
    two cases where `judge eval` judges the first alone."""
    forked = {**GROUNDED, "id": "parcel"}
    rows = [row for n, c in enumerate([CHAT, forked]) for row in turn_records(c, n)]
    with pytest.raises(InputFormatError) as caught:
        cases(rows)
    assert (
        "rows 0 and 2 (numbered from 0 in the input) are both turn 2 of conversation 'parcel'"
        in str(caught.value)
    )
    assert "give each chat its own conversation_id" in str(caught.value)
    assert len(cases(rows, limit=2)) == 2
    interleaved = [rows[0], *turn_records(GROUNDED, 1), rows[1]]  # one chat's rows apart
    assert [p.values[0]["turn"] for p in cases(interleaved)] == [2, 2, 4, 4]
