"""Scoring recorded fixture samples against a fake (or real) server, for tests and scripts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The server identity recorded fixtures are keyed under (see judge.cache.identity): they are
# recorded and replayed through a FakeLLMServer at a random port, and replayed by
# `judge demo` with no server at all, so their keys name this fixed identity, not an address.
FIXTURE_SERVER = "judge-fixture"


def score_fixture(
    sample: Mapping[str, Any],
    base_url: str,
    metrics: Sequence[str],
    *,
    model: str,
    embedding_model: str | None = None,
    cache: Any = None,
    cache_as: str | None = FIXTURE_SERVER,
) -> Any:
    """judge.score of one fixture sample (a dict with question, answer, contexts,
    ground_truth and id) with the given model names, against the server at base_url.

    No retries: a judgment missing from a recording must fail at once, not after backoff.
    Cache keys name `cache_as` (default FIXTURE_SERVER) as the server, not base_url, so
    what one run records another replays through a server at another port.
    """
    from judge.llm.config import LLM, Embeddings
    from judge.run.score import score

    llm = LLM(model=model, api_base=base_url, api_key="fixture", max_retries=0, cache_as=cache_as)
    embeddings = (
        Embeddings(model=embedding_model, api_base=base_url, api_key="fixture", cache_as=cache_as)
        if embedding_model
        else None
    )
    return score(
        sample["question"],
        sample.get("answer"),
        sample.get("contexts") or (),
        sample.get("ground_truth"),
        metrics=list(metrics),
        llm=llm,
        embeddings=embeddings,
        cache=cache,
        sample_id=sample.get("id"),
    )
