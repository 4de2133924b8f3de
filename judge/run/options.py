"""How a run is made: `RunSpec`, the one value each front end builds once (`judge.evaluate`,
`judge.experiment`, the CLI) and planning and the executors read; and `RunOptions`, the
keyword arguments of it that `judge.evaluate` takes and the functions built on it pass
through (`judge.agreement`, `judge.probe`): `**options: Unpack[RunOptions]`."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from judge.cache.store import Cache
from judge.llm.config import LLM, Embeddings
from judge.llm.session import LLMSession
from judge.metrics.resolve import MetricLike
from judge.run.gates import Gates
from judge.run.progress import DEFAULT_INTERVAL
from judge.run.score import judge_models, make_session
from judge.run.shard import Shard, parse_shard

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pydantic depends on typing_extensions
    from typing_extensions import Unpack


class RunOptions(TypedDict, total=False):
    """Keyword arguments as in `judge.evaluate`, which documents them; any left out take
    evaluate's defaults."""

    embeddings: Embeddings | None
    cache: Cache | str | os.PathLike[str] | None
    column_map: Mapping[str, str] | None
    concurrency: int | None
    progress: bool
    progress_interval: float


@dataclass(frozen=True)
class RunSpec:
    """What the user decided about a run, besides its data: built once by a front end from
    its keyword arguments or flags, read by planning and the executors.

    Attributes:
        metrics: names or `Metric` objects; None for the default metrics.
        llm: the judge model (or a session of one); None for retrieval metrics alone.
        embeddings: the embedding model, or None.
        cache: a `Cache` or its path, or None.
        concurrency: samples in flight at once; None: the judge's `max_concurrency`.
        checkpoint: the JSONL file finished rows are appended to, or None.
        progress: whether progress is shown on stderr.
        progress_interval: seconds between status lines when stderr is not a terminal.
        shard: the rows this run judges (None: all of them): a `Shard`, or "I/N" (as
            `judge.evaluate` takes it), made a `Shard` when the spec is made.
        gates: the gates the result will be held to, or None: planning refuses one that
            names a metric the run does not compute, before any row is judged.
        prompts: a prompt set's folder, whose files replace the built-in prompts of their
            names (`judge.metrics.prompts.load_prompt_set`), or None for the built-ins.
    """

    metrics: Sequence[MetricLike] | None = None
    llm: LLM | LLMSession | None = None
    embeddings: Embeddings | None = None
    cache: Cache | str | os.PathLike[str] | None = None
    concurrency: int | None = None
    checkpoint: str | os.PathLike[str] | None = None
    progress: bool = True
    progress_interval: float = DEFAULT_INTERVAL
    shard: Shard | str | None = None  # "I/N" is parsed into a Shard
    gates: Gates | None = None
    prompts: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        # Checked once, before any data is read: a malformed shard ("I/N" parsed here),
        # models beside a session that has its own.
        if self.shard is not None:
            object.__setattr__(self, "shard", parse_shard(self.shard))
        judge_models(self.llm, self.embeddings, self.cache)

    @property
    def part(self) -> Shard | None:
        """The shard, as a `Shard` (None: every row)."""
        assert not isinstance(self.shard, str)  # parsed when the spec was made
        return self.shard

    def models(self) -> tuple[LLM | None, Embeddings | None]:
        """The judge and embedding models (a session's own when `llm` is one)."""
        return judge_models(self.llm, self.embeddings, self.cache)

    def session(self) -> LLMSession | None:
        """The session to judge with: `llm` itself when it is one, else a new one the
        caller closes (`owns_session`); None without a judge model."""
        return make_session(self.llm, self.embeddings, self.cache) if self.llm else None

    def owns_session(self, session: LLMSession | None) -> bool:
        """Whether the caller made `session` (and so closes it), rather than the user."""
        return session is not None and session is not self.llm


__all__ = ["RunOptions", "RunSpec", "Unpack"]
