"""`RagJudge`: the judge a test session shares (the `rag_judge` fixture): one model, one
cache and one limit of requests in flight for every test, sync or async.

Its LLM session lives on an event loop of its own, in a daemon thread: sync tests wait for
it, async tests await it from their own loop (whatever runs them: anyio, pytest-asyncio),
and the session's connections and the cache's batched writes stay on one loop all session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from judge.errors import JudgeError, is_replay_miss

if TYPE_CHECKING:
    from judge.cache.store import Cache
    from judge.llm.config import LLM, Embeddings
    from judge.llm.session import LLMSession
    from judge.pytest_plugin.assertions import Bound
    from judge.pytest_plugin.conversation import ConversationResult
    from judge.run.results import EvaluationResult
    from judge.run.score import SampleResult

T = TypeVar("T")
Mode = Literal["read-write", "replay", "record"]


class ReplayMiss(JudgeError):
    """A strict replay (`--judge-replay`) met a judgment that was never recorded."""


class JudgeUnavailable(JudgeError):
    """The judge model cannot be used (no server, a refused key, an unknown model): every
    later call of the session fails at once with the first one's reason."""


# The plugin's options, for the keyword arguments library messages name (judge.cli.words).
PYTEST_FLAGS = {
    "llm": "--judge-model",
    "model": "--judge-model",
    "embeddings": "--judge-embedding-model",
    "api_base": "--judge-api-base",
    "cache": "--judge-cache",
    "cache_as": "--judge-cache-as",
    "concurrency": "--judge-concurrency",
}
PYTEST_EMBEDDINGS = {"model": "--judge-embedding-model", "api_base": "--judge-api-base"}
# The CLI's flags some library messages name (the cache's: "give --cache a new path"), as
# the plugin's options.
CLI_OPTIONS = {
    "--model": "--judge-model",
    "--api-base": "--judge-api-base",
    "--embedding-model": "--judge-embedding-model",
    "--cache": "--judge-cache",
    "--cache-as": "--judge-cache-as",
    "--concurrency": "--judge-concurrency",
    "--replay": "--judge-replay",
}
_CLI_OPTION = re.compile(r"(?<![\w-])--[a-z][\w-]*(?![\w-])")


def pytest_words(message: str) -> str:
    """A library message with its keyword arguments and the CLI's flags written as the
    plugin's options."""
    from judge.cli.words import cli_words

    text = cli_words(message, PYTEST_FLAGS, PYTEST_EMBEDDINGS)
    return _CLI_OPTION.sub(lambda m: CLI_OPTIONS.get(m.group(), m.group()), text)


@dataclass(frozen=True)
class JudgeSettings:
    """What the plugin's options and configuration say about the judge.

    Attributes:
        model: the judge model (`--judge-model`), None when not configured.
        api_base: its server (`--judge-api-base`).
        embedding_model: the embedding model (`--judge-embedding-model`), for
            answer_relevancy.
        cache: the cache file (`--judge-cache`).
        cache_as: the server identity the recordings are keyed under (`--judge-cache-as`).
        concurrency: the judge's requests in flight at once (`--judge-concurrency`); None:
            `judge.LLM`'s default.
        mode: "read-write" (hits are replayed, misses asked and stored), "replay"
            (`--judge-replay`: a miss fails the test, nothing is sent) or "record"
            (`--judge-record`: every judgment asked again and stored).
        project: the rootdir's pyproject.toml, whose `[tool.judge] metrics-modules` give
            metrics that tests may name (the project's tests run its code anyway).
        prompts: a prompt set's folder (`--judge-prompts`), whose files replace the
            built-in prompts of their names; None: the built-in prompts.
    """

    model: str | None = None
    api_base: str | None = None
    embedding_model: str | None = None
    cache: Path = Path(".judge/cache.sqlite")
    cache_as: str | None = None
    concurrency: int | None = None
    mode: Mode = "read-write"
    project: Path | None = None
    prompts: Path | None = None

    def models(self) -> tuple[LLM | None, Embeddings | None]:
        """The judge and embedding models these settings name (None: not set)."""
        from judge.llm.config import LLM, Embeddings

        llm = None
        if self.model:
            llm = LLM(model=self.model, api_base=self.api_base, cache_as=self.cache_as)
            if self.concurrency is not None:
                llm = dataclasses.replace(llm, max_concurrency=max(1, self.concurrency))
        embeddings = (
            Embeddings(model=self.embedding_model, api_base=self.api_base, cache_as=self.cache_as)
            if self.embedding_model
            else None
        )
        return llm, embeddings


Listener = Callable[[str, Any], None]


class RagJudge:
    """A configured judge for tests: `score` one sample, `score_conversation` a chat turn
    by turn, `evaluate` many, assert on them.

    Made by the `rag_judge` fixture from the plugin's options; one per test session (per
    worker under pytest-xdist, all sharing one cache file).
    """

    def __init__(self, settings: JudgeSettings, listener: Listener | None = None):
        if settings.model is None:
            raise JudgeError(
                "rag_judge needs a judge model: pass --judge-model (e.g. "
                "--judge-model openai/gpt-4o-mini), or set JUDGE_MODEL, judge_model in "
                "pytest's ini options, or model in pyproject.toml's [tool.judge]"
            )
        from judge.cache.store import Cache
        from judge.llm.session import LLMSession
        from judge.metrics.prompts import load_prompt_set, load_prompts

        self.settings = settings
        # Read once, as a run reads its prompts: every test judges with the same versions.
        self.prompts = (
            load_prompts() if settings.prompts is None else load_prompt_set(settings.prompts)
        )
        llm, self.embeddings = settings.models()
        assert llm is not None  # a model is set
        self.llm: LLM = llm
        if settings.mode == "replay" and not settings.cache.is_file():
            raise JudgeError(
                f"--judge-cache {settings.cache} does not exist: --judge-replay reads "
                "judgments recorded before. Record them first (pytest --judge-record, or a "
                "run without --judge-replay), or give the --judge-cache that holds them"
            )
        settings.cache.parent.mkdir(parents=True, exist_ok=True)
        self.cache: Cache = Cache(settings.cache, mode=settings.mode)
        self.session: LLMSession = LLMSession(
            self.llm, embeddings=self.embeddings, cache=self.cache
        )
        self._listener = listener
        self._unavailable: str | None = None  # why the judge failed, once it has
        self._custom: dict[str, Any] | None = None  # the project's metrics, read once
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="judge-rag_judge", daemon=True
        )
        self._thread.start()

    # -- running on the judge's own loop ------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the judge's loop and wait for it (from sync code)."""
        self._check_available(coro)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException as exc:  # Ctrl-C included: stop the judgment, not just the wait
            future.cancel()
            raise self._in_our_words(exc) from None

    async def _arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the judge's loop and await it from the caller's loop."""
        self._check_available(coro)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return await asyncio.wrap_future(future)
        except BaseException as exc:
            future.cancel()
            raise self._in_our_words(exc) from None

    def _check_available(self, coro: Coroutine[Any, Any, Any]) -> None:
        if self._unavailable is not None:
            coro.close()
            raise JudgeUnavailable(
                f"the judge failed before in this session, so this test was not judged: "
                f"{self._unavailable}"
            )

    def _in_our_words(self, exc: BaseException) -> BaseException:
        """A judge error in the plugin's options; a model that cannot be used is
        remembered, so that later tests fail at once rather than wait for it again."""
        from judge.errors import LLMConfigError

        if not isinstance(exc, JudgeError):
            return exc
        message = pytest_words(str(exc))
        if isinstance(exc, LLMConfigError):
            self._unavailable = message
            return JudgeUnavailable(message)
        exc.args = (message,)
        return exc

    def close(self) -> None:
        """Stop what is still running, flush the cache's writes, close the connections
        and the loop."""
        if self._loop.is_closed():
            return

        async def shut_down() -> None:
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:  # left by an interrupted test
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            await self.session.aclose()

        try:
            asyncio.run_coroutine_threadsafe(shut_down(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
            self.cache.close()

    # -- scoring ------------------------------------------------------------------------

    async def _score(
        self,
        question: str,
        answer: str | None,
        contexts: Sequence[str],
        ground_truth: str | None,
        metrics: Sequence[Any] | None,
        sample_id: str | None,
    ) -> SampleResult:
        from judge.metrics.resolve import resolve_metrics
        from judge.run.score import score_sample
        from judge.samples import Sample

        sample = Sample.create(question, answer, contexts, ground_truth, sample_id)
        chosen = resolve_metrics(
            metrics, embeddings=self.embeddings is not None, custom=self.project_metrics()
        )
        return await score_sample(sample, chosen, self.session, prompts=self.prompts)

    def project_metrics(self) -> dict[str, Any]:
        """The metrics of the project's `[tool.judge] metrics-modules` and of installed
        plugins, by name (read on first use)."""
        if self._custom is None:
            from judge.metrics.custom import configured_modules
            from judge.metrics.plugins import extra_metrics

            project = self.settings.project
            named = [str(project)] if project and configured_modules(project) else []
            self._custom = {n: found.metric for n, found in extra_metrics(named).items()}
        return self._custom

    def _named(self, metrics: Sequence[Any] | None) -> list[Any] | None:
        """Metric names of the project's own metrics as their `Metric` objects."""
        if metrics is None:
            return None
        custom = self.project_metrics()
        listed = [metrics] if isinstance(metrics, str) else list(metrics)
        return [custom.get(m, m) if isinstance(m, str) else m for m in listed]

    def score(
        self,
        question: str,
        answer: str | None = None,
        contexts: Sequence[str] = (),
        ground_truth: str | None = None,
        *,
        metrics: Sequence[Any] | None = None,
        sample_id: str | None = None,
    ) -> SampleResult:
        """Judge one sample, as `judge.score` with the session's model and cache.

        Args:
            question: the user's question.
            answer: the generated answer.
            contexts: the retrieved contexts, in retrieval order.
            ground_truth: the reference answer (needed by context_recall).
            metrics: metric names; default faithfulness, answer_relevancy (with an
                embedding model), context_precision and context_recall.
            sample_id: a name for the sample in messages and the report.

        Raises:
            ReplayMiss: under `--judge-replay`, a judgment was never recorded.
        """
        result = self._run(
            self._score(question, answer, contexts, ground_truth, metrics, sample_id)
        )
        return self._judged(result)

    async def ascore(
        self,
        question: str,
        answer: str | None = None,
        contexts: Sequence[str] = (),
        ground_truth: str | None = None,
        *,
        metrics: Sequence[Any] | None = None,
        sample_id: str | None = None,
    ) -> SampleResult:
        """`score`, awaited from an async test."""
        result = await self._arun(
            self._score(question, answer, contexts, ground_truth, metrics, sample_id)
        )
        return self._judged(result)

    def _judged(self, result: SampleResult) -> SampleResult:
        """Fail on a replay miss; tell the plugin what was judged."""
        sample = result.sample
        self._check_replay(
            result.errors.items(), sample.id if sample.id is not None else sample.question
        )
        if self._listener is not None:
            self._listener("sample", result)
        return result

    def _check_replay(self, errors: Collection[tuple[str, str]], where: Any) -> None:
        for metric, error in errors:
            if is_replay_miss(error):
                raise ReplayMiss(
                    pytest_words(
                        f"{metric} of {where!r}: {error}\nIn pytest: record it by running "
                        "these tests once without --judge-replay (or with --judge-record) "
                        f"and the same --judge-model, then keep {self.settings.cache} with "
                        "the tests"
                    )
                )

    # -- a conversation, turn by turn ---------------------------------------------------

    async def _score_conversation(
        self, conversation: Any, metrics: Sequence[Any] | None, conversation_id: str | None
    ) -> ConversationResult:
        from judge import aio
        from judge.metrics.judgments import Conversations
        from judge.metrics.resolve import resolve_metrics
        from judge.pytest_plugin.conversation import ConversationResult, turn_samples
        from judge.run.score import score_sample

        cid, samples = turn_samples(conversation, conversation_id)
        chosen = resolve_metrics(
            metrics, embeddings=self.embeddings is not None, custom=self.project_metrics()
        )
        # One registry for the conversation's turns: a later turn rests on the earlier
        # turns' claims and verdicts, their own rows' judgments, never asked again.
        shared = Conversations()
        turns = await aio.gather_or_cancel(
            score_sample(s, chosen, self.session, prompts=self.prompts, conversations=shared)
            for s in samples
        )
        return ConversationResult(cid, list(turns))

    def score_conversation(
        self,
        conversation: Any,
        *,
        metrics: Sequence[Any] | None = None,
        conversation_id: str | None = None,
    ) -> ConversationResult:
        """Judge each assistant turn of a conversation with the conversation before it, as
        `judge eval` judges a line of a conversations file.

        Args:
            conversation: `{"id": ..., "turns": [{"role": "user", "content": ...},
                {"role": "assistant", "content": ..., "contexts": [...]}, ...]}` (or
                DeepEval's or RAGAS's shape), or the list of messages alone.
            metrics: metric names, as in `score`; `supported_by_history` and
                `knowledge_retention` are for turns.
            conversation_id: its id, when the record has none (default "conversation").

        Returns:
            A `ConversationResult`: `turns`, one `SampleResult` per assistant turn in
            order, each answer verdict naming its `source` (`contexts`, `history` with
            the message's `turn` and `role`, or none); `judge.assert_scores` checks every
            turn.

        Raises:
            judge.errors.InputFormatError: the conversation cannot be read.
            ReplayMiss: under `--judge-replay`, a judgment was never recorded.
        """
        return self._judged_conversation(
            self._run(self._score_conversation(conversation, metrics, conversation_id))
        )

    async def ascore_conversation(
        self,
        conversation: Any,
        *,
        metrics: Sequence[Any] | None = None,
        conversation_id: str | None = None,
    ) -> ConversationResult:
        """`score_conversation`, awaited from an async test."""
        return self._judged_conversation(
            await self._arun(self._score_conversation(conversation, metrics, conversation_id))
        )

    def _judged_conversation(self, result: ConversationResult) -> ConversationResult:
        """Fail on a replay miss of any turn; tell the plugin what was judged."""
        for turn in result.turns:
            self._check_replay(turn.errors.items(), turn.sample.id)
        if self._listener is not None:
            self._listener("conversation", result)
        return result

    # -- many samples -------------------------------------------------------------------

    async def _evaluate(
        self, data: Any, metrics: Sequence[Any] | None, column_map: Mapping[str, str] | None
    ) -> EvaluationResult:
        from judge.run.evaluate import aevaluate

        return await aevaluate(
            data,
            metrics=self._named(metrics),
            llm=self.session,
            column_map=column_map,
            progress=False,
            prompts=self.settings.prompts,
        )

    def evaluate(
        self,
        data: Any,
        *,
        metrics: Sequence[Any] | None = None,
        column_map: Mapping[str, str] | None = None,
    ) -> EvaluationResult:
        """Evaluate many samples, as `judge.evaluate` with the session's model and cache.

        Args:
            data: a list of dicts, a path (.jsonl, .csv, .parquet, a saved dataset), a
                `datasets.Dataset` or a pandas DataFrame.
            metrics: metric names, LLM-judged and retrieval ones.
            column_map: `{field: column}` for columns with other names.

        Raises:
            ReplayMiss: under `--judge-replay`, a judgment was never recorded.
        """
        return self._evaluated(self._run(self._evaluate(data, metrics, column_map)))

    async def aevaluate(
        self,
        data: Any,
        *,
        metrics: Sequence[Any] | None = None,
        column_map: Mapping[str, str] | None = None,
    ) -> EvaluationResult:
        """`evaluate`, awaited from an async test."""
        return self._evaluated(await self._arun(self._evaluate(data, metrics, column_map)))

    def _evaluated(self, result: EvaluationResult) -> EvaluationResult:
        if self.settings.mode == "replay" and result.rows_with_judge_errors:
            for row in result.rows:
                self._check_replay(row.errors.items(), row.id)
        if self._listener is not None:
            self._listener("evaluation", result)
        return result

    # -- judged and asserted at once ----------------------------------------------------

    def assert_scores(
        self,
        sample: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        thresholds: Mapping[str, float | Bound] | None = None,
        *,
        metrics: Sequence[Any] | None = None,
        allow_nan: bool | Collection[str] = False,
        **named: float | Bound,
    ) -> SampleResult | ConversationResult:
        """Judge a sample (a mapping with question, answer, contexts, ground_truth, id),
        or a conversation (`{"id": ..., "turns": [...]}`, every assistant turn), with the
        metrics its thresholds name, then `judge.assert_scores` it.

        Args:
            sample: the sample's fields; `id` names it in messages. Or a conversation, as
                `score_conversation` takes it: every assistant turn must meet the
                thresholds, and a failure shows the evidence of each failing turn.
            thresholds: `{metric: threshold}` for names that are not identifiers.
            metrics: the metrics to judge; default those the thresholds name.
            allow_nan: as in `judge.assert_scores`.
            **named: `metric=threshold`, as in `judge.assert_scores`.

        Returns:
            The judged `SampleResult` (a `ConversationResult` for a conversation), when
            every threshold is met.
        """
        __tracebackhide__ = True
        from judge.errors import InputFormatError
        from judge.fields import cell_list
        from judge.pytest_plugin.assertions import assert_scores, bounds
        from judge.pytest_plugin.conversation import is_conversation_input

        wanted = bounds(thresholds, named)
        chosen = list(metrics) if metrics is not None else list(wanted)
        if is_conversation_input(sample):
            judged = self.score_conversation(sample, metrics=chosen)
            assert_scores(judged, wanted, allow_nan=allow_nan)
            return judged
        if not isinstance(sample, Mapping) or "question" not in sample:
            raise JudgeError(
                "rag_judge.assert_scores takes a sample: a mapping with question, answer, "
                "contexts and ground_truth, or a conversation: a mapping with its messages "
                "under 'turns'; to assert on a result, use judge.assert_scores"
            )
        try:  # a CSV test set's cell holds the list as JSON text, as `judge eval` reads it
            contexts = cell_list(sample.get("contexts"))
        except ValueError:
            raise InputFormatError(
                "contexts must be a list of strings (a JSON list in a CSV cell), got "
                f"{sample.get('contexts')!r:.80}"
            ) from None
        result = self.score(
            sample["question"],
            sample.get("answer"),
            contexts or (),
            sample.get("ground_truth"),
            metrics=chosen,
            sample_id=sample.get("id"),
        )
        assert_scores(result, wanted, allow_nan=allow_nan)
        return result
