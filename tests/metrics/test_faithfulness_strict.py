"""faithfulness_strict: a claim naming a number or name that no context mentions is not
supported, whatever the judge said; the check and its scorer are pure, the metric shares
faithfulness's calls."""

from __future__ import annotations

import json
import math

import pytest

import judge
from judge import LLM
from judge.metrics.overlap import named_terms, unsourced_terms
from judge.metrics.scorers import faithfulness, strict_verdicts
from judge.testing import heuristic_judge

CONTEXT = "PSLV-C56 was launched on Sunday, 30 July 2023 from Sriharikota by ISRO."


@pytest.mark.parametrize(
    ("claim", "terms"),
    [
        ("The launch was on Monday, 30 August 2023.", ["Monday", "30", "August", "2023"]),
        # the first word of a sentence is capitalised by grammar, not because it is a name
        ("Brad Pitt stars in it. Nobody else does.", ["Pitt"]),
        ("It was played by J. Robert Oppenheimer.", ["J", "Robert", "Oppenheimer"]),
        ("the price is 1,000.50 dollars", ["1,000.50"]),
        ("it was launched in the summer", []),  # no number, no name past the first word
        ("它于2023年发射。", ["2023"]),  # CJK: numbers only, there are no capitals
    ],
)
def test_named_terms_are_numbers_and_non_initial_capitalised_words(claim, terms):
    assert named_terms(claim) == terms


@pytest.mark.parametrize(
    ("claim", "unsourced"),
    [
        ("PSLV-C56 was launched on Monday, 30 August 2023.", ["Monday", "August"]),
        ("PSLV-C56 was launched on Sunday, 30 July 2023.", []),
        ("The rocket PSLV C56 flew from Sriharikota.", []),  # separators do not matter
        ("The agency isro launched it.", []),  # nor case
        ("It carried 4 satellites.", ["4"]),
        ("The mission was run by NASA.", ["NASA"]),
        # Known limits, kept visible: a unit written out and a rounded number are flagged
        # although a careful reader would call them supported.
        ("Water boils at 100 degrees Celsius.", ["Celsius"]),
        ("Light travels about 300,000 km/s.", ["300,000"]),
    ],
)
def test_unsourced_terms(claim, unsourced):
    contexts = [CONTEXT, "Water boils at 100 °C. Light: 299,792,458 m/s."]
    assert unsourced_terms(claim, contexts) == unsourced


def test_a_number_written_as_a_word_in_the_context_sources_the_digit():
    assert unsourced_terms("It seats 4 adults.", ["A car for four adults."]) == []
    assert unsourced_terms("It seats 5 adults.", ["A car for four adults."]) == ["5"]


@pytest.mark.parametrize(
    ("verdicts", "unsourced", "strict"),
    [
        (["supported", "supported"], [False, True], ["supported", "not_found"]),
        (["contradicted", "not_found"], [True, True], ["contradicted", "not_found"]),
        ([], [], []),
    ],
)
def test_strict_verdicts_only_take_back_support(verdicts, unsourced, strict):
    assert strict_verdicts(verdicts, unsourced) == strict


def test_strict_verdicts_refuse_a_count_mismatch():
    with pytest.raises(ValueError, match="2 verdicts for 1 claims"):
        strict_verdicts(["supported", "supported"], [False])


def agreeable_judge(body: dict) -> str:
    """heuristic_judge's claims, but every claim verified as supported by context 0."""
    reply = heuristic_judge(body)
    if body["messages"][0]["content"].startswith("You check numbered"):
        verdicts = json.loads(reply)["verdicts"]
        return json.dumps(
            {
                "verdicts": [
                    {"claim": v["claim"], "reason": "Context 0 says so.", "verdict": "supported"}
                    | {"context": 0}
                    for v in verdicts
                ]
            }
        )
    return reply


def test_strict_faithfulness_takes_back_support_for_unsourced_names(fake_llm_server):
    fake_llm_server.chat = agreeable_judge
    llm = LLM("openai/judge-model", api_base=fake_llm_server.base_url, api_key="k")
    answer = "PSLV-C56 was launched from Sriharikota. It was launched on Monday, 30 August 2023."
    result = judge.score(
        "When was PSLV-C56 launched?",
        answer,
        [CONTEXT],
        metrics=["faithfulness", "faithfulness_strict"],
        llm=llm,
    )
    assert result["faithfulness"] == 1.0  # the judge supported both claims
    assert result["faithfulness_strict"] == 0.5
    assert result.evidence["answer_claims_unsourced"] == [
        {"claim": 1, "terms": ["Monday", "August"]}
    ]
    # One claims call and one verify call serve both metrics.
    assert len(fake_llm_server.requests) == 2


def test_strict_faithfulness_is_undefined_where_faithfulness_is(fake_llm_server):
    fake_llm_server.chat = agreeable_judge
    llm = LLM("openai/judge-model", api_base=fake_llm_server.base_url, api_key="k")
    result = judge.score("Q?", "A claim.", [], metrics=["faithfulness_strict"], llm=llm)
    assert math.isnan(result["faithfulness_strict"])
    assert result.reasons["faithfulness_strict"] == "no_contexts"
    assert faithfulness(strict_verdicts([], [])) != faithfulness(strict_verdicts([], []))  # NaN
