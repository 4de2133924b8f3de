"""Answers to RAGAS 0.4.3's TestsetGenerator prompts for the fake server, by output model.

Strings are filled with words of the prompt's input (so themes, entities and queries vary
with the chunk), scores pass RAGAS's filters, persona-theme mappings and concept
combinations name what the input offers. Good enough for RAGAS to run to the end and be
counted; not a model of quality.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from judge.testing import FakeLLMServer
from judge.testing.replies import schema_example

SIGNATURE = "as specified in JSON Schema:\n"
INPUT = "\ninput: "


def _words(data: Any) -> list[str]:
    text = json.dumps(data, ensure_ascii=False)
    return re.findall(r"[A-Z][a-z]{3,}|[\u4e00-\u9fff]{2,4}", text) or ["Topic"]


def _fill(schema: dict[str, Any], root: dict[str, Any], words: list[str], at: list[int]) -> Any:
    """A schema-valid value whose strings are input words and whose lists hold three items."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _fill(root.get("$defs", {}).get(name, {}), root, words, at)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: _fill(v, root, words, at) for k, v in props.items()}
    if kind == "array":
        return [_fill(schema.get("items", {}), root, words, at) for _ in range(3)]
    if kind == "string":
        at[0] += 1
        return " ".join(words[(at[0] + i) % len(words)] for i in range(3))
    if kind in ("integer", "number"):
        return 3  # RAGAS keeps a node whose score is above 2
    return schema_example(schema, root)


def answer(body: dict[str, Any]) -> str:
    """One RAGAS TestsetGenerator request answered."""
    text = str(body["messages"][-1].get("content", ""))
    at, data_at = text.find(SIGNATURE), text.rfind(INPUT)
    if at < 0 or data_at < 0:
        return FakeLLMServer.schema_echo(body)
    decode = json.JSONDecoder().raw_decode
    schema = decode(text, at + len(SIGNATURE))[0]
    data = decode(text, data_at + len(INPUT))[0]
    title = schema.get("title")
    if title == "PersonaThemesMapping":
        personas = [p["name"] for p in data.get("personas", [])]
        themes = list(data.get("themes", []))[:3]
        return json.dumps({"mapping": {p: themes for p in personas}})
    if title == "ConceptCombinations":
        lists = data.get("lists_of_concepts", [])
        pairs = [[a[0], b[0]] for a, b in itertools.pairwise(lists) if a and b]
        return json.dumps({"combinations": pairs or [["Topic", "Topic"]]})
    return json.dumps(_fill(schema, schema, _words(data), [0]), ensure_ascii=False)
