"""Scoring recorded fixture samples against a fake (or real) server, for tests and scripts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def score_fixture(
    sample: Mapping[str, Any],
    base_url: str,
    metrics: Sequence[str],
    *,
    model: str,
    embedding_model: str | None = None,
    cache: Any = None,
) -> Any:
    """judge.score of one fixture sample (a dict with question, answer, contexts,
    ground_truth and id) with the given model names, against the server at base_url.

    No retries: a judgment missing from a recording must fail at once, not after backoff.
    """
    from judge.llm.config import LLM, Embeddings
    from judge.run.score import score

    llm = LLM(model=model, api_base=base_url, api_key="fixture", max_retries=0)
    embeddings = (
        Embeddings(model=embedding_model, api_base=base_url, api_key="fixture")
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
