"""The cheaper ways of a replayed row's work give exactly what the plain ones gave: cosine
similarities, content words, row hashes and usage totals."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge.json_values import sha256_hex
from judge.llm.usage import Usage, UsageLedger
from judge.metrics.overlap import _CJK_CHAR, _TOKEN, content_tokens, drawn_from, drawn_from_all
from judge.metrics.prompts import data_json
from judge.metrics.scorers import answer_relevancy, cosine_similarities
from judge.run.data import Row
from judge.run.plan import row_hash
from judge.samples import Sample


def plain_cosines(query, others):
    """cosine_similarities as it was written first, through np.linalg.norm."""
    q = np.asarray(query, dtype=np.float64)
    m = np.asarray(others, dtype=np.float64).reshape(len(others), q.size)
    norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
    dots = m @ q
    return [float(d / n) if n > 0 else 0.0 for d, n in zip(dots, norms, strict=True)]


@pytest.mark.parametrize("size", [3, 256, 1536])
def test_cosine_similarities_equal_those_through_linalg_norm_to_the_bit(size):
    rng = random.Random(size)
    for _ in range(20):
        query = [rng.uniform(-1, 1) for _ in range(size)]
        others = [[rng.uniform(-1, 1) for _ in range(size)] for _ in range(rng.randint(1, 4))]
        got = cosine_similarities(query, others)
        assert got == plain_cosines(query, others)
        assert all(type(x) is float for x in got)
    zero = [0.0] * size
    with_zero = [zero, others[0]]
    assert cosine_similarities(query, with_zero) == plain_cosines(query, with_zero)
    assert cosine_similarities(query, with_zero)[0] == 0.0
    assert cosine_similarities(zero, others) == [0.0] * len(others)


def test_answer_relevancy_equals_numpy_s_mean_to_the_bit():
    rng = random.Random(3)
    for size in [1, 2, 3, 5, 7, 8, 9, 17, 100, 1000]:
        for _ in range(20):
            similarities = [rng.uniform(-1, 1) for _ in range(size)]
            got = answer_relevancy(similarities)
            assert got == float(np.mean(np.asarray(similarities, dtype=np.float64)))
            assert type(got) is float


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "Python 3.12 is used for project 42 and Python is fast.",
            "12 3 42 fast project python used",
        ),
        # str.isdigit's digits (superscripts, circled) count; words of 3 letters do not
        ("x² and ① are digits to str.isdigit; ab, abc and abcd.", "abcd digits isdigit x² ①"),
        ("中文的句子，Python 和 Rust。", "python rust 中 句 和 子 文 的"),
        ("", ""),
    ],
)
def test_content_tokens_are_the_numbers_long_words_and_cjk_characters(text, words):
    assert content_tokens(text) == frozenset(words.split())


def plain_content_tokens(text: str) -> frozenset[str]:
    """content_tokens as it was written first: one tokeniser for every text."""
    tokens = _TOKEN.findall(text.lower())
    return frozenset(t for t in tokens if len(t) >= 4 or _CJK_CHAR.match(t) or _digit(t))


def _digit(token: str) -> bool:
    return any(c.isdigit() for c in token)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab_1 ².,\u212aΣ中é\n", max_size=40))
def test_content_tokens_equal_the_single_tokeniser_s(text):
    """ASCII text is split by a simpler pattern: the words are the same (underscores,
    the Kelvin sign that lowers to ASCII, CJK and accents included)."""
    content_tokens.cache_clear()
    assert content_tokens(text) == plain_content_tokens(text)


@dataclass
class Point:
    x: int


def asdict_hash(row: Row) -> str:
    """row_hash as it was written first, through dataclasses.asdict (of a Sample before it
    had the fields of a conversation's turn)."""
    fields = dataclasses.asdict(row.sample) if row.sample else None
    for name in ("history", "turn", "conversation_id"):
        if fields is not None:
            del fields[name]
    data = {
        "sample": fields,
        "error": row.error,
        "retrieved_ids": row.retrieved_ids,
        "relevance": row.relevance,
    }
    return sha256_hex(json.dumps(data, sort_keys=True, ensure_ascii=False, default=repr))


@pytest.mark.parametrize(
    "row",
    [
        Row(0, Sample("q?", "a.", ("c1", "c2"), "t.", "id0")),
        Row(1, Sample("q?", None, (), None, None), retrieved_ids=["d1"], relevance={"d1": 2}),
        Row(2, None, error="no question"),
        Row(3, Sample("q?", "a.", ("c",), extra={"p": Point(1), "n": math.nan, "d": {"k": [1]}})),
    ],
)
def test_row_hash_equals_the_hash_of_the_deep_copy(row):
    assert row_hash(row) == asdict_hash(row)


def test_usage_total_adds_every_counter_in_order():
    ledger = UsageLedger()
    assert ledger.total().as_dict() == Usage().as_dict()  # 0.0, not 0: the JSON stays
    assert json.dumps(ledger.total().as_dict()) == json.dumps(Usage().as_dict())
    ledger.of("a").known_cost, ledger.of("a").requests = 0.1, 2
    ledger.of("b").known_cost, ledger.of("b").cache_hits = 0.2, 3
    ledger.of("c").unpriced_requests = 1
    total = ledger.total()
    assert (total.requests, total.cache_hits, total.unpriced_requests) == (2, 3, 1)
    assert total.known_cost == 0.0 + 0.1 + 0.2 and total.cost is None


def plain_data_json(value):
    """data_json as it was written first: json.dumps, then markup escaped."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# Any text, lone surrogates included (they come from JSON's "\ud800"), and markup.
_TEXTS = st.text(
    st.characters() | st.sampled_from(["<", ">", "&", '"', "\\", "\n", "\u2028", "\ud800"])
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        _TEXTS,
        st.lists(_TEXTS, max_size=6),
        st.none(),
        st.integers(),
        st.lists(st.one_of(_TEXTS, st.integers(), st.none()), max_size=4),
        st.dictionaries(_TEXTS, st.lists(_TEXTS, max_size=2), max_size=3),
    )
)
def test_data_json_of_texts_and_lists_of_texts_equals_json_dumps(value):
    assert data_json(value) == plain_data_json(value)


_WORDY = st.text(alphabet="ab cd 12 Σ中é\n.", max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(_WORDY, max_size=5), _WORDY, _WORDY)
def test_claims_drawn_from_all_are_those_drawn_from_each(claims, text, question):
    assert drawn_from_all(claims, text, question) == [
        c for c in claims if drawn_from(c, text, question)
    ]
