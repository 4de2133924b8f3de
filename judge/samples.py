"""`Sample`: the inputs of one RAG interaction, the type every entry point builds rows into."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.errors import InputFormatError


@dataclass(frozen=True)
class Sample:
    """The inputs of one RAG interaction (contexts in retrieval order)."""

    question: str
    answer: str | None = None
    contexts: tuple[str, ...] = ()
    ground_truth: str | None = None
    id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other columns, for custom metrics

    def value(self, name: str) -> Any:
        """A field by name (question, answer, ...) or an extra column; None if absent."""
        if name in ("question", "answer", "contexts", "ground_truth", "id"):
            value = getattr(self, name)
            return list(value) if name == "contexts" else value
        return self.extra.get(name)

    @classmethod
    def create(
        cls,
        question: Any,
        answer: Any = None,
        contexts: Any = (),
        ground_truth: Any = None,
        id: Any = None,
        extra: dict[str, Any] | None = None,
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
        )
