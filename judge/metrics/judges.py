"""The LLM judges: each renders one prompt, makes one call, and returns typed data.

Output models that depend on the input (three claims need exactly three verdicts) are
built per size, so a count mismatch is a validation error: the LLM boundary re-asks, then
fails; a reply is never silently truncated or padded.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, Field, WithJsonSchema, create_model, model_validator

from judge.llm.judge import Judge
from judge.llm.structured import schema_of
from judge.llm.usage import UsageLedger
from judge.metrics.prompts import Prompt, load_prompt, reason_key

M = TypeVar("M", bound=BaseModel)
VerdictLabel = Literal["supported", "contradicted", "not_found"]


class Verdict(BaseModel):
    """The judgment of one claim against the contexts (the reason is written first)."""

    claim: int = Field(ge=0, description="the claim's number")
    reason: str
    verdict: VerdictLabel
    context: int | None = Field(default=None, ge=0, description="supporting context number")


class TurnVerdict(Verdict):
    """The judgment of one claim of a conversation's turn: its evidence is one of the turn's
    contexts (`context`) or one piece of the conversation before it (`said`)."""

    said: int | None = Field(default=None, ge=0, description="supporting conversation piece")


class ContextGrade(BaseModel):
    """The judged usefulness of one retrieved context (0 unrelated .. 3 answers it); the
    reason is written before the grade."""

    context: int = Field(ge=0)
    reason: str
    grade: int = Field(ge=0, le=3, json_schema_extra={"enum": [0, 1, 2, 3]})


class NeededSentences(BaseModel):
    """The numbers of the context sentences a question needs (the reason is written first)."""

    reason: str
    needed: list[int]


class RetentionVerdict(BaseModel):
    """What an answer does with one earlier message of the user (the reason is first)."""

    statement: int = Field(ge=0, description="the earlier message's number")
    reason: str
    verdict: Literal["kept", "contradicted", "asked_again", "unrelated"]


class QueryRewriteCheck(BaseModel):
    """Whether a retriever's query says what the user's latest message asks (reason first)."""

    reason: str
    verdict: Literal["faithful", "incomplete", "drifted"]


class GoalCheck(BaseModel):
    """Whether a conversation reached its expected outcome (the reason is written first)."""

    reason: str
    verdict: Literal["achieved", "not_achieved"]


class TrajectoryCheck(BaseModel):
    """Whether tool calls that differ from the expected ones still serve the user's goal
    (the reason is written first)."""

    reason: str
    verdict: Literal["sound", "unsound"]


class CitationCheck(BaseModel):
    """Whether one cited context supports the statement citing it."""

    check: int = Field(ge=0)
    supported: bool
    reason: str


class ReverseQuestions(BaseModel):
    """Questions an answer would answer, and whether the answer is noncommittal."""

    questions: list[str]
    noncommittal: bool


def _numbered(items: list[Any], field: str, count: int) -> None:
    numbers = [getattr(item, field) for item in items]
    if numbers != list(range(count)):
        raise ValueError(f"give exactly one entry per item, numbered 0 to {count - 1} in order")


class _ClaimList(BaseModel):
    claims: list[str]


class _VerdictList(BaseModel):
    verdicts: list[Verdict]

    @model_validator(mode="after")
    def _in_order(self) -> _VerdictList:
        _numbered(self.verdicts, "claim", len(self.verdicts))
        return self


class _GradeList(BaseModel):
    contexts: list[ContextGrade]

    @model_validator(mode="after")
    def _in_order(self) -> _GradeList:
        _numbered(self.contexts, "context", len(self.contexts))
        return self


class _RetentionList(BaseModel):
    verdicts: list[RetentionVerdict]

    @model_validator(mode="after")
    def _in_order(self) -> _RetentionList:
        _numbered(self.verdicts, "statement", len(self.verdicts))
        return self


class _CheckList(BaseModel):
    checks: list[CitationCheck]

    @model_validator(mode="after")
    def _in_order(self) -> _CheckList:
        _numbered(self.checks, "check", len(self.checks))
        return self


@functools.cache
def _sized(base: type[BaseModel], field: str, item: type, count: int) -> type[BaseModel]:
    """`base` with `field` required to hold exactly `count` items (in the JSON schema too)."""
    sized: Any = Annotated[list[item], Field(min_length=count, max_length=count)]  # type: ignore[valid-type]
    fields: dict[str, Any] = {field: sized}
    model: type[BaseModel] = create_model(
        f"{base.__name__.strip('_')}{count}", __base__=base, **fields
    )
    return model


@functools.cache
def _verdict_for(contexts: int) -> type[Verdict]:
    """Verdict whose JSON schema lists the context numbers that exist (0..contexts-1), so
    a grammar-constrained server cannot name another; validation still accepts any number
    >= 0, and verify_claims drops one past the end."""
    numbers: list[int | None] = [*range(contexts), None]
    context: Any = Annotated[
        int | None,
        Field(ge=0, description="supporting context number"),
        WithJsonSchema({"enum": numbers, "description": "supporting context number"}),
    ]
    model: type[Verdict] = create_model("Verdict", __base__=Verdict, context=(context, None))
    return model


class _ListedVerdicts(_VerdictList):
    """A verify reply of `claims` verdicts naming one of `contexts` contexts
    (`_verify_reply`), whose JSON schema is pydantic's, made faster: a long chat's verify
    calls each have another number of contexts, and pydantic takes a few microseconds per
    number listed (the turns of a 600-turn chat spent 5 s in it)."""

    contexts: ClassVar[int] = 0
    claims: ClassVar[int] = 0

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Pydantic's schema (that of no contexts, with the context numbers listed)."""
        if args or kwargs or not cls.contexts:
            return super().model_json_schema(*args, **kwargs)
        schema = copy.deepcopy(schema_of(_verify_reply(0, cls.claims)))
        schema["$defs"]["Verdict"]["properties"]["context"]["enum"] = [*range(cls.contexts), None]
        return schema


@functools.cache
def _verify_reply(contexts: int, claims: int) -> type[_ListedVerdicts]:
    """The verify call's reply: `claims` verdicts (as `_sized` makes them), each naming one
    of the `contexts` numbers or none (in the schema, as `_verdict_for(contexts)` lists
    them; validated as any number >= 0, as it does). One model per size, as few as can be:
    a long chat's every turn has another number of contexts."""
    if contexts:  # the model of no contexts, its schema listing these (a subclass is cheap)
        base = _verify_reply(0, claims)
        listed: Any = type(base.__name__, (base,), {"__module__": __name__, "contexts": contexts})
        return listed  # type: ignore[no-any-return]
    sized: Any = Annotated[
        list[_verdict_for(0)],  # type: ignore[misc]
        Field(min_length=claims, max_length=claims),
    ]
    model: type[_ListedVerdicts] = create_model(
        f"VerdictList{claims}", __base__=_ListedVerdicts, verdicts=sized
    )
    model.contexts, model.claims = contexts, claims
    return model


# A sentence ends at . ! ? before a capital, a digit or a CJK character (not after an
# initial such as "John A." or a title such as "Dr."), or at a CJK full stop.
_SENTENCE_END = re.compile(
    r"(?<=[.!?])(?<!\b[A-Z]\.)(?<!\b(?:Dr|Mr|Ms|St|No)\.)(?<!\bMrs\.)"
    r"\s+(?=[A-Z0-9\"“\u3400-\u9fff])|(?<=[。！？])"
)


def sentences(claim: str) -> list[str]:
    """A claim cut at its sentence ends: one fact is never several sentences, but a small
    model copies a long text whole as a single "claim" (issue 12)."""
    return [s.strip() for s in _SENTENCE_END.split(claim) if s.strip()]


# A blank line ends a sentence too: a heading or a list item has no full stop.
_PARAGRAPH = re.compile(r"\n\s*\n")


def context_sentences(contexts: Sequence[str]) -> list[list[str]]:
    """Each context cut into its sentences (at sentence ends and blank lines), in order."""
    return [
        [s for paragraph in _PARAGRAPH.split(context) for s in sentences(paragraph)]
        for context in contexts
    ]


@functools.cache
def _needed_for(count: int) -> type[NeededSentences]:
    """NeededSentences whose JSON schema lists the sentence numbers that exist, so a
    grammar-constrained server cannot name another; validation still accepts any number
    >= 0, and select_sentences drops one past the end."""
    numbers: Any = Annotated[
        list[Annotated[int, Field(ge=0)]],
        WithJsonSchema({"type": "array", "items": {"enum": list(range(count))}}),
    ]
    model: type[NeededSentences] = create_model(
        f"NeededSentences{count}", __base__=NeededSentences, needed=(numbers, ...)
    )
    return model


def _repeats_example(reply: BaseModel, copied: frozenset[str]) -> bool:
    """Whether a reason of the reply (its own, or an item's) is one of `copied`."""
    for name, value in reply:
        if name == "reason" and isinstance(value, str) and reason_key(value) in copied:
            return True
        if isinstance(value, list):
            for item in value:
                reason = getattr(item, "reason", None)
                if isinstance(reason, str) and reason_key(reason) in copied:
                    return True
    return False


async def _chat_own_reasons(
    session: Judge,
    prompt: Prompt,
    values: dict[str, Any],
    output: type[M],
    *,
    label: str,
    sample: str | None,
    ledger: UsageLedger | None,
) -> M:
    """One call of prompt; a reply that repeats a reason of the prompt's example word for
    word is asked for once more with the examples left out, under `{label}_no_examples`.

    A small model copies the example's reason ("Neither context mentions a garden ...")
    for a claim about a railway (issue 12): its verdicts then follow the example, not the
    data. Re-asked with the examples still in view, it copied them again; without them
    there is nothing to copy, and the schema (enforced by the server, or in the prompt)
    still says what to write.
    """
    (reply,) = await session.chat(
        prompt.render(**values),
        output,
        prompt=prompt.ref,
        label=label,
        sample=sample,
        ledger=ledger,
    )
    if not prompt.example_reasons or not _repeats_example(reply, prompt.example_reasons):
        return reply
    bare = prompt.without_examples
    (reply,) = await session.chat(
        bare.render(**values),
        output,
        prompt=bare.ref,
        label=f"{label}_no_examples",
        sample=sample,
        ledger=ledger,
    )
    return reply


def _given(prompt: Prompt | None, name: str) -> Prompt:
    """The prompt given (a run's, read at its start), else the built-in one as it is now."""
    return load_prompt(name) if prompt is None else prompt


async def extract_claims(
    session: Judge,
    *,
    question: str,
    text: str,
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> list[str]:
    """Split one text (the answer, or the ground truth) into atomic, self-contained claims.

    One call per text: splitting two texts in one call let a small model swap their claims
    or drop one text's (issue 12).
    """
    prompt = _given(prompt, "claims")
    (reply,) = await session.chat(
        prompt.render(question=question, text=text),
        _ClaimList,
        prompt=prompt.ref,
        label="claims",
        sample=sample,
        ledger=ledger,
    )
    claims: list[str] = reply.claims
    return [s for c in claims for s in sentences(c)]


async def verify_claims(
    session: Judge,
    *,
    claims: Sequence[str],
    contexts: Sequence[str],
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> list[Verdict]:
    """Judge every claim against all contexts in one call; one verdict per claim, in order."""
    if not claims:
        return []
    reply = await _chat_own_reasons(
        session,
        _given(prompt, "verify"),
        {"claims": list(claims), "contexts": list(contexts)},
        _verify_reply(len(contexts), len(claims)),
        label="verify",
        sample=sample,
        ledger=ledger,
    )
    verdicts: list[Verdict] = reply.verdicts
    # A context number past the end is treated as "no context given", not trusted.
    return [
        v
        if v.context is None or v.context < len(contexts)
        else v.model_copy(update={"context": None})
        for v in verdicts
    ]


class _TurnVerdictList(BaseModel):
    verdicts: list[TurnVerdict]

    @model_validator(mode="after")
    def _in_order(self) -> _TurnVerdictList:
        _numbered(self.verdicts, "claim", len(self.verdicts))
        return self


def _numbers(count: int, description: str) -> Any:
    """A field naming one of `count` numbers or none (listed in the JSON schema, so a
    grammar-constrained server cannot name another; validated as any number >= 0)."""
    return Annotated[
        int | None,
        Field(ge=0, description=description),
        WithJsonSchema({"enum": [*range(count), None], "description": description}),
    ]


@functools.lru_cache(maxsize=1024)
def _verify_turn_reply(contexts: int, said: int, claims: int) -> type[_TurnVerdictList]:
    """The turn verify call's reply: `claims` verdicts, each naming one of `contexts`
    contexts, one of `said` conversation pieces, or neither. Kept for the sizes seen last:
    the conversation block is bounded (`judge.metrics.turns.CONVERSATION_BUDGET`), so a
    long chat's turns repeat a few sizes."""
    item: Any = create_model(
        "TurnVerdict",
        __base__=TurnVerdict,
        context=(_numbers(contexts, "supporting context number"), None),
        said=(_numbers(said, "supporting conversation piece"), None),
    )
    sized: Any = Annotated[list[item], Field(min_length=claims, max_length=claims)]
    model: type[_TurnVerdictList] = create_model(
        f"TurnVerdictList{claims}", __base__=_TurnVerdictList, verdicts=sized
    )
    return model


async def verify_turn_claims(
    session: Judge,
    *,
    claims: Sequence[str],
    contexts: Sequence[str],
    conversation: Sequence[str],
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> list[Verdict]:
    """Judge every claim of a turn against its contexts and the conversation before it in
    one call (the `verify_turn` prompt, each in its own block); one verdict per claim, in
    order, its `context` numbering the contexts first, then the conversation's pieces (a
    context named first: the turn's own retrieval is the evidence a reader checks)."""
    if not claims:
        return []
    reply = await _chat_own_reasons(
        session,
        _given(prompt, "verify_turn"),
        {"claims": list(claims), "contexts": list(contexts), "conversation": list(conversation)},
        _verify_turn_reply(len(contexts), len(conversation), len(claims)),
        label="verify_turn",
        sample=sample,
        ledger=ledger,
    )
    verdicts: list[TurnVerdict] = reply.verdicts
    found: list[Verdict] = []
    for v in verdicts:
        # A number past the end of its list is treated as "none given", not trusted.
        if v.context is not None and v.context < len(contexts):
            evidence: int | None = v.context
        elif v.said is not None and v.said < len(conversation):
            evidence = len(contexts) + v.said
        else:
            evidence = None
        found.append(Verdict(claim=v.claim, reason=v.reason, verdict=v.verdict, context=evidence))
    return found


async def reverse_questions(
    session: Judge,
    *,
    answer: str,
    n: int = 3,
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> ReverseQuestions:
    """Generate n questions the answer would answer, and a noncommittal flag, in one call."""
    prompt = _given(prompt, "reverse_questions")
    model = _sized(ReverseQuestions, "questions", str, n)
    (reply,) = await session.chat(
        prompt.render(answer=answer, n=n),
        model,
        prompt=prompt.ref,
        label="reverse_questions",
        sample=sample,
        ledger=ledger,
    )
    return ReverseQuestions(questions=reply.questions, noncommittal=reply.noncommittal)  # type: ignore[attr-defined]


async def grade_contexts(
    session: Judge,
    *,
    question: str,
    contexts: Sequence[str],
    reference: str | None = None,
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> list[ContextGrade]:
    """Grade every retrieved context 0-3 against the question (and reference) in one call."""
    if not contexts:
        return []
    reply = await _chat_own_reasons(
        session,
        _given(prompt, "context_relevance"),
        {"question": question, "contexts": list(contexts), "reference": reference},
        _sized(_GradeList, "contexts", ContextGrade, len(contexts)),
        label="context_relevance",
        sample=sample,
        ledger=ledger,
    )
    grades: list[ContextGrade] = reply.contexts  # type: ignore[attr-defined]
    return grades


async def select_sentences(
    session: Judge,
    *,
    question: str,
    sentences: Sequence[str],
    reference: str | None = None,
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> NeededSentences:
    """Pick the numbered sentences (of all contexts, numbered from 0) that the question
    needs, in one call; numbers past the end are dropped, repeats kept once, in order."""
    if not sentences:
        return NeededSentences(reason="", needed=[])
    reply = await _chat_own_reasons(
        session,
        _given(prompt, "context_sentences"),
        {
            "question": question,
            "sentences": {str(i): text for i, text in enumerate(sentences)},
            "reference": reference,
        },
        _needed_for(len(sentences)),
        label="context_sentences",
        sample=sample,
        ledger=ledger,
    )
    needed = sorted({n for n in reply.needed if n < len(sentences)})
    return NeededSentences(reason=reply.reason, needed=needed)


async def check_citations(
    session: Judge,
    *,
    checks: Sequence[tuple[str, int]],
    contexts: Sequence[str],
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> list[CitationCheck]:
    """Judge every (statement, cited context number) pair in one call, in order."""
    if not checks:
        return []
    items = [{"check": i, "statement": s, "context": c} for i, (s, c) in enumerate(checks)]
    reply = await _chat_own_reasons(
        session,
        _given(prompt, "citations"),
        {"checks": items, "contexts": list(contexts)},
        _sized(_CheckList, "checks", CitationCheck, len(checks)),
        label="citations",
        sample=sample,
        ledger=ledger,
    )
    result: list[CitationCheck] = reply.checks  # type: ignore[attr-defined]
    return result


async def check_retention(
    session: Judge,
    *,
    earlier: Sequence[str],
    answer: str,
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> list[RetentionVerdict]:
    """Judge what the answer does with each of the user's earlier messages, in one call."""
    if not earlier:
        return []
    reply = await _chat_own_reasons(
        session,
        _given(prompt, "retention"),
        {"earlier": list(earlier), "answer": answer},
        _sized(_RetentionList, "verdicts", RetentionVerdict, len(earlier)),
        label="retention",
        sample=sample,
        ledger=ledger,
    )
    verdicts: list[RetentionVerdict] = reply.verdicts  # type: ignore[attr-defined]
    return verdicts


async def check_query_rewrite(
    session: Judge,
    *,
    conversation: Sequence[str],
    message: str,
    query: str,
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> QueryRewriteCheck:
    """Judge the retriever's query against the user's message and the conversation before
    it (`conversation`: "role: text" lines), in one call."""
    return await _chat_own_reasons(
        session,
        _given(prompt, "query_rewrite"),
        {"conversation": list(conversation), "message": message, "query": query},
        QueryRewriteCheck,
        label="query_rewrite",
        sample=sample,
        ledger=ledger,
    )


async def check_goal(
    session: Judge,
    *,
    conversation: Sequence[str],
    outcome: str,
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> GoalCheck:
    """Judge whether the conversation ("role: text" lines) reached `outcome`, in one call."""
    return await _chat_own_reasons(
        session,
        _given(prompt, "goal"),
        {"conversation": list(conversation), "outcome": outcome},
        GoalCheck,
        label="goal",
        sample=sample,
        ledger=ledger,
    )


async def check_trajectory(
    session: Judge,
    *,
    request: Sequence[str],
    outcome: str,
    expected: Sequence[Any],
    called: Sequence[Any],
    answer: str,
    sample: str | None = None,
    ledger: UsageLedger | None = None,
    prompt: Prompt | None = None,
) -> TrajectoryCheck:
    """Judge whether the calls made (JSON values) serve the user's `request` ("role: text"
    lines) as the expected calls would, in one call."""
    return await _chat_own_reasons(
        session,
        _given(prompt, "trajectory"),
        {
            "request": list(request),
            "outcome": outcome,
            "expected": list(expected),
            "called": list(called),
            "answer": answer,
        },
        TrajectoryCheck,
        label="trajectory",
        sample=sample,
        ledger=ledger,
    )
