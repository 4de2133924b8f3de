"""Keys put together from pre-encoded parts (a KeyTemplate) equal the canonical key of the
whole request."""

from __future__ import annotations

import pytest

from judge.cache.store import cache_key
from judge.json_values import canonical_json
from judge.llm.request_keys import KeyTemplate, messages_json, schema_text
from judge.llm.structured import schema_of
from judge.metrics.judges import ContextGrade

MESSAGES = [
    {"role": "system", "content": 'Judge "claims" <b>&amp;</b>\n中文。\u2028 \x00 end'},
    {"role": "user", "content": '<claims>["a"]</claims>'},
]


@pytest.mark.parametrize(
    "messages",
    [
        MESSAGES,
        MESSAGES[:1],
        [],
        [{"role": "user", "content": "x", "name": "extra key"}],  # other shapes, as they are
        [{"role": "user", "content": [{"type": "text", "text": "parts"}]}],
        [{"content": "no role"}, {"role": "user", "content": None}],
        ({"role": "user", "content": "a tuple of messages"},),
    ],
)
def test_messages_json_equals_canonical_json(messages):
    assert messages_json(messages) == canonical_json(list(messages))
    assert messages_json(messages) == canonical_json(list(messages))  # again, remembered


# Every name as the varying one, with other values given pre-encoded or not: the text laid
# out around the gap is the canonical JSON's, wherever the gap falls in the sorted names.
@pytest.mark.parametrize("varying", ["messages", "", "kind", "temperature", "zzz", "schema"])
@pytest.mark.parametrize("encoded_names", [(), ("schema",), ("kind", "temperature"), ("",)])
def test_a_template_key_equals_the_canonical_key(varying, encoded_names):
    material = {
        "kind": "chat",
        "server": "gpu1",
        "model": "openai/m",
        "messages": MESSAGES,
        "schema": schema_of(ContextGrade),
        "n": 2,
        "temperature": 0.3,
        "seed": None,
        "max_tokens": 900,
        "prompt": "verify",
        "prompt_version": "abc",
        "": "an empty name sorts first",
        "zzz": ["a name that sorts last"],
    }
    encoded = {n: canonical_json(material[n]) for n in encoded_names if n != varying}
    if "schema" in encoded:
        encoded["schema"] = schema_text(ContextGrade)
    fixed = {k: v for k, v in material.items() if k != varying}
    template = KeyTemplate(fixed, varying, encoded)
    assert template.key(canonical_json(material[varying])) == cache_key(material)
    # The same template serves other values (the hash of the head is copied, not used up).
    other = {**material, varying: {"another": "value"}}
    assert template.key(canonical_json(other[varying])) == cache_key(other)
    assert template.key(canonical_json(material[varying])) == cache_key(material)


def test_an_encoded_part_missing_from_the_material_is_added():
    material = {"kind": "embedding", "model": "m", "server": "s"}
    encoded = {"schema": canonical_json({"type": "object"})}
    template = KeyTemplate(material, "text", encoded)
    text = 'Ünïcode "text" 中'
    assert template.key(canonical_json(text)) == cache_key(
        {**material, "schema": {"type": "object"}, "text": text}
    )


def test_fixed_values_equal_as_python_values_but_encoded_apart_give_different_keys():
    # 0, 0.0 and False are equal (and hash alike) in Python but encode as 0, 0.0 and false.
    keys = []
    for temperature in (0, 0.0, False, None, "0"):
        material = {"kind": "chat", "temperature": temperature}
        key = KeyTemplate(material, "messages").key(messages_json(MESSAGES))
        assert key == cache_key({**material, "messages": MESSAGES})
        keys.append(key)
    assert len(set(keys)) == 5


def test_a_list_among_the_fixed_values_is_encoded_as_it_is():
    material = {"kind": "chat", "stop": ["\n\n", "END"], "options": {"b": 1, "a": [0.0]}}
    key = KeyTemplate(material, "messages").key(messages_json(MESSAGES))
    assert key == cache_key({**material, "messages": MESSAGES})


@pytest.mark.parametrize(
    "messages",
    [
        MESSAGES,
        MESSAGES[:1],
        [*MESSAGES, {"role": "assistant", "content": "a reply"}, MESSAGES[1]],
        [],
        [{"role": "user", "content": "x", "name": "extra key"}],
        [MESSAGES[0], {"role": "user", "content": None}],
        ({"role": "user", "content": "a tuple of messages"},),
    ],
)
def test_a_messages_key_equals_the_canonical_key_of_the_request(messages):
    """The key built from a first message hashed once (a prompt's system message) is the
    canonical key of the whole request, byte for byte: existing caches still hit."""
    material = {"kind": "chat", "model": "openai/m", "schema": schema_of(ContextGrade)}
    template = KeyTemplate(material, "messages", {"schema": schema_text(ContextGrade)})
    expected = cache_key({**material, "messages": list(messages)})
    assert template.messages_key(messages) == expected
    assert template.messages_key(messages) == expected  # again, from the remembered hash


def test_a_messages_key_follows_each_row_after_the_same_first_message():
    material = {"kind": "chat", "model": "openai/m", "n": 1}
    template = KeyTemplate(material, "messages")
    keys = set()
    for i in range(40):  # more first messages than are remembered, and back again
        first = {"role": "system", "content": f"prompt {i % 20} «中»"}
        for row in ("a", 'b "quoted"', "c\n"):
            messages = [first, {"role": "user", "content": row}]
            key = template.messages_key(messages)
            assert key == cache_key({**material, "messages": messages})
            keys.add(key)
    assert len(keys) == 60
