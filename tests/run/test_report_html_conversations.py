"""report.html of a run of conversations: a worst sample names its conversation and turn,
lists the conversation's turns in order (linked to their own blocks when they are worst
samples too), and each claim's source (a context, or a message of the conversation).
Judged through the fake server's heuristic judge; the report of a run without
conversations is as it was."""

from __future__ import annotations

import re

from judge import evaluate
from judge.run.report_html import render_report
from judge.run.results import EvaluationResult
from judge.run.rows import ResultRow
from tests.helpers.report_page import parse

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
SINGLE = {
    "id": "alone",
    "question": "Who collects parcels?",
    "answer": "Couriers collect parcels daily. Owls carry them at night.",
    "contexts": ["Couriers collect parcels daily."],
}


def test_a_worst_turn_names_its_conversation_and_links_its_other_turns(models) -> None:
    result = evaluate([CHAT], metrics=["faithfulness"], llm=models["llm"], progress=False)
    text = render_report(result)
    page = parse(text)
    heads = [sample.split("mean")[0] for sample in page.samples]
    # turn 2 (mean 0.5) is worse than turn 4 (0.75): both are worst samples
    assert [" ".join(h.split()) for h in heads] == [
        "row 0 · id parcel#2 · conversation parcel · turn 2 ·",
        "row 1 · id parcel#4 · conversation parcel · turn 4 ·",
    ]
    # each block has an anchor and lists the conversation, linking the other turn's block
    assert '<details open class=sample id="row-0">' in text
    assert '<details open class=sample id="row-1">' in text
    blocks = text.split("<details open class=sample")[1:]
    assert '<a href="#row-1">turn 4</a>' in blocks[0]
    assert "<b>turn 2 (this one)</b>" in blocks[0]
    assert '<a href="#row-0">turn 2</a>' in blocks[1]
    assert "Send it express then." in page.samples[0]  # turn 4's question, in turn 2's block
    # each claim's source: a context, or the message of the conversation it rests on
    claims = blocks[1].split("<b>answer claims</b>")[1]
    assert "<th>source</th>" in claims
    rows = re.findall(r"<tr><td>(answer claim \d)</td><td>(.*?)</td><td[^>]*>(.*?)</td>", claims)
    sources = re.findall(r"<td>([^<]*)</td></tr>", claims)
    assert [(n, v) for n, _, v in rows] == [
        ("answer claim 1", "supported"),
        ("answer claim 2", "supported"),
        ("answer claim 3", "not found"),
        ("answer claim 4", "supported"),
    ]
    assert sources == [
        "conversation, turn 1 (user)",
        "conversation, turn 2 (assistant)",
        "–",
        "context 1",
    ]


def test_only_the_conversation_s_turns_are_listed_and_other_rows_stay_as_they_were(
    models,
) -> None:
    other = {**CHAT, "id": "other"}
    chats = evaluate([CHAT, other], metrics=["faithfulness"], llm=models["llm"], progress=False)
    single = evaluate([SINGLE], metrics=["faithfulness"], llm=models["llm"], progress=False)
    single.rows[0].row = 4  # a run of both: a row that is no turn after the turns
    rows = [*chats.rows, single.rows[0]]
    text = render_report(EvaluationResult(rows, chats.metrics, chats.config, chats.usage))
    blocks = text.split("<details open class=sample")[1:]
    by_id = {re.search(r"id (\S+) ·", b).group(1): b for b in blocks}  # type: ignore[union-attr]
    assert set(by_id) == {"parcel#2", "parcel#4", "other#2", "other#4", "alone"}
    # a turn's table holds its own conversation's turns, not the other's
    assert by_id["other#4"].count("<td><a href=") + by_id["other#4"].count("(this one)") == 2
    assert 'href="#row-3"' not in by_id["parcel#2"]  # other#4's block
    assert 'href="#row-1"' in by_id["parcel#2"]
    # the single-turn row: no anchor, no conversation, its claims' column still "context"
    alone = by_id["alone"]
    assert alone.startswith(">") and "conversation" not in alone
    assert "<th>context</th>" in alone and "<th>source</th>" not in alone


def test_conversation_ids_and_turn_texts_are_escaped() -> None:
    attack = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    rows = [
        ResultRow(
            row=i,
            id=f"{attack}#{turn}",
            question=attack,
            answer=attack,
            contexts=["c"],
            scores={"faithfulness": 0.0},
            evidence={
                "answer_claims": [attack],
                "answer_verdicts": [
                    {
                        "claim": 0,
                        "verdict": "supported",
                        "source": "history",
                        "turn": 1,
                        "role": "user",
                        "context": f"conversation, turn 1 ({attack})",
                    }
                ],
            },
            conversation_id=attack,
            turn=turn,
        )
        for i, turn in enumerate((2, 4))
    ]
    result = EvaluationResult(
        rows, ["faithfulness"], {"source": "t", "metrics": ["faithfulness"]}, {}
    )
    text = render_report(result)
    page = parse(text)
    assert "script" not in page.tags and "img" not in page.tags
    assert not [a for a in page.attributes if a.startswith("on") or a == "src"]
    assert all(f"conversation {attack} · turn" in " ".join(s.split()) for s in page.samples)
    assert all(f"conversation, turn 1 ({attack})" in s for s in page.samples)
