"""The app contract: replies checked against it, targets loaded, apps recognised."""

from __future__ import annotations

import dataclasses

import pydantic
import pytest

from judge.experiments.app import AppError, MalformedReply, as_app, load_target, parse_reply
from tests.helpers import apps


@dataclasses.dataclass
class Reply:
    answer: str
    contexts: list[str]
    retrieved_ids: list[str] | None = None


class TypedReply(pydantic.BaseModel):
    answer: str
    contexts: list[str]
    retrieved_ids: list[str]
    retrieved_scores: list[float]
    model: str


def test_a_dataclass_or_a_pydantic_model_is_read_like_a_mapping():
    assert parse_reply(Reply("a", ["c"], ["d1"])).columns() == {
        "answer": "a",
        "contexts": ["c"],
        "retrieved_ids": ["d1"],
    }
    typed = parse_reply(TypedReply(answer="a", contexts=[], retrieved_ids=["x", "y"],
                                   retrieved_scores=[0.9, 0.5], model="m"))  # fmt: skip
    assert typed.retrieved_scores == [0.9, 0.5] and typed.extra == {"model": "m"}


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("just text", "returned a str, not a mapping with 'answer' and 'contexts'"),
        ({"answer": "a"}, "the reply has no 'contexts' (its keys: answer)"),
        ({"answer": "a", "contexts": "one text"}, "'contexts' is a str, not a list of strings"),
        ({"answer": "a", "contexts": ["x", 3]}, "contexts[1] is a int, not a string"),
        ({"answer": "a", "contexts": [], "retrieved_ids": [1.5]}, "retrieved_ids[0] is a float"),
        (
            {"answer": "a", "contexts": [], "retrieved_ids": ["x"], "retrieved_scores": [1, 2]},
            "'retrieved_scores' has 2 scores for 1 ids",
        ),
        (
            {
                "answer": "a",
                "contexts": [],
                "retrieved_ids": ["x"],
                "retrieved_scores": [float("nan")],
            },
            "retrieved_scores[0] is nan, not a finite number",
        ),
        (
            {"answer": "a", "contexts": [], "when": object()},
            "the reply's 'when' (object) cannot be written as JSON",
        ),
    ],
)
def test_a_reply_outside_the_contract_says_what_is_wrong(reply, message):
    with pytest.raises(MalformedReply) as caught:
        parse_reply(reply)
    assert message in str(caught.value)


def test_integer_ids_become_strings():
    assert parse_reply(
        {"answer": "", "contexts": [], "retrieved_ids": [3, "d4"]}
    ).retrieved_ids == [
        "3",
        "d4",
    ]


def test_targets_by_module_and_by_file_name_the_same_function_and_fingerprint_its_file():
    by_module = as_app(load_target("tests.helpers.apps:answer"), "tests.helpers.apps:answer")
    by_file = as_app(load_target(f"{apps.__file__}:pipeline.__call__"), "file")
    assert by_module.call is apps.answer and not by_module.is_async
    assert by_module.fingerprint is not None and by_module.fingerprint == by_file.fingerprint
    assert as_app(apps.async_answer).is_async
    assert as_app(apps.Pipeline()).target == "tests.helpers.apps:Pipeline"


def test_a_function_that_cannot_take_the_question_is_refused_before_any_call():
    def two(question, context):
        return {}

    with pytest.raises(AppError, match=r"it must take one argument: the question \(a str\), or"):
        as_app(two)
