"""A user name and password in an api_base never reach a message, a key or a file, however
the password is spelt."""

from __future__ import annotations

import pytest

import judge
from judge.cache.identity import has_credentials, server_identity, without_credentials
from judge.errors import JudgeError

SECRET = "se/cr?et#1"


@pytest.mark.parametrize(
    "url",
    [
        f"http://admin:{SECRET}@gpu1:8000/v1",  # "/", "?", "#" end the authority for urlsplit
        "http://admin:s?cret@gpu1/v1",
        f"admin:{SECRET}@gpu1:8000/v1",  # no scheme
        "http://token@gpu1:8000/v1",
    ],
)
def test_credentials_are_found_and_never_shown(url):
    assert has_credentials(url)
    shown = without_credentials(url)
    assert "admin" not in shown and "cr" not in shown and "token" not in shown
    assert shown.endswith("gpu1:8000/v1") or shown.endswith("gpu1/v1")
    for make in (judge.LLM, judge.Embeddings):
        with pytest.raises(JudgeError) as info:
            make("openai/x", api_base=url)
        assert "***@" in str(info.value) and "admin" not in str(info.value)
        assert "token" not in str(info.value) and SECRET not in str(info.value)


def test_plain_urls_are_left_alone():
    for url in ("http://gpu1:8000/v1", "https://api.openai.com/v1", "localhost:8000"):
        assert not has_credentials(url) and without_credentials(url) == url


def test_a_bad_port_error_shows_no_password():
    with pytest.raises(JudgeError) as info:
        server_identity("openai/x", "http://gpu1:80x0/v1", None)
    assert "port is not a number" in str(info.value)
