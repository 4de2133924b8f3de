"""context_focus: the share of the contexts' sentences a question needs. The sentences are
cut and numbered without a model, one call picks the needed ones, a pure scorer divides."""

from __future__ import annotations

import json
import math
import shutil

import pytest

import judge
import judge.metrics.prompts as prompts
from judge import LLM
from judge.metrics.judges import context_sentences
from judge.metrics.scorers import context_focus
from judge.testing import heuristic_judge
from judge.testing.replies import data_blocks

QUESTION = "Which river flows through Vienna?"
FOCUSED = "Vienna is the capital of Austria. The Danube river flows through Vienna."
PADDED = FOCUSED + " Bananas are yellow. Apples grow on trees in many countries."


@pytest.mark.parametrize(
    ("contexts", "cut"),
    [
        (
            [FOCUSED],
            [["Vienna is the capital of Austria.", "The Danube river flows through Vienna."]],
        ),
        # a heading has no full stop: the blank line after it ends it
        (
            ["History\n\nThe city was founded by Celts."],
            [["History", "The city was founded by Celts."]],
        ),
        (
            ["Dr. Who met J. Smith in 1999. They talked."],
            [["Dr. Who met J. Smith in 1999.", "They talked."]],
        ),
        (
            ["维也纳是奥地利的首都。多瑙河流经维也纳！"],
            [["维也纳是奥地利的首都。", "多瑙河流经维也纳！"]],
        ),
        (["", "   ", "One."], [[], [], ["One."]]),
    ],
)
def test_contexts_are_cut_into_sentences(contexts, cut):
    assert context_sentences(contexts) == cut


@pytest.mark.parametrize(
    ("needed", "total", "score"),
    [(0, 4, 0.0), (1, 4, 0.25), (4, 4, 1.0), (2, 3, 2 / 3)],
)
def test_context_focus_is_the_needed_share(needed, total, score):
    assert context_focus(needed, total) == pytest.approx(score)


def test_context_focus_without_sentences_is_nan_and_a_bad_count_is_refused():
    assert math.isnan(context_focus(0, 0))
    with pytest.raises(ValueError, match="5 needed sentences of 4"):
        context_focus(5, 4)
    with pytest.raises(ValueError):
        context_focus(-1, 4)


def picking(numbers: list[int]):
    """A judge that names `numbers` as the needed sentences, whatever it is shown."""

    def reply(body: dict) -> str:
        if body["messages"][0]["content"].startswith("You pick, from ret"):
            return json.dumps({"reason": "The question needs the river.", "needed": numbers})
        return heuristic_judge(body)

    return reply


def llm_for(server) -> LLM:
    return LLM("openai/judge-model", api_base=server.base_url, api_key="k")


def test_the_sentences_of_all_contexts_are_numbered_from_0_in_one_request(fake_llm_server):
    fake_llm_server.chat = picking([1])
    contexts = [FOCUSED, "Bananas are yellow."]
    result = judge.score(
        QUESTION, "The Danube.", contexts, metrics=["context_focus"], llm=llm_for(fake_llm_server)
    )
    (request,) = fake_llm_server.requests
    blocks = data_blocks(request.body["messages"][1]["content"])
    assert blocks["sentences"] == {
        "0": "Vienna is the capital of Austria.",
        "1": "The Danube river flows through Vienna.",
        "2": "Bananas are yellow.",
    }
    assert blocks["reference"] == "The Danube."  # no ground truth: the answer
    assert result["context_focus"] == pytest.approx(1 / 3)
    assert result.evidence["context_sentences"] == {
        "per_context": [2, 1],
        "needed": [1],
        "reason": "The question needs the river.",
    }


def test_the_schema_names_only_sentence_numbers_that_exist(fake_llm_server):
    fake_llm_server.chat = picking([0])
    judge.score(QUESTION, "A.", [FOCUSED], metrics=["context_focus"], llm=llm_for(fake_llm_server))
    schema = fake_llm_server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["needed"]["items"] == {"enum": [0, 1]}


def test_numbers_past_the_end_repeats_and_off_topic_picks_do_not_count(fake_llm_server):
    # 3 is past the end; 1 twice; 2 ("Bananas...") shares no word with question or answer
    fake_llm_server.chat = picking([3, 1, 1, 2])
    result = judge.score(
        QUESTION,
        "The Danube.",
        [FOCUSED, "Bananas are yellow."],
        metrics=["context_focus"],
        llm=llm_for(fake_llm_server),
    )
    assert result["context_focus"] == pytest.approx(1 / 3)
    evidence = result.evidence["context_sentences"]
    assert evidence["needed"] == [1]
    assert evidence["not_on_topic"] == [2]


def test_text_that_does_not_help_lowers_the_score(fake_llm_server):
    fake_llm_server.chat = heuristic_judge  # needed: sentences sharing two question words
    rows = [
        {"question": QUESTION, "answer": "The Danube.", "contexts": [FOCUSED]},
        {"question": QUESTION, "answer": "The Danube.", "contexts": [PADDED]},
    ]
    result = judge.evaluate(
        rows, metrics=["context_focus"], llm=llm_for(fake_llm_server), progress=False
    )
    focused, padded = (r.scores["context_focus"] for r in result.rows)
    assert focused == pytest.approx(1 / 2)
    assert padded == pytest.approx(1 / 4)


def test_undefined_without_contexts_or_sentences_and_nothing_is_sent(fake_llm_server):
    fake_llm_server.chat = picking([0])
    llm = llm_for(fake_llm_server)
    none = judge.score(QUESTION, "A.", [], metrics=["context_focus"], llm=llm)
    blank = judge.score(QUESTION, "A.", ["", "  "], metrics=["context_focus"], llm=llm)
    assert math.isnan(none["context_focus"]) and none.reasons["context_focus"] == "no_contexts"
    # Contexts that are all blank are no contexts (issue 37: they were scored, and paid for).
    assert math.isnan(blank["context_focus"]) and blank.reasons["context_focus"] == "no_contexts"
    assert fake_llm_server.requests == []


def test_an_empty_pick_scores_0(fake_llm_server):
    fake_llm_server.chat = picking([])
    result = judge.score(
        QUESTION, "A.", [FOCUSED], metrics=["context_focus"], llm=llm_for(fake_llm_server)
    )
    assert result["context_focus"] == 0.0


def test_a_run_records_the_sentence_prompt_version_and_an_edit_changes_its_fingerprint(
    fake_llm_server, tmp_path, monkeypatch
):
    fake_llm_server.chat = heuristic_judge
    rows = [{"question": QUESTION, "answer": "The Danube.", "contexts": [FOCUSED]}]
    llm = llm_for(fake_llm_server)
    before = judge.evaluate(rows, metrics=["context_focus"], llm=llm, progress=False)
    version = prompts.load_prompt("context_sentences").version
    assert before.config["prompts"]["context_sentences"] == version
    edited = tmp_path / "prompts"
    shutil.copytree(prompts.prompts_dir(), edited)
    with open(edited / "context_sentences.txt", "a", encoding="utf-8") as f:
        f.write("\n")
    monkeypatch.setattr(prompts, "prompts_dir", lambda: edited)
    after = judge.evaluate(rows, metrics=["context_focus"], llm=llm, progress=False)
    assert after.config["prompts"]["context_sentences"] != version
    assert after.config["run"] != before.config["run"]  # a checkpoint of before is not resumed
