"""The dry run's stand-in judge: it sends nothing, but counts every request a run would send
and answers with replies shaped like a judge's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from judge.errors import ContextWindowError, JudgeError
from judge.json_values import canonical_json, sha256_hex
from judge.llm.config import LLM, Embeddings, PromptRef
from judge.llm.pricing import estimate_tokens
from judge.llm.session import check_window
from judge.llm.usage import UsageLedger
from judge.metrics.judges import sentences
from judge.run.estimate import Estimate

M = TypeVar("M", bound=BaseModel)


# What a stand-in reply writes as a reason: a typical judge's reason, about 20 tokens.
STAND_IN_REASON = (
    "The retrieved context states this directly, in nearly the same words, so the "
    "statement is supported by it."
)


NO_STAND_IN = "dry run: no stand-in reply for a custom judge's output"


_BLOCK = re.compile(r"<(\w+)>(.*?)</\1>", re.DOTALL)


_EMBEDDING_BATCH: int = Embeddings.batch_size  # the default of a run without embeddings


def _blocks(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The data blocks of a rendered built-in prompt's user message, decoded (values are
    JSON with `<`, `>` and `&` escaped, so a block's end tag is never inside its data)."""
    user = next((str(m.get("content", "")) for m in messages if m.get("role") == "user"), "")
    found: dict[str, Any] = {}
    for tag, text in _BLOCK.findall(user):
        try:
            found[tag] = json.loads(text)
        except json.JSONDecodeError:
            continue
    return found


def _stand_in(prompt: str, blocks: Mapping[str, Any], output: type[M]) -> M:
    """A reply shaped like a judge's to one of the built-in prompts (by name)."""
    reply: dict[str, Any]
    if prompt == "claims":
        reply = {"claims": sentences(str(blocks.get("text") or ""))}
    elif prompt == "verify":
        reply = {
            "verdicts": [
                {"claim": i, "reason": STAND_IN_REASON, "verdict": "supported", "context": 0}
                for i in range(len(blocks.get("claims") or []))
            ]
        }
    elif prompt == "verify_turn":
        # Each claim supported by the first context, else by the first piece said before.
        evidence = {"context": 0} if blocks.get("contexts") else {"said": 0}
        reply = {
            "verdicts": [
                {"claim": i, "reason": STAND_IN_REASON, "verdict": "supported", **evidence}
                for i in range(len(blocks.get("claims") or []))
            ]
        }
    elif prompt == "reverse_questions":
        count = output.model_json_schema()["properties"]["questions"].get("minItems", 3)
        # Questions of their own per answer, as a judge writes them (a run embeds each).
        about = " ".join(str(blocks.get("answer") or "").split()[:8])
        reply = {
            "questions": [f"Question {i + 1} answered by: {about}?" for i in range(count)],
            "noncommittal": False,
        }
    elif prompt == "context_relevance":
        reply = {
            "contexts": [
                {"context": i, "reason": STAND_IN_REASON, "grade": 2}
                for i in range(len(blocks.get("contexts") or []))
            ]
        }
    elif prompt == "context_sentences":
        reply = {"reason": STAND_IN_REASON, "needed": [0]}
    elif prompt == "citations":
        reply = {
            "checks": [
                {"check": i, "supported": True, "reason": STAND_IN_REASON}
                for i in range(len(blocks.get("checks") or []))
            ]
        }
    elif prompt == "retention":
        reply = {
            "verdicts": [
                {"statement": i, "reason": STAND_IN_REASON, "verdict": "kept"}
                for i in range(len(blocks.get("earlier") or []))
            ]
        }
    elif prompt == "goal":
        reply = {"reason": STAND_IN_REASON, "verdict": "achieved"}
    elif prompt == "query_rewrite":
        reply = {"reason": STAND_IN_REASON, "verdict": "faithful"}
    elif prompt == "trajectory":
        reply = {"reason": STAND_IN_REASON, "verdict": "sound"}
    else:
        raise JudgeError(NO_STAND_IN)
    try:
        return output.model_validate(reply)
    except ValidationError:
        raise JudgeError(NO_STAND_IN) from None


class StandInJudge:
    """A `judge.llm.judge.Judge` that sends nothing: it counts each request a run would
    send into `estimate` (tokens of the rendered messages, the context window checked as a
    run checks it) and answers with a stand-in reply (`_stand_in`); embeddings are counted
    in batches as a run batches them, and answered with equal vectors.

    Args:
        llm: the judge model (None: no context window to check, no price).
        embeddings: the embedding model, or None.
    """

    def __init__(self, llm: LLM | None, embeddings: Embeddings | None):
        self.llm = llm
        self.embeddings = embeddings
        self.estimate = Estimate()
        self.seen: set[str] = set()  # requests and texts counted in this run already
        self._tokens: dict[str, int] = {}

    def counting(self, estimate: Estimate, seen: set[str]) -> None:
        """Count from now on into `estimate`, `seen` holding what was counted before."""
        self.estimate, self.seen = estimate, seen

    def count(self, text: str) -> int:
        """`estimate_tokens` of a text, remembered: one row's prompts repeat in its passes."""
        found = self._tokens.get(text)
        if found is None:
            if len(self._tokens) > 4096:
                self._tokens.clear()
            found = self._tokens[text] = estimate_tokens(text)
        return found

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
        """Count the request a run would send (or refuse, over the context window) and
        answer with `n` stand-in replies."""
        if self.llm is not None:
            try:
                check_window(self.llm, list(messages), label)
            except ContextWindowError:
                self.estimate.refused += 1
                raise
        try:
            reply: M | None = _stand_in(prompt.name if prompt else "", _blocks(messages), output)
        except JudgeError:
            reply = None  # a custom judge's output: counted, then the sentinel raised
        # A run makes an identical request once: shared in flight, or a cache hit.
        ref = (prompt.name, prompt.version) if prompt else None
        key = sha256_hex(canonical_json([ref, output.__name__, n, list(messages)]))
        if key not in self.seen:
            self.seen.add(key)
            e = self.estimate
            e.chat_requests += 1
            e.by_judge[label] = e.by_judge.get(label, 0) + 1
            e.prompt_tokens += sum(self.count(str(m.get("content", ""))) for m in messages)
            # A custom reply's size is unknown: a reason's worth of tokens is assumed.
            shown = reply.model_dump_json() if reply is not None else STAND_IN_REASON
            e.completion_tokens += n * self.count(shown)
        if reply is None:
            raise JudgeError(NO_STAND_IN)
        return [reply] * n

    async def embed(
        self, texts: Sequence[str], *, label: str = "embeddings", ledger: UsageLedger | None = None
    ) -> list[list[float]]:
        """Count the embedding requests a run would send for texts; equal vectors back."""
        return self._embedded(texts).tolist()  # type: ignore[no-any-return]

    async def embed_array(
        self, texts: Sequence[str], *, label: str = "embeddings", ledger: UsageLedger | None = None
    ) -> np.ndarray:
        """`embed` as a matrix, a row per text."""
        return self._embedded(texts)

    def _embedded(self, texts: Sequence[str]) -> np.ndarray:
        # A run embeds a text once: a repeat is shared in flight or a cache hit.
        distinct = [t for t in dict.fromkeys(texts) if f"embed:{t}" not in self.seen]
        self.seen.update(f"embed:{t}" for t in distinct)
        batch = self.embeddings.batch_size if self.embeddings else _EMBEDDING_BATCH
        self.estimate.embedding_requests += math.ceil(len(distinct) / batch)
        self.estimate.embedding_tokens += sum(self.count(t) for t in distinct)
        return np.ones((len(texts), 2))
