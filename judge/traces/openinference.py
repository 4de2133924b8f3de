"""What a span is and holds, in the OpenInference conventions and the OpenTelemetry GenAI
conventions where they name the same things.

The names are those of the package openinference-semantic-conventions (`SpanAttributes`,
`DocumentAttributes`, `RerankerAttributes`, `MessageAttributes`; a test checks them
against it) and of the GenAI conventions (`gen_ai.operation.name` "retrieval" / "chat",
`gen_ai.retrieval.documents`, `gen_ai.usage.*`). OpenInference flattens lists into keys:
`retrieval.documents.0.document.id`, `llm.output_messages.0.message.content`.
"""

from __future__ import annotations

import json
from typing import Any

from judge.traces.spans import Span

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"
RETRIEVAL_DOCUMENTS = "retrieval.documents"
RERANKER_INPUT_DOCUMENTS = "reranker.input_documents"
RERANKER_OUTPUT_DOCUMENTS = "reranker.output_documents"
DOCUMENT_ID = "document.id"
DOCUMENT_CONTENT = "document.content"
DOCUMENT_SCORE = "document.score"
DOCUMENT_METADATA = "document.metadata"
# Where a document's id is kept when document.id is not: its metadata (LangChain's
# instrumentation records Document.metadata, not the store's id), under these keys.
METADATA_ID_KEYS = ("id", "doc_id", "document_id", "chunk_id")
LLM_MODEL_NAME = "llm.model_name"
LLM_OUTPUT_MESSAGES = "llm.output_messages"
MESSAGE_CONTENT = "message.content"
TOKEN_PROMPT = "llm.token_count.prompt"
TOKEN_COMPLETION = "llm.token_count.completion"
TOKEN_TOTAL = "llm.token_count.total"
SESSION_ID = "session.id"

# The OpenTelemetry GenAI conventions.
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
GEN_AI_RETRIEVAL_QUERY = "gen_ai.retrieval.query.text"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_CONVERSATION = "gen_ai.conversation.id"
_GEN_AI_LLM = {"chat", "text_completion", "generate_content"}

RETRIEVER = "RETRIEVER"
RERANKER = "RERANKER"
LLM = "LLM"

# The keys of a JSON input or output object that hold the question or the answer, in the
# order they are tried (LangChain chains take {"input": ...} or {"question": ...}, and
# create_retrieval_chain returns {"answer": ..., "context": [...]}).
QUESTION_KEYS = ("question", "query", "input", "user_input", "query_str", "text")
ANSWER_KEYS = ("answer", "output", "response", "result", "text", "content")


def kind_of(span: Span) -> str | None:
    """The span's role: "RETRIEVER", "RERANKER", "LLM", another OpenInference kind, or
    None; a GenAI span is a retriever or an LLM by its operation name."""
    kind = span.attributes.get(SPAN_KIND)
    if isinstance(kind, str) and kind:
        return kind.upper()
    operation = span.attributes.get(GEN_AI_OPERATION)
    if operation == "retrieval":
        return RETRIEVER
    if operation in _GEN_AI_LLM:
        return LLM
    return None


def documents(span: Span, prefix: str) -> list[dict[str, Any]]:
    """The documents under an OpenInference list prefix (`retrieval.documents`), as
    [{"id", "content", "score"}] in index order; empty when there are none."""
    attributes = span.attributes
    value = attributes.get(prefix)
    if value is not None:  # the list as one attribute (structured, or JSON text)
        return _document_list(value)
    found: dict[int, dict[str, Any]] = {}
    start = prefix + "."
    for key, item in attributes.items():
        if not key.startswith(start):
            continue
        index, _, field = key[len(start) :].partition(".")
        if not index.isdigit():
            continue
        doc = found.setdefault(int(index), {})
        if field == DOCUMENT_ID:
            doc["id"] = str(item)
        elif field == DOCUMENT_CONTENT:
            doc["content"] = item
        elif field == DOCUMENT_SCORE:
            doc["score"] = item
        elif field == DOCUMENT_METADATA:
            doc["metadata"] = item
    return [_with_metadata_id(found[i]) for i in sorted(found)]


def _with_metadata_id(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with its id taken from its metadata when it has no document.id."""
    metadata = doc.pop("metadata", None)
    if "id" in doc or metadata is None:
        return doc
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError:
            return doc
    if isinstance(metadata, dict):
        for key in METADATA_ID_KEYS:
            if metadata.get(key) is not None:
                doc["id"] = str(metadata[key])
                break
    return doc


def _document_list(value: Any) -> list[dict[str, Any]]:
    """A list of documents given as one value: GenAI's [{"id", "score", ...}], as JSON
    text or structured; OpenInference's nested {"document.id": ...} too."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return []
    if not isinstance(value, list):
        return []
    docs = []
    for item in value:
        if not isinstance(item, dict):
            continue
        doc: dict[str, Any] = {}
        for key in ("id", DOCUMENT_ID):
            if item.get(key) is not None:
                doc["id"] = str(item[key])
        for key in ("content", "text", DOCUMENT_CONTENT):
            if item.get(key) is not None:
                doc["content"] = item[key]
        for key in ("score", DOCUMENT_SCORE):
            if item.get(key) is not None:
                doc["score"] = item[key]
        if item.get(DOCUMENT_METADATA) is not None:
            doc["metadata"] = item[DOCUMENT_METADATA]
        docs.append(_with_metadata_id(doc))
    return docs


def retrieved(span: Span, kind: str) -> list[dict[str, Any]]:
    """The ranked documents a retriever found or a reranker kept."""
    if kind == RERANKER:
        return documents(span, RERANKER_OUTPUT_DOCUMENTS)
    docs = documents(span, RETRIEVAL_DOCUMENTS)
    return docs or _document_list(span.attributes.get(GEN_AI_RETRIEVAL_DOCUMENTS))


def _decoded(value: Any, mime: Any, keys: tuple[str, ...], last: bool) -> str | None:
    """The text of an input or output value: itself; when it is a JSON object, the first
    of `keys` holding text (or its only text value); for chat messages ({"messages":
    [...]} or a list), the first user message's text (`last`: the last message's)."""
    if value is None:
        return None
    if isinstance(value, str) and (mime == "application/json" or value.startswith(("{", "[{"))):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, list):
        return _chat_text(value, last)
    if isinstance(value, dict):
        for key in keys:
            if isinstance(value.get(key), str):
                return str(value[key])
        texts = [v for v in value.values() if isinstance(v, str)]
        if len(texts) == 1:
            return texts[0]
    return None


def _chat_text(messages: list[Any], last: bool) -> str | None:
    """The text of chat messages ({"role"/"type", "content"}): the first user (human)
    message's, or the last message's."""
    chosen = [m for m in messages if isinstance(m, dict)]
    if not last:
        chosen = [m for m in chosen if m.get("role", m.get("type")) in ("user", "human")]
    if not chosen:
        return None
    content = chosen[-1 if last else 0].get("content")
    return content if isinstance(content, str) else None


def _message_text(value: Any, last: bool) -> str | None:
    """The text of a GenAI message list ([{"role", "parts": [{"type": "text",
    "content"}]}], JSON text or structured): the first user message's, or the last one's."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, list):
        return None
    messages = [m for m in value if isinstance(m, dict)]
    if not last:
        messages = [m for m in messages if m.get("role") == "user"]
    for message in reversed(messages) if last else messages:
        parts = [
            str(p["content"])
            for p in message.get("parts") or ()
            if isinstance(p, dict) and isinstance(p.get("content"), str)
        ]
        if parts:
            return "".join(parts)
        if isinstance(message.get("content"), str):
            return str(message["content"])
    return None


def question_of(span: Span) -> str | None:
    """The question a span was given (its input), or None."""
    attributes = span.attributes
    text = _decoded(
        attributes.get(INPUT_VALUE), attributes.get(INPUT_MIME_TYPE), QUESTION_KEYS, last=False
    )
    if text is None and attributes.get(GEN_AI_INPUT_MESSAGES) is not None:
        text = _message_text(attributes[GEN_AI_INPUT_MESSAGES], last=False)
    return text


def answer_of(span: Span) -> str | None:
    """The answer a span gave (its output), or None."""
    attributes = span.attributes
    text = _decoded(
        attributes.get(OUTPUT_VALUE), attributes.get(OUTPUT_MIME_TYPE), ANSWER_KEYS, last=True
    )
    if text is None and attributes.get(GEN_AI_OUTPUT_MESSAGES) is not None:
        text = _message_text(attributes[GEN_AI_OUTPUT_MESSAGES], last=True)
    return text


def model_of(span: Span) -> str | None:
    """An LLM span's model name."""
    attributes = span.attributes
    for key in (LLM_MODEL_NAME, GEN_AI_RESPONSE_MODEL, GEN_AI_REQUEST_MODEL):
        if isinstance(attributes.get(key), str) and attributes[key]:
            return str(attributes[key])
    return None


def tokens_of(span: Span) -> tuple[int, int, int]:
    """An LLM span's (prompt, completion, total) token counts; 0 for those not given."""
    attributes = span.attributes
    prompt = _int(attributes.get(TOKEN_PROMPT, attributes.get(GEN_AI_INPUT_TOKENS)))
    completion = _int(attributes.get(TOKEN_COMPLETION, attributes.get(GEN_AI_OUTPUT_TOKENS)))
    total = _int(attributes.get(TOKEN_TOTAL)) or prompt + completion
    return prompt, completion, total


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def session_of(span: Span) -> str | None:
    """The session (conversation) id a span names, or None."""
    for key in (SESSION_ID, GEN_AI_CONVERSATION):
        value = span.attributes.get(key)
        if value is not None and value != "":
            return str(value)
    return None


# Tool calls and the generator's input (judge traces hops).
TOOL = "TOOL"
TOOL_NAME = "tool.name"
INPUT_DOCUMENTS = "input.documents"
LLM_INPUT_MESSAGES = "llm.input_messages"
LLM_PROMPTS = "llm.prompts"
LLM_PROMPT_TEMPLATE_VARIABLES = "llm.prompt_template.variables"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
_GEN_AI_TOOL = "execute_tool"


def is_tool(span: Span) -> bool:
    """Whether the span is a tool call: OpenInference's (and Langfuse's) TOOL kind, or
    GenAI's operation execute_tool."""
    kind = span.attributes.get(SPAN_KIND)
    if isinstance(kind, str) and kind.upper() == TOOL:
        return True
    # (A GenAI span read from Phoenix has its kind too: UNKNOWN, which says nothing.)
    return span.attributes.get(GEN_AI_OPERATION) == _GEN_AI_TOOL


def tool_call_of(span: Span) -> dict[str, Any]:
    """A tool span's call as {"name", "arguments"}: the name from tool.name (GenAI:
    gen_ai.tool.name), else the span's name; the arguments from gen_ai.tool.call.arguments,
    else the span's input (input.value), as recorded (JSON text, or what is not JSON);
    no "arguments" when none is recorded, and no "name" when there is none."""
    attributes = span.attributes
    call: dict[str, Any] = {}
    for key in (TOOL_NAME, GEN_AI_TOOL_NAME):
        if isinstance(attributes.get(key), str) and attributes[key]:
            call["name"] = attributes[key]
            break
    else:
        if span.name:
            call["name"] = span.name
    for key in (GEN_AI_TOOL_CALL_ARGUMENTS, INPUT_VALUE):
        if attributes.get(key) is not None:
            call["arguments"] = attributes[key]
            break
    return call


def tool_output_of(span: Span) -> Any:
    """What a tool span returned, as recorded (gen_ai.tool.call.result, else output.value),
    or None."""
    for key in (GEN_AI_TOOL_CALL_RESULT, OUTPUT_VALUE):
        if span.attributes.get(key) is not None:
            return span.attributes[key]
    return None


def input_texts(span: Span) -> list[str]:
    """Every text an LLM span records of its input (input.value, llm.input_messages,
    llm.prompts, llm.prompt_template.variables, gen_ai.input.messages), JSON text opened
    down to its strings: where the documents put in its prompt are found."""
    found: list[str] = []
    for key, value in span.attributes.items():
        if key in (INPUT_VALUE, LLM_PROMPT_TEMPLATE_VARIABLES, GEN_AI_INPUT_MESSAGES) or (
            key.startswith((LLM_INPUT_MESSAGES + ".", LLM_PROMPTS)) or key == LLM_INPUT_MESSAGES
        ):
            _strings(value, found, depth=0)
    return found


def _strings(value: Any, out: list[str], depth: int) -> None:
    """The strings in a value, JSON text opened (to a bounded depth)."""
    if depth > 50:
        return
    if isinstance(value, str):
        if value[:1] in ("{", "["):
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                parsed = None
            if isinstance(parsed, (dict, list)):
                _strings(parsed, out, depth + 1)
                return
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _strings(item, out, depth + 1)
