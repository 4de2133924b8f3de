"""judge.cli.words rewrites judge's own keyword arguments as flags, and nothing else: paths,
server replies and URLs that happen to hold `name=` stay as they are."""

from __future__ import annotations

import pytest

from judge.cli.words import cli_words


@pytest.mark.parametrize(
    "text",
    [
        "/data/model=gpt4/rows.jsonl: no such file",  # a Hive-style partition path
        "the server said: You passed model=qwen2.5",
        "unknown parameter timeout=30",
        "http://h/v1?model=x&api_key=y",
        "s3://b/metrics=a/x.parquet",
    ],
)
def test_text_that_is_not_a_keyword_argument_is_left_alone(text):
    assert cli_words(text) == text


@pytest.mark.parametrize(
    ("text", "flags"),
    [
        ("pass embeddings=Embeddings(model='x')", "pass --embedding-model x"),
        (
            "Embeddings(model='<model>') is a placeholder",
            "--embedding-model '<model>' is a placeholder",
        ),
        ("a placeholder: model=...", "a placeholder: --model ..."),
        ("(timeout=30.0 is too short)", "(timeout=30.0 is too short)"),
        ("give model='openai/x'", "give --model openai/x"),
        ("`cache_as='gpu 1'`", "`--cache-as 'gpu 1'`"),
        ("map it with column_map={'question': ...}", "map it with --column question=COLUMN"),
        ("map it with column_map={'contexts': 'docs'}", "map it with --column contexts=docs"),
        ("column_map={'contexts': 'my docs'}", "--column contexts='my docs'"),
        ("(metrics='faithfulness,ndcg@10')", "(--metrics faithfulness,ndcg@10)"),
    ],
)
def test_keyword_arguments_become_flags(text, flags):
    assert cli_words(text) == flags
