"""Shared fixtures: the fake OpenAI-compatible server of judge.testing, and models that
judge through it."""

import pytest

from judge import LLM, Embeddings
from judge.testing import FakeLLMServer, fake_llm_server  # noqa: F401  (a pytest fixture)
from tests.helpers.judging import judge_handler


@pytest.fixture
def models(fake_llm_server: FakeLLMServer) -> dict:  # noqa: F811  (the fixture above)
    """A judge model and an embedding model at the fake server, which answers with
    judge_handler (the heuristic judge); a module may define its own `models`."""
    fake_llm_server.chat = judge_handler
    base = fake_llm_server.base_url
    return {
        "llm": LLM("openai/judge-model", api_base=base, api_key="k", max_retries=1),
        "embeddings": Embeddings("openai/embed-model", api_base=base, api_key="k"),
    }
