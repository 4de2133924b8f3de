"""`Judge`: what the metrics ask of a judge, as a protocol.

`judge.llm.session.LLMSession` implements it (the real judge: the cache, retries,
structured output), and so does the dry run's stand-in (`judge.run.stand_in`), which
sends nothing; the judges of `judge.metrics` take a `Judge`, so neither needs the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
from pydantic import BaseModel

from judge.llm.config import PromptRef
from judge.llm.usage import UsageLedger

M = TypeVar("M", bound=BaseModel)


class Judge(Protocol):
    """Chat replies validated as a pydantic model, and embeddings of texts."""

    async def chat(
        self,
        messages: Sequence[dict[str, Any]],
        output: type[M],
        *,
        n: int = 1,
        prompt: PromptRef | None = None,
        label: str = "chat",
        sample: str | None = None,
        ledger: UsageLedger | None = None,
    ) -> list[M]:
        """`n` replies to the messages, each validated as `output`.

        Args:
            messages: the chat messages, as the model sees them.
            output: the pydantic model every reply must validate against.
            n: number of replies wanted.
            prompt: name and version of the prompt the messages came from.
            label: the judge's name, for usage accounting and error messages.
            sample: the sample's id, for error messages.
            ledger: a second usage ledger to count in, besides the run's.
        """
        ...

    async def embed(
        self, texts: Sequence[str], *, label: str = "embeddings", ledger: UsageLedger | None = None
    ) -> list[list[float]]:
        """Embeddings of texts, a list of floats per text."""
        ...

    async def embed_array(
        self, texts: Sequence[str], *, label: str = "embeddings", ledger: UsageLedger | None = None
    ) -> np.ndarray:
        """Embeddings of texts as one float64 matrix, a row per text."""
        ...
