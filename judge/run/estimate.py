"""The estimate of a dry run: the requests, tokens and price some judging would take, and
what the figures assume.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from judge.llm.config import LLM, Embeddings
from judge.llm.pricing import token_prices

COMPLETION_ASSUMPTION = (
    "completion tokens are the size of stand-in replies: one claim per sentence of the "
    "text, one verdict, grade or check per item with a reason of about 20 tokens (a "
    "custom metric's reply: one such reason)"
)


@dataclass
class Estimate:
    """The requests and tokens of some judging, and their price when known.

    Attributes:
        chat_requests: chat requests that would be sent.
        embedding_requests: embedding requests (batches of texts) that would be sent.
        prompt_tokens: tokens of the rendered chat prompts (an estimate).
        completion_tokens: tokens of the replies, assumed (`COMPLETION_ASSUMPTION`).
        embedding_tokens: tokens of the texts embedded.
        refused: chat requests over the judge's context window: never sent, the metric
            of that row a judge error.
        by_judge: chat requests per judge (claims, verify, context_relevance, ...).
        cost: USD at the models' list prices; None when a price is unknown (or no model
            is named), never a false 0.
    """

    chat_requests: int = 0
    embedding_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embedding_tokens: int = 0
    refused: int = 0
    by_judge: dict[str, int] = field(default_factory=dict)
    cost: float | None = None

    def priced(self, llm: LLM | None, embeddings: Embeddings | None) -> None:
        """Set `cost` from the models' prices (None when a price that counts is unknown)."""
        cost = 0.0
        if self.chat_requests:
            chat = token_prices(llm.model) if llm is not None else None
            if chat is None:
                self.cost = None
                return
            cost += self.prompt_tokens * chat[0] + self.completion_tokens * chat[1]
        if self.embedding_requests:
            embed = token_prices(embeddings.model) if embeddings is not None else None
            if embed is None:
                self.cost = None
                return
            cost += self.embedding_tokens * embed[0]
        self.cost = cost

    def to_dict(self) -> dict[str, Any]:
        """The estimate as JSON values."""
        return {
            "chat_requests": self.chat_requests,
            "embedding_requests": self.embedding_requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "embedding_tokens": self.embedding_tokens,
            "refused": self.refused,
            "by_judge": dict(sorted(self.by_judge.items())),
            "cost": self.cost,
        }


ASSUMPTIONS = [
    "counts are estimates, made with no request",
    "tokens at about 4 characters each (1 per CJK character)",
    COMPLETION_ASSUMPTION,
    "a real judge may re-ask or find other claims, and a noncommittal answer needs no "
    "embedding request",
    "a judgment already in the cache is free; identical requests (and texts to embed) are "
    "counted once, as a run makes them once",
]


def add(into: Estimate, more: Estimate) -> Estimate:
    """Add the counts of `more` into `into` (its cost is left to `priced`); returns `into`."""
    into.chat_requests += more.chat_requests
    into.embedding_requests += more.embedding_requests
    into.prompt_tokens += more.prompt_tokens
    into.completion_tokens += more.completion_tokens
    into.embedding_tokens += more.embedding_tokens
    into.refused += more.refused
    for label, count in more.by_judge.items():
        into.by_judge[label] = into.by_judge.get(label, 0) + count
    return into
