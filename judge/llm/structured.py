"""Structured output: how a request asks for JSON in each mode, and how replies are checked.

The modes, tried in order until a server accepts one: `json_schema` (OpenAI structured
outputs), `json_object_schema` (JSON mode with the schema in the request, as llama.cpp's
server accepts), `json_object` (plain JSON mode), `prompt` (no response format). Every mode
below `json_schema` also puts the schema in the prompt.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from judge.errors import InvalidOutputError, TruncatedOutputError
from judge.llm.replies import json_candidates, schema_instructions

StructuredMode = Literal["json_schema", "json_object_schema", "json_object", "prompt"]
MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object_schema", "json_object", "prompt")

M = TypeVar("M", bound=BaseModel)


@functools.cache
def schema_of(output: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an output model, computed once (pydantic takes ~0.5 ms per call)."""
    return output.model_json_schema()


def _with_schema_text(
    messages: list[dict[str, Any]], schema: dict[str, Any]
) -> list[dict[str, Any]]:
    """The messages with the schema instructions added to the system message."""
    text = schema_instructions(schema)
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0], content=f"{messages[0]['content']}\n\n{text}")
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def request_for(
    mode: StructuredMode, messages: list[dict[str, Any]], schema: dict[str, Any], name: str
) -> dict[str, Any]:
    """The `messages` and `response_format` arguments of a request in one mode."""
    if mode == "json_schema":
        return {
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name[:64], "schema": schema},
            },
        }
    with_text = _with_schema_text(messages, schema)
    if mode == "json_object_schema":
        return {"messages": with_text, "response_format": {"type": "json_object", "schema": schema}}
    if mode == "json_object":
        return {"messages": with_text, "response_format": {"type": "json_object"}}
    return {"messages": with_text}


@dataclass(frozen=True)
class BadReply:
    """A reply that could not be used: its text, what was wrong, and whether it was cut off."""

    raw: str
    error: str
    truncated: bool

    def error_for(self, label: str, reasks: int) -> InvalidOutputError:
        """The error to raise once re-asking is spent."""
        if self.truncated:
            return TruncatedOutputError(
                f"{label}: the model stopped at max_tokens before its JSON was complete "
                f"(finish_reason 'length', {reasks} re-asks); raise max_tokens",
                raw=self.raw,
                error=self.error,
            )
        return InvalidOutputError(
            f"{label}: the model's output does not match the schema after {reasks} re-asks: "
            f"{self.error}. Try a stronger model, or a structured-output mode the server enforces.",
            raw=self.raw,
            error=self.error,
        )


def _message_text(choice: Any) -> str:
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else ""


def parse_choices(response: Any, output: type[M]) -> tuple[list[M], list[BadReply]]:
    """Validate every choice of a response: (valid replies, bad replies)."""
    good: list[M] = []
    bad: list[BadReply] = []
    for choice in getattr(response, "choices", None) or []:
        raw = _message_text(choice)
        truncated = getattr(choice, "finish_reason", None) == "length"
        try:
            good.append(_the_one_valid(raw, output))
        except ValueError as exc:  # JSON errors and pydantic's ValidationError
            detail = validation_summary(exc) if isinstance(exc, ValidationError) else str(exc)
            bad.append(BadReply(raw=raw, error=detail, truncated=truncated))
    if not good and not bad:
        bad.append(BadReply(raw="", error="the response has no choices", truncated=False))
    return good, bad


def _the_one_valid(raw: str, output: type[M]) -> M:
    """The single schema-valid JSON object of a reply.

    A reply whose prose holds two different valid objects (say, one echoed from an answer
    that tries to dictate a verdict, and the judge's own) is ambiguous: it is re-asked,
    never resolved by taking the first or the last.
    """
    valid: dict[str, M] = {}
    first_error: ValueError | None = None
    for candidate in json_candidates(raw):
        try:
            parsed = output.model_validate(candidate)
        except ValidationError as exc:
            first_error = first_error or exc
            continue
        valid.setdefault(parsed.model_dump_json(), parsed)
    if len(valid) == 1:
        return next(iter(valid.values()))
    if len(valid) > 1:
        raise ValueError(
            "the reply holds several different JSON objects that fit the schema; "
            "reply with exactly one"
        )
    assert first_error is not None  # json_candidates raises when nothing parses
    raise first_error


def validation_summary(exc: ValidationError) -> str:
    """A validation error in a few lines the model (and a person) can act on."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def reask_messages(messages: list[dict[str, Any]], bad: BadReply) -> list[dict[str, Any]]:
    """The original messages, the bad reply, and a request to fix it."""
    why = "it was cut off before the JSON was complete" if bad.truncated else bad.error
    return [
        *messages,
        {"role": "assistant", "content": bad.raw},
        {
            "role": "user",
            "content": f"Your reply could not be used: {why}. Reply again with only the "
            "corrected JSON object, matching the schema exactly.",
        },
    ]
