"""`Sample`: the inputs of one RAG interaction, the type every entry point builds rows into;
`Message`: one message of the conversation before a sample that is a chat's turn."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.errors import InputFormatError

ROLES = ("user", "assistant", "system", "tool")


@dataclass(frozen=True)
class Message:
    """One message of a conversation, as the turns after it see it.

    Args:
        role: user, assistant, system or tool.
        content: its text.
        turn: its 1-based position in the conversation.
        contexts: what the assistant's retriever gave it for this message (assistant only).
    """

    role: str
    content: str
    turn: int
    contexts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The message as a turn record's `history` holds it (contexts only when given)."""
        data: dict[str, Any] = {"role": self.role, "content": self.content, "turn": self.turn}
        if self.contexts:
            data["contexts"] = list(self.contexts)
        return data


class Thread:
    """The messages of one conversation, made once and shared by the histories of its turns
    (`History`), with the digests of its prefixes, each computed once per conversation: a
    long chat's turns then cost their new messages, not their whole history each."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._chains: dict[Hashable, list[str]] = {}

    def history(self, length: int) -> History:
        """The history of the first `length` messages."""
        return History(self.messages[:length], self)

    def chain(
        self, name: Hashable, root: str, link: Callable[[str, Message], str], length: int
    ) -> list[str]:
        """The chain `name` to `length` messages (`prefix_chain`), grown as needed and kept
        (it may run on past `length`)."""
        found = self._chains.setdefault(name, [root])
        while len(found) <= length:
            found.append(link(found[-1], self.messages[len(found) - 1]))
        return found


class History(tuple[Message, ...]):
    """The messages before a turn (a tuple of them); one a conversation reader made shares
    its conversation's messages and prefix digests (`thread`)."""

    thread: Thread | None

    def __new__(cls, messages: Iterable[Message] = (), thread: Thread | None = None) -> History:
        """The messages; `thread`: the conversation they begin, when made from one."""
        made = super().__new__(cls, messages)
        made.thread = thread
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled and copied as its messages alone: the thread is the whole conversation.
        return (History, (tuple(self),))


def prefix_chain(
    history: Sequence[Message], name: Hashable, root: str, link: Callable[[str, Message], str]
) -> list[str]:
    """[root, link(root, history[0]), link(that, history[1]), ...]: a digest of each prefix
    of the history, chained. A `History` of a conversation's thread takes the thread's
    chain `name` (computed once per conversation, and possibly longer than the history:
    index it); any other history computes its own. Both give the same digests: `name`
    must name one `root` and `link`."""
    if isinstance(history, History) and history.thread is not None:
        return history.thread.chain(name, root, link, len(history))
    found = [root]
    for message in history:
        found.append(link(found[-1], message))
    return found


def said(message: Message) -> bool:
    """Whether an assistant message says something (one that only calls tools does not)."""
    return bool(message.content.strip())


def question_start(history: Sequence[Message]) -> int:
    """Where the question of the turn after `history` starts: just after the assistant
    last said something before the user's last message (the user's messages since then
    are the question, which the assistant may have answered already: a second answer to
    it, or the answer after a tool call made saying "Let me check.", answers it too)."""
    users = (i for i in range(len(history) - 1, -1, -1) if history[i].role == "user")
    last_user = next(users, len(history))  # no user message: after the assistant's last
    for index in range(min(last_user, len(history) - 1), -1, -1):
        message = history[index]
        if message.role == "assistant" and said(message):
            return index + 1
    return 0


def last_messages(
    history: Sequence[Message], end: int, count: int, keep: Callable[[Message], bool]
) -> list[Message]:
    """The last `count` messages of `history[:end]` that `keep` keeps, in order: found from
    the end, so a long chat costs `count`, not its length."""
    found: list[Message] = []
    index = end - 1
    while index >= 0 and len(found) < count:
        if keep(history[index]):
            found.append(history[index])
        index -= 1
    return found[::-1]


def _shown(message: Message) -> bool:
    """Whether the judges reading a question see a message before it."""
    return message.role == "user" or (message.role == "assistant" and said(message))


def _prefix(history: Sequence[Message], length: int) -> tuple[Message, ...]:
    """The first `length` messages of a history, sharing its conversation's thread."""
    if isinstance(history, History) and history.thread is not None:
        return history.thread.history(length)
    return tuple(history[:length])


# The characters of conversation (about 150 tokens) that the judges reading a turn's question
# get before it, at most (`context_before`): about the last exchange of a chat. The last
# four messages whole made the claims and grading calls of a long chat's turns 1.53x a
# single-turn row's (three prompts of a turn carry them; bench/quality/conversation_cost.py).
QUESTION_CONTEXT_BUDGET = 600
_CUT = "..."


def context_before(
    history: Sequence[Message], messages: int, budget: int | None = QUESTION_CONTEXT_BUDGET
) -> list[str]:
    """The lines ("role: content") of the last `messages` user and assistant messages
    before the question of the turn after `history`, in order, the most recent kept first
    while their lines fit in `budget` characters (None: all of them). The most recent is
    given even when longer than the budget: its end, cut at a space where there is one
    and marked "...", as a follow-up usually refers to what was said last (an offer, the
    thing named last). An older message that does not fit ends the lines, so those given
    follow each other in the conversation.
    """
    shown = last_messages(history, question_start(history), messages, _shown)
    lines: list[str] = []
    left = budget
    for message in reversed(shown):
        line = f"{message.role}: {message.content}"
        if left is not None and len(line) > left:
            if not lines:
                room = left - len(f"{message.role}: {_CUT}")
                lines.append(f"{message.role}: {_CUT}{_end(message.content, room)}")
            break
        lines.append(line)
        if left is not None:
            left -= len(line)
    return lines[::-1]


def _end(text: str, size: int) -> str:
    """The end of `text` in at most `size` characters, from a word's start where a space
    falls in it (text without spaces, Chinese say, is cut between any two characters), and
    always from a character's start as a reader sees it (a grapheme cluster): a cut inside
    one left an accent without its letter, half a flag that paired the next halves into
    other flags, part of an emoji sequence, or the LF of a CRLF."""
    start = _grapheme_start(text, len(text) - max(size, 1))
    space = text.find(" ", start)
    while 0 <= space < len(text) - 1:
        if _grapheme_start(text, space + 1) == space + 1:  # not a space an accent is on
            return text[space + 1 :]
        space = text.find(" ", space + 1)
    return text[start:]


def _grapheme_start(text: str, at: int) -> int:
    """The first start of a grapheme cluster (Unicode's UAX #29) at or after `at`, or
    len(text): a cluster matched from just before `at` ends there (the pattern looks
    behind where it starts, at the regional indicators before it, so it matches to the
    first boundary after that place, as checked against whole-text segmentation)."""
    if at <= 0:
        return 0
    end: int = _graphemes().match(text, at - 1).end()
    return end


@functools.cache
def _graphemes() -> Any:
    """The pattern of one grapheme cluster (`regex`, which tiktoken needs for litellm),
    imported on the first cut: 70-100 ms that every other use of judge would pay."""
    import regex

    return regex.compile(r"\X")


@dataclass(frozen=True)
class Sample:
    """The inputs of one RAG interaction (contexts in retrieval order); for a turn of a
    conversation, the messages before it and its position (`turn` is None otherwise)."""

    question: str
    answer: str | None = None
    contexts: tuple[str, ...] = ()
    ground_truth: str | None = None
    id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other columns, for custom metrics
    history: tuple[Message, ...] = ()
    turn: int | None = None
    conversation_id: str | None = None

    @property
    def in_conversation(self) -> bool:
        """Whether the sample is an assistant turn of a conversation."""
        return self.turn is not None

    def question_in_context(
        self, messages: int = 4, budget: int | None = QUESTION_CONTEXT_BUDGET
    ) -> str:
        """The question as the judges read it: for a turn, the conversation just before the
        question (`context_before`), then the question whole; else the question alone.

        A follow-up ("and how much is it?") means nothing alone: the judges that read the
        question (claims, grades, sentences) get the exchange it follows. A bounded part,
        not all, so a long chat does not make every request long; the verdicts see every
        earlier user message and supported claim (`judge.metrics.turns`).

        Args:
            messages: how many user and assistant messages before the question, at most.
            budget: the characters those messages may take, at most (None: no bound).
        """
        if not self.in_conversation or messages <= 0:
            return self.question
        lines = context_before(self.history, messages, budget)
        if not lines:
            return self.question
        return "Conversation so far:\n" + "\n".join(lines) + f"\nQuestion now: {self.question}"

    def value(self, name: str) -> Any:
        """A field by name (question, answer, ...) or an extra column; None if absent."""
        if name in ("question", "answer", "contexts", "ground_truth", "id"):
            value = getattr(self, name)
            return list(value) if name == "contexts" else value
        return self.extra.get(name)

    def earlier_turn(self, index: int) -> Sample | None:
        """The turn of the assistant message `history[index]`, as its own row holds it;
        None when it answered no question (a greeting) or said nothing."""
        message = self.history[index]
        if message.role != "assistant" or not said(message):
            return None
        before = _prefix(self.history, index)
        start = question_start(before)
        asked = [m.content for m in before[start:] if m.role == "user"]
        if not asked:
            return None
        return Sample(
            "\n\n".join(asked),
            message.content,
            message.contexts if any(c.strip() for c in message.contexts) else (),
            id=f"{self.conversation_id}#{message.turn}",
            history=before,
            turn=message.turn,
            conversation_id=self.conversation_id,
        )

    @classmethod
    def create(
        cls,
        question: Any,
        answer: Any = None,
        contexts: Any = (),
        ground_truth: Any = None,
        id: Any = None,
        extra: dict[str, Any] | None = None,
        history: Sequence[Message] = (),
        turn: int | None = None,
        conversation_id: str | None = None,
    ) -> Sample:
        """Check the types of user input and build a sample; bad input is a clear error."""
        if not isinstance(question, str) or not question.strip():
            raise InputFormatError(f"question must be a non-empty string, got {question!r:.80}")
        for name, value in (("answer", answer), ("ground_truth", ground_truth)):
            if value is not None and not isinstance(value, str):
                raise InputFormatError(
                    f"{name} must be a string or None, got {type(value).__name__}"
                )
        if contexts is None:
            contexts = ()
        if (
            isinstance(contexts, str)
            or not isinstance(contexts, Sequence)
            or not all(isinstance(c, str) for c in contexts)
        ):
            raise InputFormatError("contexts must be a list of strings, in retrieval order")
        if not any(c.strip() for c in contexts):
            # Blank contexts only are no contexts, as a blank answer is no answer: nothing
            # to judge, not a score of 0. Blank ones among others keep their ranks.
            contexts = ()
        return cls(
            question,
            answer,
            tuple(contexts),
            ground_truth,
            None if id is None else str(id),
            dict(extra or {}),
            history if isinstance(history, History) else tuple(history),
            turn,
            conversation_id,
        )
