"""Testing helpers: a loopback OpenAI-compatible server, scripted replies, recorded fixtures.

Importing this package loads neither openai, litellm nor pytest; the `fake_llm_server` pytest
fixture is built on first access (`from judge.testing import fake_llm_server` in a conftest.py).
"""

from typing import Any

from judge.testing import server
from judge.testing.fixtures import FIXTURE_SERVER, score_fixture
from judge.testing.replies import data_blocks, hashed_embedding, heuristic_judge, recorded_chat
from judge.testing.server import (
    ChatHandler,
    EmbedHandler,
    FakeLLMServer,
    Fault,
    RecordedRequest,
    Reply,
)

__all__ = [
    "FIXTURE_SERVER",
    "ChatHandler",
    "EmbedHandler",
    "FakeLLMServer",
    "Fault",
    "RecordedRequest",
    "Reply",
    "data_blocks",
    "hashed_embedding",
    "heuristic_judge",
    "recorded_chat",
    "score_fixture",
]


def __getattr__(name: str) -> Any:
    """Create `fake_llm_server` lazily so that importing this package does not import pytest."""
    if name == "fake_llm_server":
        fixture = server.make_fixture()
        globals()[name] = fixture  # one fixture object, however often it is imported
        return fixture
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """List the lazy fixture too, so `pytest_plugins = ["judge.testing"]` finds it."""
    return sorted({*globals(), "fake_llm_server"})
