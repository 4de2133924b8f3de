"""`judge experiment --dry-run`: the judging of an experiment estimated before the app runs,
the app never called.

What the app will answer is not known before it runs, so it is assumed: every question
(every turn of a conversation) is judged as if the app had answered with a stand-in
answer of `Assumed.answer_chars` characters (sentences of about 100 characters, each a
claim to the stand-in judge) and `Assumed.contexts` stand-in contexts of
`Assumed.context_chars` characters each, their own text for each question (identical
texts would be counted once, as a run sends an identical request once). What comes from
the test set is its own: the questions, ground truths, relevance labels, expected tools,
and each conversation's user messages (the history of a later turn holds the stand-in
answers before it). Those rows are then estimated by `judge.run.dry_run.adry_run`, the
code of `judge eval --dry-run`: requests, prompt tokens and cost per metric, and what each
metric would leave NaN for want of a test-set field (`no_ground_truth`, ...).

So the figures are estimates twice over: those of any dry run (`judge.run.estimate`), and
the assumed sizes. What depends on the app's answers is not found: an empty answer, no
contexts, an answer with more claims. The app is loaded (its module imported, to check it
can be called and takes a conversation when the test set holds conversations) but never
called. To estimate from the app's real outputs, run the experiment on a few questions
and `judge eval --dry-run OUT/app_outputs.jsonl`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from judge.aio import sync_twin
from judge.errors import JudgeError
from judge.experiments.app import AppError, as_app, load_target
from judge.experiments.calls import ERROR, LATENCY
from judge.experiments.chats import Chat
from judge.experiments.experiment import TestSet, load_testset
from judge.llm.config import LLM, Embeddings
from judge.metrics.resolve import MetricLike
from judge.run.dry_report import DryRun
from judge.run.dry_run import adry_run
from judge.run.inputs import Records
from judge.run.shard import Shard

# A stand-in sentence's length: about a written sentence's.
SENTENCE_CHARS = 100
# The name a stand-in call takes: no expected tool has it, so calls differ from them.
STAND_IN_TOOL = "stand_in_tool"


@dataclasses.dataclass(frozen=True)
class Assumed:
    """The app's reply a dry run assumes for every question.

    Attributes:
        answer_chars: the answer's length in characters.
        contexts: the contexts retrieved per question.
        context_chars: each context's length in characters.
    """

    answer_chars: int = 300
    contexts: int = 4
    context_chars: int = 800

    def check(self) -> None:
        """Refuse sizes no reply has (the keyword arguments' words)."""
        if self.answer_chars < 1:
            raise JudgeError(f"answer_chars={self.answer_chars}: give at least 1 character")
        if self.contexts < 0:
            raise JudgeError(f"contexts={self.contexts}: give 0 or more contexts")
        if self.context_chars < 1:
            raise JudgeError(f"context_chars={self.context_chars}: give at least 1 character")

    def to_dict(self) -> dict[str, int]:
        """The sizes as JSON values."""
        return dataclasses.asdict(self)

    def words(self) -> str:
        """The sizes in a sentence."""
        return (
            f"an answer of {self.answer_chars:,} characters and {self.contexts} contexts of "
            f"{self.context_chars:,} characters each"
        )


def stand_in_text(label: str, chars: int) -> str:
    """A text of about `chars` characters (at least one sentence), in sentences of about
    `SENTENCE_CHARS` naming `label` and their number, so that no two rows' texts are
    alike; what is left too short for a sentence of its own lengthens the last one."""
    sentences: list[str] = []
    size = 0  # the characters so far, with a space after each sentence
    while not sentences or size - 1 < chars:
        head = f"Stand-in {label}, sentence {len(sentences) + 1}"
        left = chars - size  # for the next sentence, after its space
        if sentences and left < len(head) + 1:
            sentences[-1] = sentences[-1][:-1] + _filler(left + 1) + "."
            break
        sentence = head + _filler(min(SENTENCE_CHARS, left) - len(head) - 1) + "."
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)


def _filler(chars: int) -> str:
    """`chars` characters of words (none for 0 or less)."""
    return (" text" * (max(0, chars) // 5 + 1))[: max(0, chars)]


def stand_in_reply(key: str, assumed: Assumed, *, ranked: bool, tools: bool) -> dict[str, Any]:
    """The app's assumed reply to the question (or turn) `key`: its own answer and
    contexts; stand-in retrieved ids when the test set has relevance labels (`ranked`); a
    stand-in tool call when the question expects tools (`tools`: a call that differs from
    the expected ones, so `trajectory_accuracy` is counted as judged, its upper bound)."""
    reply: dict[str, Any] = {
        "answer": stand_in_text(f"answer to {key}", assumed.answer_chars),
        "contexts": [
            stand_in_text(f"context {n + 1} of {key}", assumed.context_chars)
            for n in range(assumed.contexts)
        ],
    }
    if ranked:
        reply["retrieved_ids"] = [f"stand-in-{key}-{n + 1}" for n in range(assumed.contexts)]
    if tools:
        reply["tools_called"] = [{"name": STAND_IN_TOOL, "arguments": {}}]
    return reply


def _expects_tools(columns: Mapping[str, Any]) -> bool:
    return columns.get("expected_tools") is not None


class StandInRecords(Records):
    """The rows `judge experiment` would judge, each made when read: the test set's
    question (or conversation) with the assumed reply of the app."""

    def __init__(self, testset: TestSet, assumed: Assumed):
        self.testset = testset
        self.assumed = assumed
        self.source = testset.source
        self._ranked = testset.qrels_source is not None

    def _count(self) -> int:
        chats = self.testset.chats
        return len(chats) if chats is not None else len(self.testset.questions)

    def scan(self) -> tuple[list[str], int]:
        """The records' keys and their number (conversations: one record each)."""
        names: dict[str, None] = {}
        for _, record in self.read():
            names.update(dict.fromkeys(record))
        return list(names), self._count()

    def read(self, shard: Shard | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each record, made from the test set as it is read."""
        start, step = (shard.index - 1, shard.count) if shard else (0, 1)
        chats = self.testset.chats
        for number in range(start, self._count(), step):
            if chats is not None:
                yield number, self._conversation(chats[number])
            else:
                question = self.testset.questions[number]
                reply = stand_in_reply(
                    question.id,
                    self.assumed,
                    ranked=self._ranked,
                    tools=_expects_tools(question.columns),
                )
                yield number, {**question.columns, **reply}

    def _conversation(self, chat: Chat) -> dict[str, Any]:
        """The conversation's output line, each turn answered with its assumed reply."""
        rows = []
        for position in chat.slots:
            reply = stand_in_reply(
                chat.turn_id(position),
                self.assumed,
                ranked=self._ranked,
                tools=_expects_tools(chat.messages[position - 1]),
            )
            rows.append({**reply, LATENCY: 0.0, ERROR: None})
        return chat.played(rows)


@dataclasses.dataclass
class ExperimentDryRun(DryRun):
    """A `DryRun` of an experiment: its rows are the test set's questions (or turns)
    with the assumed replies of an app that was not called.

    Attributes:
        app: the app, as the user named it (loaded, never called).
        assumed: the reply assumed for every question.
        conversations: the test set's conversations (None: it holds questions).
    """

    app: str = ""
    assumed: Assumed = dataclasses.field(default_factory=Assumed)
    conversations: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The dry run as JSON values, with the app (`called`: false) and the sizes."""
        out = super().to_dict()
        out["app"] = {
            "target": self.app,
            "called": False,
            "assumed_reply": self.assumed.to_dict(),
            "conversations": self.conversations,
        }
        return out

    def table(self) -> str:
        """The dry run's table, after a line saying what was assumed."""
        asked = f"{self.rows:,} questions"
        if self.conversations is not None:
            asked = f"{self.conversations:,} conversations, {self.rows:,} turns"
        head = (
            f"experiment dry run: app {self.app} NOT called ({asked}); each answered, as "
            f"assumed, with {self.assumed.words()}"
        )
        return head + "\n" + super().table()


def _notes(testset: TestSet, assumed: Assumed, metrics: Sequence[str]) -> list[str]:
    notes = [
        "the app was not called: its answers and contexts are assumed ("
        + assumed.words()
        + "); the questions, ground truths, relevance labels and conversations are the test "
        "set's. A NaN for want of an answer or contexts (empty_answer, no_contexts) cannot be "
        "known before the app runs",
        "to estimate from the app's real outputs: run the experiment on a few questions, then "
        "judge eval --dry-run on its app_outputs.jsonl",
    ]
    if "trajectory_accuracy" in metrics:
        notes.append(
            "trajectory_accuracy is counted as judged for every question with expected_tools "
            "(an upper bound: calls made as expected need no request)"
        )
    return notes


async def adry_run_experiment(
    app: Any,
    data: Any,
    *,
    metrics: Sequence[MetricLike] | str | None = None,
    llm: LLM | None = None,
    embeddings: Embeddings | None = None,
    column_map: Mapping[str, str] | None = None,
    qrels: str | os.PathLike[str] | None = None,
    assumed: Assumed | None = None,
    max_error_rate: float = 0.05,
) -> ExperimentDryRun:
    """What `judge.experiment` would judge, estimated with the app never called and no
    request made: the test set's questions (or conversations' turns) judged by the dry
    run's stand-in judge as if the app had answered each with the `assumed` reply.

    Args:
        app: the app, as for `judge.experiment` (a target string is imported, to check
            that it names something callable; the app is never called).
        data: the test set, as for `judge.experiment`.
        metrics, llm, embeddings: as for `judge.dry_run` (the models are never called).
        column_map, qrels: as for `judge.experiment`.
        assumed: the reply assumed for every question (default `Assumed()`: an answer
            of 300 characters and 4 contexts of 800).
        max_error_rate: as for `judge.dry_run`.

    Returns:
        An `ExperimentDryRun`: the `DryRun` of those rows, with the app and the sizes.

    Raises:
        judge.errors.InputFormatError: the test set cannot be read; an `AppError`: the
            app cannot be loaded, or takes no conversation for a test set of them.
    """
    assumed = assumed or Assumed()
    assumed.check()
    loaded = as_app(load_target(app), app) if isinstance(app, str) else as_app(app)
    testset = load_testset(data, column_map=column_map, qrels=qrels)
    if testset.chats is not None and loaded.chat is None:
        raise AppError(
            f"{testset.source} holds conversations, but app {loaded.target} takes no "
            "conversation: give it a parameter named history (app(question, history)) or "
            "take the conversation as its one parameter named messages"
        )
    result = await adry_run(
        StandInRecords(testset, assumed),
        metrics=metrics,
        llm=llm,
        embeddings=embeddings,
        max_error_rate=max_error_rate,
    )
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(DryRun)}
    fields["notes"] = [
        *_notes(testset, assumed, [m.name for m in result.metrics]),
        *result.notes,
    ]
    return ExperimentDryRun(
        **fields,
        app=loaded.target,
        assumed=assumed,
        conversations=len(testset.chats) if testset.chats is not None else None,
    )


dry_run_experiment = sync_twin(adry_run_experiment)
