"""The state of one run against a model: cache first, then structured calls with fallback.

`LLMSession` holds what belongs to one run: the concurrency limit, the structured-output
mode the server accepted, requests in flight, usage and cost. It asks for JSON matching a
pydantic model, falls back from `json_schema` to `json_object` to a plain prompt when a
server rejects a response format, re-asks on invalid output, retries transient failures,
and consults the cache first. Cache keys name the server (`judge.cache.identity`), so two
servers serving one model name never share judgments.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from judge.cache.entries import CacheEntry
from judge.cache.identity import REPLAY_MISSES, recorded_servers, server_identity
from judge.cache.memo import DEFAULT_BYTES, ResponseMemo
from judge.cache.store import Cache
from judge.cache.write_batch import WriteBatch
from judge.errors import CacheMiss, ContextWindowError, JudgeError
from judge.json_values import canonical_json
from judge.llm.config import LLM, Embeddings, PromptRef
from judge.llm.pricing import context_window, estimate_tokens
from judge.llm.request_keys import KeyTemplate, schema_text
from judge.llm.retry import Endpoint, call_with_retries, is_format_rejection
from judge.llm.structured import (
    MODES,
    StructuredMode,
    parse_choices,
    reask_messages,
    request_for,
    schema_of,
    validation_summary,
)
from judge.llm.transport import Transport, endpoint_for
from judge.llm.usage import UsageLedger, UsageRecorder

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

Message = dict[str, Any]


class LLMSession:
    """The state of one run against one chat model (and optionally one embedding model).

    Args:
        llm: the chat model configuration.
        embeddings: the embedding model configuration, if embeddings are needed.
        cache: where judgments are looked up and stored; None calls every time.
        memo_bytes: how much memory (estimated) may hold responses already read from the
            cache in this run, so a repeated request skips the lookup and the decoding;
            0 for none.
    """

    def __init__(
        self,
        llm: LLM | None = None,
        *,
        embeddings: Embeddings | None = None,
        cache: Cache | None = None,
        memo_bytes: int = DEFAULT_BYTES,
    ):
        self.llm = llm
        self.embeddings = embeddings
        self.cache = cache
        # Judgments are stored one transaction per event-loop turn (judge.cache.write_batch).
        self._writes = WriteBatch(cache) if cache is not None else None
        self._memo = ResponseMemo(memo_bytes)
        self.usage = UsageLedger()
        start = (
            "json_schema" if llm is None else llm.structured_output.replace("auto", "json_schema")
        )
        self.mode: StructuredMode = MODES[MODES.index(start)]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._chat_slots: asyncio.Semaphore | None = None
        self._embed_slots: asyncio.Semaphore | None = None
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._transport: Transport | None = None
        self._endpoints: dict[tuple[str, str | None], Endpoint] = {}
        self._key_templates: dict[tuple[Any, ...], KeyTemplate] = {}
        self._same_objects: dict[tuple[Any, ...], tuple[LLM, Any, KeyTemplate]] = {}
        self._elsewhere: dict[tuple[str, str, str], str] = {}  # replay-miss hints, by origin
        # The hints naming cache_as, once each: a run shows them beside its results.
        self.replay_hints: list[str] = []

    def _endpoint(self, model: str, api_base: str | None) -> Endpoint:
        """The run's record of a server: whether it has answered decides if an unreachable
        server is a configuration error (never answered) or an outage (see judge.llm.retry)."""
        key = (model.split("/", 1)[0], api_base)
        if key not in self._endpoints:
            self._endpoints[key] = endpoint_for(model, api_base)
        return self._endpoints[key]

    async def aclose(self) -> None:
        """Close the network clients of the current event loop (the cache stays open)."""
        try:
            if self._writes is not None:
                self._writes.flush()  # a failure to store is raised, after closing the clients
        finally:
            if self._transport is not None and self._loop is asyncio.get_running_loop():
                await self._transport.close()
            self._transport = None
            self._loop = None

    def _bind_loop(self) -> None:
        """Create the asyncio objects on the running loop (a sync wrapper may start a new one)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            if self._writes is not None:
                self._writes.flush()  # a loop that ended before its turn came: write now
            self._loop = loop
            # One limit for every request in flight, chat and embeddings alike; embeddings
            # also keep their own, lower cap.
            total = self.llm.max_concurrency if self.llm else None
            embed = self.embeddings.max_concurrency if self.embeddings else 1
            self._chat_slots = asyncio.Semaphore(total or embed)
            self._embed_slots = asyncio.Semaphore(min(embed, total or embed))
            self._inflight = {}
            self._transport = Transport()  # SDK clients are bound to the loop they ran on

    async def _shared(self, key: str, make: Callable[[], Awaitable[T]]) -> T:
        """Identical requests in flight at the same time are made once."""
        self._bind_loop()
        pending = self._inflight.get(key)
        if pending is not None:
            result: T = await asyncio.shield(pending)
            return result
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            result = await make()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: a lone caller re-raises it below
            raise
        else:
            future.set_result(result)
            return result
        finally:
            self._inflight.pop(key, None)

    async def chat(
        self,
        messages: Sequence[Message],
        output: type[M],
        *,
        n: int = 1,
        prompt: PromptRef | None = None,
        label: str = "chat",
        sample: str | None = None,
        ledger: UsageLedger | None = None,
    ) -> list[M]:
        """Ask the model for `n` replies that validate as `output`; cached by content.

        Args:
            messages: the chat messages, as the model sees them (before any schema text).
            output: the pydantic model every reply must validate against.
            n: number of replies wanted.
            prompt: name and version of the prompt the messages came from (cache key).
            label: the judge's name, for usage accounting and error messages.
            sample: the sample's id, for error messages.
            ledger: a second usage ledger to count in (e.g. one sample's), besides the run's.

        Returns:
            n validated instances of `output`.
        """
        llm = self._need_llm()
        server = server_identity(llm.model, llm.api_base, llm.cache_as)
        key = self._chat_keys(llm, server, output, n, prompt).messages_key(messages)
        cached = self._lookup(key, label, sample, "chat", llm.model, server)
        if cached is not None:
            replies = self._validated(key, cached, output, label, sample)
            if replies is not None:
                self.usage.of(label).cache_hits += 1
                if ledger is not None:
                    ledger.of(label).cache_hits += 1
                return replies
        usage = self._tally(label, ledger)

        async def call() -> list[M]:
            replies, entry = await self._call_chat(list(messages), output, n, usage, label)
            if self._writes is not None:
                self._memo.forget(key)
                self._writes.put(
                    CacheEntry(
                        key=key,
                        kind="chat",
                        request=_chat_material(llm, server, messages, output, n, prompt),
                        response={"choices": [r.model_dump(mode="json") for r in replies]},
                        model=llm.model,
                        prompt=prompt.name if prompt else None,
                        prompt_version=prompt.version if prompt else None,
                        created=time.time(),
                        **entry,
                    ),
                    alone=len(self._inflight) <= 1,  # this request is the only one in flight
                )
            return replies

        await _own_task()
        return await self._shared(key, call)

    def _validated(
        self, key: str, cached: Any, output: type[M], label: str, sample: str | None
    ) -> list[M] | None:
        """The replies of a cached chat response, validated as `output` (None when they do
        not validate: see `_stale`); a built-in judge's are remembered as validated."""
        if type(cached) is _Validated:
            if cached.output is output:
                return list(cached.replies)  # type: ignore[arg-type]  # validated as output
            cached = cached.response
        try:
            # The validator itself: model_validate's wrapper costs as much again here.
            validate = output.__pydantic_validator__.validate_python
            replies: list[M] = [validate(item) for item in cached["choices"]]
        except (ValidationError, KeyError, TypeError) as exc:  # a reply of another shape
            self._stale(key, label, sample, exc)  # asked again, or a CacheMiss
            return None
        if output.__module__ == _BUILT_IN_JUDGES:
            self._memo.put(key, _Validated(cached, output, tuple(replies)))
        return replies

    def _chat_keys(
        self, llm: LLM, server: str, output: type[BaseModel], n: int, prompt: PromptRef | None
    ) -> KeyTemplate:
        """The key template of a judge's requests: one per output model, prompt and n (and
        settings), laid out on first use (the material's fixed values cost more to encode
        and hash on every call than the messages)."""
        # Found first by the very objects of the last calls (a frozen LLM's settings cannot
        # change; a session given another LLM, or another PromptRef, takes the long way).
        seen = (id(llm), server, output, n, type(n), id(prompt))
        found = self._same_objects.get(seen)
        if found is not None and found[0] is llm and found[1] is prompt:
            return found[2]
        exact = (_exactly(llm.temperature), _exactly(llm.seed), _exactly(llm.max_tokens))
        spec = (server, llm.model, exact, output, n, type(n), prompt)
        template = self._key_templates.get(spec)
        if template is None:
            material = _chat_material(llm, server, None, output, n, prompt)
            template = KeyTemplate(material, "messages", {"schema": schema_text(output)})
            self._remember_template(spec, template)
        if len(self._same_objects) >= _KEY_TEMPLATES:
            self._same_objects.clear()
        # The entry holds llm and prompt, so their ids are not reused while it is kept.
        self._same_objects[seen] = (llm, prompt, template)
        return template

    def _remember_template(self, spec: tuple[Any, ...], template: KeyTemplate) -> None:
        if len(self._key_templates) >= _KEY_TEMPLATES:  # a run has a few dozen; never grows
            self._key_templates.clear()
        self._key_templates[spec] = template

    def _stale(self, key: str, label: str, sample: str | None, error: Exception) -> None:
        """A recorded reply that fails today's checks of its output (written by another
        version, or edited by hand) is not served: it is asked again, and in replay mode
        that is a CacheMiss naming why."""
        self._memo.forget(key)
        assert self.cache is not None
        if self.cache.mode == "replay":
            where = f" for sample {sample!r}" if sample is not None else ""
            why = (
                validation_summary(error)
                if isinstance(error, ValidationError)
                else f"the reply is not an object with a list of choices ({error!r})"
            )
            raise CacheMiss(
                f"replay mode: the recorded judgment of {label!r}{where} (key {key[:16]}) fails "
                "the judge's current checks; nothing was sent. Record it again with a "
                f"read-write run. What failed: {why}",
                key=key,
            )

    def _tally(self, label: str, ledger: UsageLedger | None) -> UsageRecorder:
        """Where one call is counted: the run's ledger, and the caller's if given."""
        extra = (ledger.of(label),) if ledger is not None else ()
        return UsageRecorder(self.usage.of(label), *extra)

    def _need_llm(self) -> LLM:
        if self.llm is None:
            raise JudgeError("this metric needs a chat model: pass llm=LLM(model=...)")
        return self.llm

    def _lookup(
        self, key: str, label: str, sample: str | None, kind: str, model: str, server: str
    ) -> Any | None:
        """The cached response under key, or None; in replay mode a miss is an error.
        The request's kind, model and server are named when a miss may have been recorded
        under another server.

        A response read once in this run is remembered (decoded) while the memo's budget
        allows; the caller must not change what it gets.
        """
        if self.cache is None:
            return None
        if self.cache.reads:
            remembered = self._memo.get(key)
            if remembered is not None:
                return remembered
        try:
            entry = (self._writes or self.cache).get_response(key)
        except CacheMiss as exc:  # a damaged entry in replay mode: say whose it is
            where = f" for sample {sample!r}" if sample is not None else ""
            raise CacheMiss(f"{label!r}{where}: {exc}", key=key) from None
        if entry is not None:
            self._memo.put(key, entry)
        elif self.cache.mode == "replay":
            where = f" for sample {sample!r}" if sample is not None else ""
            raise CacheMiss(
                f"replay mode: no recorded judgment of {label!r}{where} (key {key[:16]}); "
                f"nothing was sent. {self._recorded_elsewhere(kind, model, server)}",
                key=key,
            )
        return entry

    def _recorded_elsewhere(self, kind: str, model: str, server: str) -> str:
        """What to do about a replay miss: when the cache holds this model's judgments
        under other server identities (recorded through another api_base), replay them
        with cache_as; else record, or match the recording's settings. Looked up once
        per origin and run: a replay through a new address misses every request."""
        origin = (kind, model, server)
        if origin not in self._elsewhere:
            assert self.cache is not None
            found = recorded_servers([self.cache.path, *self.cache.fallbacks], kind, model)
            others = [name for name in found if name != server][:3]
            if others:
                names = " or ".join(f"cache_as={n!r} (--cache-as {n})" for n in others)
                self._elsewhere[origin] = (
                    f"This server's identity is {server!r}, but the cache holds {model} "
                    f"{'judgments' if kind == 'chat' else 'embeddings'} recorded under "
                    f"{', '.join(repr(n) for n in others)}: to replay them through this "
                    f"address, pass {names}."
                )
                self.replay_hints.append(f"{REPLAY_MISSES}{self._elsewhere[origin]}")
            else:
                self._elsewhere[origin] = (
                    "Record it with a read-write run, or check that the model, prompt, "
                    "settings and server (api_base=) match the recording."
                )
        return self._elsewhere[origin]

    async def _call_chat(
        self, messages: list[Message], output: type[M], n: int, usage: UsageRecorder, label: str
    ) -> tuple[list[M], dict[str, Any]]:
        """Call until n valid replies: fall back on rejected formats, re-ask on bad output."""
        llm = self._need_llm()
        schema = schema_of(output)
        conversation: list[Message] = messages
        valid: list[M] = []
        reasks = 0
        while True:
            mode = self.mode
            check_window(llm, conversation, label)  # re-asks carry the bad reply: check again
            request = request_for(mode, conversation, schema, output.__name__)
            try:
                response = await self._complete(request, n - len(valid), usage, label)
            except Exception as exc:
                if mode != "prompt" and is_format_rejection(exc):
                    self.mode = MODES[MODES.index(mode) + 1]  # remembered for the run
                    continue
                raise
            good, bad = parse_choices(response, output)
            valid += good
            if not bad:
                meta = {
                    "resolved_model": getattr(response, "model", None),
                    "mode": mode,
                    "usage": usage.last_call,
                }
                return valid[:n], meta
            if reasks >= llm.max_reasks:
                raise bad[0].error_for(label, reasks)
            reasks += 1
            usage.count("reasks")
            conversation = reask_messages(messages, bad[0])

    async def _complete(
        self, request: dict[str, Any], n: int, usage: UsageRecorder, label: str
    ) -> Any:
        llm = self._need_llm()
        assert self._chat_slots is not None and self._transport is not None
        transport = self._transport
        async with self._chat_slots:
            response, cost = await call_with_retries(
                lambda: transport.chat(llm, request, n),
                llm.max_retries,
                usage,
                what=f"{label} ({llm.model})",
                secret=llm.api_key,
                endpoint=self._endpoint(llm.model, llm.api_base),
            )
        usage.add_response(response, cost=cost)
        return response

    async def embed(
        self, texts: Sequence[str], *, label: str = "embeddings", ledger: UsageLedger | None = None
    ) -> list[list[float]]:
        """Embeddings of texts, each cached by (model, text); batches the misses.

        Args:
            texts: the texts to embed.
            label: the name their usage is counted under.
            ledger: a second usage ledger to count in (e.g. one sample's), besides the run's.
        """
        vectors = await self._vectors(texts, label, ledger)
        # Copies: the memo may hand the same vector out again.
        return [v.tolist() if isinstance(v, np.ndarray) else list(v) for v in vectors]

    async def embed_array(
        self, texts: Sequence[str], *, label: str = "embeddings", ledger: UsageLedger | None = None
    ) -> np.ndarray:
        """`embed` as one float64 matrix, a row per text (the same numbers): vectors read
        from the cache's bytes are stacked without becoming lists of floats first.

        Args:
            texts: the texts to embed.
            label: the name their usage is counted under.
            ledger: a second usage ledger to count in (e.g. one sample's), besides the run's.
        """
        vectors = await self._vectors(texts, label, ledger)
        if not vectors:
            return np.empty((0, 0))
        return np.vstack([np.asarray(v, dtype=np.float64) for v in vectors])

    async def _vectors(
        self, texts: Sequence[str], label: str, ledger: UsageLedger | None
    ) -> list[list[float] | np.ndarray]:
        """The texts' vectors as found: lists, or read-only arrays from the cache's bytes;
        the caller must not change them."""
        config = self.embeddings
        if config is None:
            raise JudgeError(
                "this metric needs an embedding model: pass embeddings=Embeddings(...)"
            )
        self._bind_loop()
        usage = self._tally(label, ledger)
        server = server_identity(config.model, config.api_base, config.cache_as)
        material = {"kind": "embedding", "server": server, "model": config.model}
        spec = ("embedding", server, config.model)
        template = self._key_templates.get(spec)
        if template is None:
            template = KeyTemplate(material, "text")
            self._remember_template(spec, template)
        # A text's canonical JSON is json's escape of it (see _TEXT_JSON).
        keys = [template.key(_TEXT_JSON(t) if type(t) is str else canonical_json(t)) for t in texts]
        vectors: dict[str, list[float] | np.ndarray] = {}
        todo: dict[str, dict[str, Any]] = {}
        waiting: dict[str, asyncio.Future[Any]] = {}
        hits = 0
        for key, text in zip(keys, texts, strict=True):
            entry = self._lookup(key, label, None, "embedding", config.model, server)
            if entry is not None:
                vectors[key] = entry
                hits += 1
            elif key in self._inflight:
                # Another row is embedding this text now: share its request, as chat does.
                waiting[key] = self._inflight[key]
            else:
                todo.setdefault(key, {**material, "text": text})
        if hits:
            usage.count("cache_hits", hits)  # once, not a count per text
        pending = list(todo.items())
        batches = [
            pending[i : i + config.batch_size] for i in range(0, len(pending), config.batch_size)
        ]
        if batches:
            loop = asyncio.get_running_loop()
            mine = {key: loop.create_future() for key in todo}
            self._inflight.update(mine)
            try:
                await _own_task()
                for found in await asyncio.gather(
                    *(self._embed_batch(b, usage, label) for b in batches)
                ):
                    vectors.update(found)
                if self._writes is not None and self._inflight.keys() <= mine.keys():
                    self._writes.flush()  # no other request in flight: stored before returning
            except BaseException as exc:
                for future in mine.values():
                    if not future.done():
                        future.set_exception(exc)
                        future.exception()  # retrieved: nobody else may be waiting
                raise
            finally:
                for key, future in mine.items():
                    if self._inflight.get(key) is future:
                        del self._inflight[key]
                    if not future.done():
                        future.set_result(vectors[key])
        for key, future in waiting.items():
            vectors[key] = await asyncio.shield(future)
        return [vectors[key] for key in keys]

    async def _embed_batch(
        self, batch: list[tuple[str, dict[str, Any]]], usage: UsageRecorder, label: str
    ) -> dict[str, list[float]]:
        config = self.embeddings
        assert config is not None and self._transport is not None
        assert self._embed_slots is not None and self._chat_slots is not None
        transport = self._transport
        async with self._embed_slots, self._chat_slots:
            response, cost = await call_with_retries(
                lambda: transport.embed(config, [request["text"] for _, request in batch]),
                config.max_retries,
                usage,
                what=f"{label} ({config.model})",
                secret=config.api_key,
                endpoint=self._endpoint(config.model, config.api_base),
            )
        usage.add_response(response, cost=cost)
        found = {}
        for (key, request), item in zip(batch, response.data, strict=True):
            vector = [
                float(x) for x in (item["embedding"] if isinstance(item, dict) else item.embedding)
            ]
            found[key] = vector
            if self._writes is not None:
                self._memo.forget(key)
                # In the turn's transaction with the chat judgments, not one per vector.
                self._writes.put(
                    CacheEntry(
                        key=key,
                        kind="embedding",
                        request=request,
                        response=vector,
                        model=config.model,
                        resolved_model=getattr(response, "model", None),
                        created=time.time(),
                    ),
                    alone=False,
                )
        return found


@dataclass(frozen=True)
class _Validated:
    """A cached chat response remembered (`ResponseMemo`) with its replies as validated
    against `output`: a repeated request skips the validation (its pydantic model
    validators run Python code for every reply) as it skips the lookup and the decoding."""

    response: Any  # the decoded response, for a request of the same key and another output
    output: type[BaseModel]
    replies: tuple[BaseModel, ...]


# canonical_json of a string: json's C function that escapes one (no ASCII escapes).
_TEXT_JSON = json.encoder.encode_basestring

# Whose output models' replies are handed out again once validated (`_Validated`): the
# built-in judges', whose callers copy rather than change them (model_copy, model_dump); a
# custom judge's code may change what it gets, so its replies are validated, made anew,
# every time.
_BUILT_IN_JUDGES = "judge.metrics.judges"


def _exactly(value: Any) -> tuple[Any, ...]:
    """A setting with what equality ignores and its JSON keeps: 0, 0.0, -0.0 and False are
    equal here but encode apart in a key."""
    if type(value) is float:
        return (float, value, math.copysign(1.0, value))
    return (type(value), value)


# More key templates than a run makes (judges x output sizes): a bound, not a working size.
_KEY_TEMPLATES = 4096


def _chat_material(
    llm: LLM,
    server: str,
    messages: Sequence[Message] | None,
    output: type[BaseModel],
    n: int,
    prompt: PromptRef | None,
) -> dict[str, Any]:
    """What a chat request's key is the hash of (`judge.cache.store.cache_key`), and what its
    cache entry records as the request; messages None for a key template's fixed part."""
    material: dict[str, Any] = {
        "kind": "chat",
        "server": server,
        "model": llm.model,
        "schema": schema_of(output),
        "n": n,
        "temperature": llm.temperature,
        "seed": llm.seed,
        "max_tokens": llm.max_tokens,
        "prompt": prompt.name if prompt else None,
        "prompt_version": prompt.version if prompt else None,
    }
    if messages is not None:
        material["messages"] = list(messages)
    return material


async def _own_task() -> None:
    """Let the loop turn once before a request. A coroutine started eagerly (see
    `judge.aio.start_eagerly`) runs until its first wait inside its caller's task; the request's
    code (timeouts, connection pools) may hold on to the current task, so it must start
    in the coroutine's own. Cache hits never get here."""
    await asyncio.sleep(0)


def check_window(llm: LLM, messages: list[Message], label: str) -> None:
    """Refuse a request that cannot fit the model, before paying for it."""
    limit = llm.context_window or context_window(llm.model)
    if limit is None:
        return
    tokens = sum(estimate_tokens(str(m.get("content", ""))) for m in messages)
    if tokens + (llm.max_tokens or 0) > limit:
        reply = f" plus max_tokens {llm.max_tokens:,}" if llm.max_tokens else ""
        raise ContextWindowError(
            f"{label}: the request is about {tokens:,} tokens{reply}, over {llm.model}'s "
            f"context window of {limit:,}; shorten or drop contexts (it was not sent)"
        )
