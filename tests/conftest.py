"""Shared fixtures: the fake OpenAI-compatible server of judge.testing."""

from judge.testing import fake_llm_server  # noqa: F401  (a pytest fixture)
