"""Issue 12's design fixes: a claims call per text, claims checked against their own text,
context numbers that exist, reasons before verdicts and grades."""

from __future__ import annotations

import json
import math

import pytest

import judge
from judge import LLM
from judge.metrics.judges import ContextGrade, Verdict, sentences
from judge.metrics.overlap import drawn_from, share_in
from judge.testing import FakeLLMServer, data_blocks, heuristic_judge

QUESTION = "Who designed the Sydney Opera House?"
ANSWER = "The Sydney Opera House was designed by Jørn Utzon. It opened in 1973."
TRUTH = "Jørn Utzon, a Danish architect, designed it."
CONTEXTS = ["Coral reefs lie off Queensland.", "Jørn Utzon designed the Sydney Opera House."]
# A claim a small model copied from the claims prompt's example, not from the answer.
COPIED = "The Rijksmuseum moved to Amsterdam in 1808."


def system_of(body: dict) -> str:
    return str(body["messages"][0]["content"])


def user_of(body: dict) -> dict:
    return data_blocks(next(m["content"] for m in body["messages"] if m["role"] == "user"))


@pytest.fixture
def llm(fake_llm_server: FakeLLMServer) -> LLM:
    return LLM("openai/judge-model", api_base=fake_llm_server.base_url, api_key="k", max_retries=0)


def test_each_text_is_split_in_its_own_call(fake_llm_server, llm):
    fake_llm_server.chat = heuristic_judge
    result = judge.score(
        QUESTION, ANSWER, CONTEXTS, TRUTH, metrics=["faithfulness", "context_recall"], llm=llm
    )
    claims_calls = [
        user_of(r.body) for r in fake_llm_server.requests if "atomic claims" in system_of(r.body)
    ]
    # One text per call: the answer's claims cannot come back as the reference's.
    assert sorted(c["text"] for c in claims_calls) == sorted([ANSWER, TRUTH])
    assert all(set(c) == {"question", "text"} for c in claims_calls)
    assert result.evidence["answer_claims"][0].startswith("The Sydney Opera House")
    assert result.evidence["truth_claims"] == ["Jørn Utzon, a Danish architect, designed it."]


def test_a_claim_not_drawn_from_its_text_is_dropped_and_shown(fake_llm_server, llm):
    def copying_judge(body: dict) -> str:
        data = user_of(body)
        if data.get("text") == ANSWER:
            return json.dumps({"claims": ["Jørn Utzon designed the Sydney Opera House.", COPIED]})
        return heuristic_judge(body)

    fake_llm_server.chat = copying_judge
    result = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], llm=llm)
    assert result.evidence["answer_claims"] == ["Jørn Utzon designed the Sydney Opera House."]
    assert result.evidence["answer_claims_not_in_text"] == [COPIED]
    verify = [user_of(r.body) for r in fake_llm_server.requests if "<claims>" in str(r.body)]
    assert verify[0]["claims"] == ["Jørn Utzon designed the Sydney Opera House."]
    assert result["faithfulness"] == 1.0


def test_claims_of_neither_text_leave_no_claims(fake_llm_server, llm):
    fake_llm_server.chat = lambda body: json.dumps({"claims": [COPIED]})
    result = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], llm=llm)
    assert math.isnan(result["faithfulness"]) and result.reasons["faithfulness"] == "no_claims"


def test_overlap_tells_a_claim_of_its_text_from_a_copied_one():
    assert drawn_from("Jørn Utzon designed the Opera House.", ANSWER)
    # Pronouns are resolved from the question: its words count as the text's.
    assert drawn_from("The Sydney Opera House opened in 1973.", "It opened in 1973.", QUESTION)
    assert not drawn_from(COPIED, ANSWER, QUESTION)
    assert share_in("长城全长约 21196 公里。", "长城全长约 21196 公里，始建于公元前。") == 1.0
    assert share_in("It is.", "anything") == 1.0  # no content words: nothing to contradict


def test_schemas_name_only_existing_contexts_and_put_the_reason_first(fake_llm_server, llm):
    fake_llm_server.chat = heuristic_judge
    judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness", "context_precision"], llm=llm)
    schemas = {
        system_of(r.body).split("\n")[0]: r.body["response_format"]["json_schema"]["schema"]
        for r in fake_llm_server.requests
    }
    verify = schemas["You check numbered claims against numbered contexts."]
    verdict = verify["$defs"]["Verdict"]["properties"]
    assert verdict["context"]["enum"] == [0, 1, None]  # two contexts: 0 and 1 exist
    assert list(verdict) == ["claim", "reason", "verdict", "context"]
    grade = schemas["You judge how useful each retrieved context is for answering a question."]
    graded = grade["$defs"]["ContextGrade"]["properties"]
    assert list(graded) == ["context", "reason", "grade"]
    assert graded["grade"]["enum"] == [0, 1, 2, 3]
    assert list(Verdict.model_fields) == list(verdict)
    assert list(ContextGrade.model_fields) == list(graded)


def test_a_context_number_past_the_end_is_still_dropped(fake_llm_server, llm):
    def citing_judge(body: dict) -> str:
        data = user_of(body)
        if "claims" in data and "contexts" in data:
            verdicts = [
                {"claim": i, "reason": "r", "verdict": "supported", "context": 5}
                for i in range(len(data["claims"]))
            ]
            return json.dumps({"verdicts": verdicts})
        return heuristic_judge(body)

    fake_llm_server.chat = citing_judge
    result = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], llm=llm)
    assert {v["context"] for v in result.evidence["answer_verdicts"]} == {None}


def _grading_judge(grades: list[int]):
    def judge_(body: dict) -> str:
        data = user_of(body)
        if "contexts" in data and "question" in data and "claims" not in data:
            items = [{"context": i, "reason": "r", "grade": g} for i, g in enumerate(grades)]
            return json.dumps({"contexts": items})
        return heuristic_judge(body)

    return judge_


def test_a_context_sharing_no_word_with_question_or_reference_is_not_relevant(fake_llm_server, llm):
    # The model graded the unrelated first context 3 (by position, as a small model did).
    fake_llm_server.chat = _grading_judge([3, 2])
    result = judge.score(QUESTION, ANSWER, CONTEXTS, TRUTH, metrics=["context_precision"], llm=llm)
    assert [g["grade"] for g in result.evidence["context_grades"]] == [1, 2]
    assert result.evidence["context_grades_capped"] == [0]
    assert result["context_precision"] == 0.5  # the relevant context comes second


def test_a_context_in_another_script_keeps_its_grade(fake_llm_server, llm):
    fake_llm_server.chat = _grading_judge([3, 2])
    contexts = ["悉尼歌剧院由约恩·乌松设计。", "Jørn Utzon designed the Sydney Opera House."]
    result = judge.score(QUESTION, ANSWER, contexts, TRUTH, metrics=["context_precision"], llm=llm)
    assert [g["grade"] for g in result.evidence["context_grades"]] == [3, 2]
    assert "context_grades_capped" not in result.evidence
    assert result["context_precision"] == 1.0


def _verdicts_judge(verdicts: list[dict]):
    def judge_(body: dict) -> str:
        data = user_of(body)
        if "claims" in data and "contexts" in data:
            return json.dumps({"verdicts": verdicts[: len(data["claims"])]})
        return heuristic_judge(body)

    return judge_


def test_a_verdict_whose_reason_borrows_the_prompt_example_is_listed(fake_llm_server, llm):
    # WikiEval, Qwen2.5-Coder-0.5B: reasons about the verify example's museum and garden
    # for claims about a railway. Listed in the evidence; the verdict stands (overruling it
    # was measured on WikiEval and did not agree better with people). A reason copied word
    # for word is re-asked instead (test_judges); this one is reworded.
    copied = "The move to Amsterdam rules out Rotterdam."
    fake_llm_server.chat = _verdicts_judge(
        [
            {"claim": 0, "reason": copied, "verdict": "supported", "context": 0},
            {"claim": 1, "reason": "No context dates it.", "verdict": "not_found", "context": None},
        ]
    )
    result = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], llm=llm)
    assert len(result.evidence["answer_claims"]) == 2
    assert result["faithfulness"] == 0.5
    assert result.evidence["answer_verdicts"][0]["verdict"] == "supported"
    assert result.evidence["answer_verdicts"][0]["reason"] == copied
    assert result.evidence["answer_verdicts_borrowed"] == [
        {"claim": 0, "verdict": "supported", "words": ["amsterdam", "rotterdam"]}
    ]


def test_a_reason_about_its_own_claim_is_trusted_even_with_example_words(fake_llm_server, llm):
    # "Amsterdam" is in the example, but also in this sample's data: not borrowed.
    contexts = ["The Rijksmuseum moved to Amsterdam in 1808."]
    fake_llm_server.chat = _verdicts_judge(
        [
            {
                "claim": 0,
                "reason": "It moved to Amsterdam in 1808.",
                "verdict": "supported",
                "context": 0,
            }
        ]
    )
    result = judge.score(
        "When did the Rijksmuseum move?",
        "The Rijksmuseum moved to Amsterdam in 1808.",
        contexts,
        metrics=["faithfulness"],
        llm=llm,
    )
    assert result["faithfulness"] == 1.0
    assert "answer_verdicts_borrowed" not in result.evidence


BOIL_Q = "At what temperature in Fahrenheit does water boil at sea level?"
BOIL_TRUTH = "Water boils at 212 degrees Fahrenheit (100 degrees Celsius) at sea level."
EVEREST = "Mount Everest rises 8,849 metres above sea level."
BOILS = "At standard sea-level pressure, pure water boils at 100 °C, which is 212 °F."


def test_a_context_with_none_of_the_ground_truths_own_words_is_not_relevant(fake_llm_server, llm):
    # Qwen2.5-Coder-0.5B graded Everest's height 3 for the boiling point (fixtures/real):
    # it shares "level" with the question, but none of the answer's words (212, boils...).
    fake_llm_server.chat = _grading_judge([3, 1])
    result = judge.score(
        BOIL_Q, "212 °F.", [EVEREST, BOILS], BOIL_TRUTH, metrics=["context_precision"], llm=llm
    )
    assert [g["grade"] for g in result.evidence["context_grades"]] == [1, 1]
    assert result.evidence["context_grades_capped"] == [0]
    assert result["context_precision"] == 0.0
    fake_llm_server.chat = _grading_judge([1, 3])
    result = judge.score(
        BOIL_Q, "212 °F.", [EVEREST, BOILS], BOIL_TRUTH, metrics=["context_precision"], llm=llm
    )
    assert "context_grades_capped" not in result.evidence
    assert result["context_precision"] == 0.5


def test_answer_words_are_asked_only_of_a_ground_truth(fake_llm_server, llm):
    fake_llm_server.chat = _grading_judge([3, 3])
    # Without a ground truth the answer is the reference: a context refuting a wrong
    # answer ("visible from the Moon") still answers the question, and keeps its grade.
    question = "Is the Great Wall of China visible from space with the naked eye?"
    contexts = [
        "The Great Wall of China is generally not visible to the naked eye from orbit.",
        "The Great Wall of China is visible from space with the naked eye, some claim.",
    ]
    wrong = "Yes, the Great Wall is easily visible from the Moon."
    result = judge.score(question, wrong, contexts, metrics=["context_precision"], llm=llm)
    assert "context_grades_capped" not in result.evidence
    # A ground truth with no word beyond the question's leaves the contexts to the first
    # check (a word shared with the question or the reference).
    truth = "No, the Great Wall of China is not visible from space with the naked eye."
    result = judge.score(question, wrong, contexts, truth, metrics=["context_precision"], llm=llm)
    assert "context_grades_capped" not in result.evidence
    assert result["context_precision"] == 1.0


def test_a_claim_of_several_sentences_is_cut_at_its_sentence_ends(fake_llm_server, llm):
    # A small model returned a long answer whole as its one "claim" (WikiEval, item 01).
    fake_llm_server.chat = lambda body: (
        json.dumps({"claims": [ANSWER]})
        if "atomic claims" in system_of(body)
        else heuristic_judge(body)
    )
    result = judge.score(QUESTION, ANSWER, CONTEXTS, metrics=["faithfulness"], llm=llm)
    assert result.evidence["answer_claims"] == [
        "The Sydney Opera House was designed by Jørn Utzon.",
        "It opened in 1973.",
    ]
    assert sentences("It is 3.5 km long. 长城很长。它很古老。") == [
        "It is 3.5 km long.",
        "长城很长。",
        "它很古老。",
    ]
