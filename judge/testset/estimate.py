"""What a build will cost, before any call (`--dry-run`), and the price check of `--budget`.

Requests: one generation, one critic and one grading call per question (the accepted
count; rejected drafts are replaced in later rounds, so the actual number is higher by
the rejection rate). Prompt tokens are counted on the prompts as they will be rendered
for the seeds the build would draw; completion tokens are typical reply sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judge.errors import JudgeError
from judge.llm.pricing import estimate_tokens, token_prices
from judge.metrics.prompts import load_prompt
from judge.testset.corpus import Corpus
from judge.testset.generate import prompt_name
from judge.testset.items import QuestionType
from judge.testset.sampling import SeedPool

# Typical reply sizes in tokens: a question with answer and quotes; four booleans and a
# reason; a grade per candidate.
_GENERATION_REPLY = 150
_CRITIC_REPLY = 60
_GRADE_REPLY_PER_CHUNK = 12
_QUESTION_AND_ANSWER = 80


def require_price(model: str, budget: float) -> None:
    """Refuse a budget that cannot be kept: not positive, or a model without a known price."""
    if not budget > 0:
        raise JudgeError(f"--budget {budget}: give a positive amount in USD")
    if token_prices(model) is None:
        raise JudgeError(
            f"--budget: the price of {model} is unknown (not in litellm's price map), so the "
            "spending cannot be counted; drop --budget or use a priced model"
        )


def _tokens(messages: list[dict[str, str]]) -> int:
    return sum(estimate_tokens(m["content"]) for m in messages)


def estimate(
    corpus: Corpus, requested: Mapping[QuestionType, int], *, seed: int, model: str, pool_depth: int
) -> dict[str, Any]:
    """Requests, tokens and cost a build of `requested` questions would take, at best."""
    seeds = SeedPool(corpus.seeds, seed)
    mean_chunk = sum(estimate_tokens(c.text) for c in corpus.chunks) / len(corpus.chunks)
    critic = _tokens(
        load_prompt("testset_critic").render(type="", question="", reference="", chunks=[])
    )
    pool = _tokens(load_prompt("testset_pool").render(question="", reference="", candidates=[]))
    prompt_tokens = completion_tokens = requests = 0
    for qtype, count in requested.items():
        template = load_prompt(prompt_name(qtype))
        for chunk in seeds.take(qtype, count):
            hops = 2 if qtype == "multi_hop" else 1
            values: dict[str, Any] = (
                {"chunks": [chunk.text] * 2} if qtype == "multi_hop" else {"chunk": chunk.text}
            )
            prompt_tokens += _tokens(template.render(**values))
            prompt_tokens += critic + hops * estimate_tokens(chunk.text) + _QUESTION_AND_ANSWER
            prompt_tokens += pool + round(pool_depth * mean_chunk) + _QUESTION_AND_ANSWER
            completion_tokens += (
                _GENERATION_REPLY + _CRITIC_REPLY + pool_depth * _GRADE_REPLY_PER_CHUNK
            )
            requests += 3
    prices = token_prices(model)
    cost = None if prices is None else prompt_tokens * prices[0] + completion_tokens * prices[1]
    return {
        "requests": requests,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost": cost,
        "note": "at best: each rejected draft adds 1-3 requests in a later round",
    }
