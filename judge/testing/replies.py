"""Replies for the fake server: judge's heuristic judge, recorded judgments, schema echoes
and bag-of-words embeddings. Stdlib only, like judge.testing, which re-exports them."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

ChatHandler = Callable[[dict[str, Any]], Any]

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error"}
_ERROR_TYPES |= {404: "not_found_error", 409: "conflict_error", 429: "rate_limit_error"}

# CJK characters carry a word's meaning each and are not space-separated, so they are tokens.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")


class FakeHTTPError(Exception):
    """An error response to send: status code and JSON payload."""

    def __init__(self, status: int, message: str, payload: dict[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.payload = payload or error_body(status, message)


def error_body(status: int, message: str) -> dict[str, Any]:
    """Build an OpenAI-style error body."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    code = "invalid_api_key" if status == 401 else None
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def message_text(content: Any) -> str:
    """Return the text of a message content (a string or a list of typed parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def hashed_embedding(text: str, dims: int = 256) -> list[float]:
    """Embed text as an L2-normalised hashed bag of words (CJK characters count as words)."""
    vector = [0.0] * dims
    for token in _TOKEN.findall(text.lower()):
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        vector[int.from_bytes(digest, "little") % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        # A zero vector would make cosine similarity divide by zero downstream.
        vector[0] = 1.0
        return vector
    return [x / norm for x in vector]


def hashed_embeddings(texts: list[str]) -> list[list[float]]:
    """Embed each text with `hashed_embedding`."""
    return [hashed_embedding(t) for t in texts]


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    """Follow a local JSON pointer such as "#/$defs/Claim"."""
    node: Any = root
    for part in ref.removeprefix("#").strip("/").split("/"):
        if part:
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node if isinstance(node, dict) else {}


def schema_example(schema: dict[str, Any], root: dict[str, Any], depth: int = 0) -> Any:
    """Return a minimal value valid for a JSON schema (the common pydantic subset)."""
    if "$ref" in schema:
        return schema_example(_resolve(schema["$ref"], root), root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [s for s in schema.get(key, []) if s.get("type") != "null"]
        if options:
            return schema_example(options[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties", {})
        return {
            k: schema_example(props.get(k, {}), root, depth + 1) for k in schema.get("required", [])
        }
    if kind == "array":
        if "prefixItems" in schema:
            return [schema_example(s, root, depth + 1) for s in schema["prefixItems"]]
        # One item shows the item shape; deep down, stop so recursive models terminate.
        count = max(schema.get("minItems", 0), 1 if depth < 8 else 0)
        return [schema_example(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        if "exclusiveMinimum" in schema:
            low = math.floor(schema["exclusiveMinimum"]) + 1  # a whole number suits both kinds
        value = max(0, math.ceil(low) if kind == "integer" else low)
        value = min(value, schema.get("maximum", value))
        return int(value) if kind == "integer" else float(value)
    if kind == "string":
        return "x" * max(1, schema.get("minLength", 1))
    return {"boolean": False}.get(kind or "")


def schema_in_text(text: str) -> dict[str, Any] | None:
    """Return the first JSON object in `text` that has a "properties" key."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict) and "properties" in obj:
            return obj
        start = text.find("{", end)
    return None


# judge's built-in prompts, told apart by the start of their system message
_JUDGES = {
    "You split one te": "claims",
    "You check numbered": "verify",
    "You check each claim": "verify_turn",
    "You write the ques": "reverse",
    "You judge how usef": "grade",
    "You pick, from ret": "sentences",
    "You check citation": "citations",
    "You check whether an": "retention",
    "You check the sear": "query_rewrite",
    "You check whether a conv": "goal",
    "You check an agent's": "trajectory",
}


_DATA_BLOCK = re.compile(r"<(\w+)>(.*?)</\1>", re.S)


def data_blocks(text: str) -> dict[str, Any]:
    """The JSON data blocks of a message judge rendered, by tag name.

    Data is JSON with < and > escaped, so a block never holds its own closing tag.
    """
    return {name: json.loads(body) for name, body in _DATA_BLOCK.findall(text)}


def _block(text: str, tag: str) -> Any:
    blocks = data_blocks(text)
    if tag not in blocks:
        raise FakeHTTPError(400, f"the prompt has no <{tag}> block")
    return blocks[tag]


def _words(text: str) -> set[str]:
    return {w.lower() for w in _TOKEN.findall(text)}


def heuristic_judge(body: dict[str, Any]) -> str:
    """A fast, consistent stand-in for a judge model, answering judge's built-in prompts.

    Sentences are claims; a claim is supported by the first context holding all its words
    (on a conversation's turn, else by the first piece of the conversation holding them);
    a context's grade grows with the question words it shares (a sentence is needed when it
    shares two); the reverse questions are the answer's first sentences. Deterministic, so
    tests and benchmarks can rely on it. An earlier user message sharing a word with the
    answer is kept by it (none is contradicted); a retriever query holding every word of
    the message is faithful to it, else incomplete; a conversation whose messages hold every
    word of its expected outcome achieved it; tool calls that call every expected tool by
    name (whatever their arguments) are sound.
    """
    messages = body.get("messages") or [{}]
    system = message_text(messages[0].get("content"))
    # The data is in the first user message; later ones are re-asks.
    user = next((message_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    kind = next((k for prefix, k in _JUDGES.items() if system.startswith(prefix)), None)
    if kind == "claims":
        text = re.sub(r"\s*\[[\d, ]+\]", "", _block(user, "text"))  # no [n]
        return json.dumps(
            {"claims": [s.strip() + "." for s in re.split(r"[.。]", text) if s.strip()]}
        )
    if kind == "verify":
        claims, contexts = _block(user, "claims"), _block(user, "contexts")
        verdicts = []
        for i, claim in enumerate(claims):
            hit = next((k for k, c in enumerate(contexts) if _words(claim) <= _words(c)), None)
            verdicts.append(
                {
                    "claim": i,
                    "verdict": "supported" if hit is not None else "not_found",
                    "reason": "all words found" if hit is not None else "not in any context",
                    "context": hit,
                }
            )
        return json.dumps({"verdicts": verdicts})
    if kind == "verify_turn":
        claims, contexts = _block(user, "claims"), _block(user, "contexts")
        conversation = _block(user, "conversation")
        verdicts = []
        for i, claim in enumerate(claims):
            hit = next((k for k, c in enumerate(contexts) if _words(claim) <= _words(c)), None)
            piece = None
            if hit is None:
                piece = next(
                    (k for k, c in enumerate(conversation) if _words(claim) <= _words(c)), None
                )
            found = hit is not None or piece is not None
            verdicts.append(
                {
                    "claim": i,
                    "verdict": "supported" if found else "not_found",
                    "reason": "all words found" if found else "not in any context or message",
                    "context": hit,
                    "said": piece,
                }
            )
        return json.dumps({"verdicts": verdicts})
    if kind == "reverse":
        answer = _block(user, "answer")
        asked = re.search(r"write (\d+) different", system)
        n = int(asked.group(1)) if asked else 3
        sentences = [s.strip() for s in re.split(r"[.。]", answer) if s.strip()] or [answer]
        questions = [f"What about {sentences[i % len(sentences)]}?" for i in range(n)]
        noncommittal = any(p in answer.lower() for p in ("don't know", "not sure", "不确定"))
        return json.dumps({"questions": questions, "noncommittal": noncommittal})
    if kind == "grade":
        question, contexts = _words(_block(user, "question")), _block(user, "contexts")
        grades = [min(3, len(question & _words(c))) for c in contexts]
        return json.dumps(
            {
                "contexts": [
                    {"context": i, "grade": g, "reason": f"{g} shared words"}
                    for i, g in enumerate(grades)
                ]
            }
        )
    if kind == "sentences":
        question, numbered = _words(_block(user, "question")), _block(user, "sentences")
        needed = [int(n) for n, text in numbered.items() if len(question & _words(text)) >= 2]
        return json.dumps({"reason": "sentences sharing two question words", "needed": needed})
    if kind == "citations":
        checks, contexts = _block(user, "checks"), _block(user, "contexts")
        answers = []
        for check in checks:
            supported = _words(check["statement"]) <= _words(contexts[check["context"]])
            answers.append(
                {
                    "check": check["check"],
                    "supported": supported,
                    "reason": "all words in the cited context"
                    if supported
                    else "not in the cited context",
                }
            )
        return json.dumps({"checks": answers})
    if kind == "retention":
        earlier, answer = _block(user, "earlier"), _words(_block(user, "answer"))
        return json.dumps(
            {
                "verdicts": [
                    {
                        "statement": i,
                        "reason": "shares words with the answer" if shared else "not touched",
                        "verdict": "kept" if shared else "unrelated",
                    }
                    for i, said in enumerate(earlier)
                    for shared in [bool(_words(said) & answer)]
                ]
            }
        )
    if kind == "goal":
        said = _words(" ".join(_block(user, "conversation")))
        missing = _words(_block(user, "outcome")) - said
        return json.dumps(
            {
                "reason": "every word of the outcome was said" if not missing else "not said",
                "verdict": "achieved" if not missing else "not_achieved",
            }
        )
    if kind == "trajectory":
        made = {call.get("name") for call in _block(user, "called")}
        left = [c.get("name") for c in _block(user, "expected") if c.get("name") not in made]
        return json.dumps(
            {
                "reason": "every expected tool was called" if not left else "a tool not called",
                "verdict": "sound" if not left else "unsound",
            }
        )
    if kind == "query_rewrite":
        missing = _words(_block(user, "message")) - _words(_block(user, "query"))
        return json.dumps(
            {
                "reason": "the query has the message's words" if not missing else "words left out",
                "verdict": "faithful" if not missing else "incomplete",
            }
        )
    raise FakeHTTPError(400, "not one of judge's built-in prompts")


def recorded_chat(entries: Iterable[Any]) -> ChatHandler:
    """A ChatHandler that answers from recorded judgments (cache entries or their JSONL dicts).

    A request matches an entry when its messages equal the recorded ones, except that the
    system message may carry extra text after the recorded one (the schema instructions
    of the json_object and prompt modes). An unmatched request gets HTTP 500.
    """
    table: dict[str, list[tuple[str, Any]]] = {}
    for entry in entries:
        data = entry if isinstance(entry, dict) else vars(entry)
        if data.get("kind") != "chat":
            continue
        system, *rest = data["request"]["messages"]
        key = json.dumps(rest, sort_keys=True, ensure_ascii=False)
        table.setdefault(key, []).append((system["content"], data["response"]["choices"]))

    def answer(body: dict[str, Any]) -> list[str]:
        system, *rest = body.get("messages") or [{}]
        key = json.dumps(rest, sort_keys=True, ensure_ascii=False)
        sent = message_text(system.get("content"))
        for recorded, choices in table.get(key, []):
            if sent == recorded or sent.startswith(recorded + "\n"):
                return [json.dumps(c, ensure_ascii=False) for c in choices]
        raise FakeHTTPError(500, "no recorded judgment matches this request")

    return answer
