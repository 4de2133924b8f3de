"""`judge.ray.evaluate`: judge a `ray.data.Dataset` with a pool of actors.

Each actor holds one LLM session (its own connections and concurrency limit) and one
cache file in `cache_dir`; rows go to the actors in batches through `map_batches`, and
each row is built and scored by the code of a plain `judge eval`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from judge.cache.store import CacheMode
from judge.errors import InputFormatError, JudgeError
from judge.llm.config import LLM, Embeddings
from judge.metrics.registry import Metric
from judge.ray.actor import NUMBER, JudgeSpec, RowJudge
from judge.ray.caches import ActorCaches
from judge.run.data import resolve_columns
from judge.run.evaluate import split_metrics
from judge.run.score import MetricLike, resolve_metrics

DEFAULT_CONCURRENCY = 2
DEFAULT_BATCH_SIZE = 64
# An actor mostly waits on the judge server: a whole CPU each would leave none for the
# dataset's own read and map tasks on a small cluster, which then stall.
DEFAULT_NUM_CPUS = 0.5


def require_ray() -> Any:
    """The `ray` module, or an error saying how to install it."""
    try:
        import ray
        import ray.data  # the Data library comes with the extra ray[data] only
    except ImportError as exc:
        raise JudgeError(
            f"judging on Ray needs ray[data], which is not installed ({exc}); install "
            "judge[ray]: pip install 'judge[ray]'"
        ) from None
    return ray


def plan(
    metrics: Sequence[MetricLike] | str | None,
    columns: Mapping[str, str],
    llm: LLM | None,
    embeddings: Embeddings | None,
    custom: Mapping[str, Metric] | None,
) -> tuple[list[Metric], list[str]]:
    """(LLM-judged metrics, retrieval metric names) chosen as `judge.evaluate` chooses them."""
    judged_names, retrieval = split_metrics(metrics, "retrieved_ids" in columns)
    if llm is None and judged_names is None and retrieval:
        judged_names = []  # no judge model given: the default is the retrieval metrics alone
    if llm is None and (judged_names is None or judged_names):
        raise InputFormatError("LLM-judged metrics need llm=judge.LLM(model=...)")
    if llm is None:
        return [], retrieval
    if not isinstance(llm, LLM):
        raise JudgeError(
            "judge.ray.evaluate needs llm=judge.LLM(model=...): each actor opens its own "
            "session, so an LLMSession cannot be shared"
        )
    judged = resolve_metrics(judged_names, embeddings=embeddings is not None, custom=custom)
    return judged, retrieval


def make_spec(
    metrics: Sequence[MetricLike] | str | None,
    columns: dict[str, str],
    models: tuple[LLM | None, Embeddings | None],
    custom: Mapping[str, Metric] | None,
    caches: ActorCaches,
    row_column: str,
    packed: bool = False,
) -> JudgeSpec:
    """What the actors need, with the metrics chosen as `judge.evaluate` chooses them."""
    llm, embeddings = models
    judged, retrieval = plan(metrics, columns, llm, embeddings, custom)
    return JudgeSpec(llm, embeddings, judged, retrieval, columns, caches, row_column, packed)


def map_rows(
    dataset: Any, spec: JudgeSpec, concurrency: int, batch_size: int, **remote: Any
) -> Any:
    """The dataset with each batch judged by a pool of `concurrency` `RowJudge` actors."""
    judged = dataset.map_batches(
        RowJudge,
        fn_constructor_args=(spec,),
        batch_format="pyarrow",
        batch_size=batch_size,
        concurrency=concurrency,
        **remote,
    )
    # An actor's own error (LLMConfigError: a refused key, no server) reaches the caller as
    # itself, not as Ray's UserCodeException, which keeps only its text. This dataset's
    # context is its own copy: the caller's DataContext is left alone.
    judged.context.raise_original_map_exception = True
    return judged


def evaluate(
    dataset: Any,
    metrics: Sequence[MetricLike] | str | None = None,
    *,
    llm: LLM | None = None,
    embeddings: Embeddings | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    cache_mode: CacheMode = "read-write",
    also_read: Sequence[str | os.PathLike[str]] = (),
    concurrency: int = DEFAULT_CONCURRENCY,
    column_map: Mapping[str, str] | None = None,
    custom: Mapping[str, Metric] | None = None,
    row_column: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    num_cpus: float = DEFAULT_NUM_CPUS,
) -> Any:
    """Judge every row of a Ray dataset with a pool of actors; returns a new (lazy) dataset.

    Args:
        dataset: a `ray.data.Dataset` with question, answer, contexts, ground_truth (or
            RAGAS's names, or mapped with `column_map`) and optionally retrieval columns.
        metrics: metric names or `Metric` objects, as for `judge.evaluate`.
        llm: the judge model; needed for LLM-judged metrics.
        embeddings: the embedding model (for answer_relevancy).
        cache_dir: a directory for the actors' caches: each actor writes its own
            `actor-K.sqlite` and looks judgments up in every cache file there, so a rerun
            is served from them; `judge cache merge` joins them. None: no cache.
        cache_mode: "read-write" (default), "replay" (never call a model), "record" or
            "off", as for `judge.Cache`.
        also_read: other cache files to look judgments up in (e.g. a plain run's).
        concurrency: the number of actors, each with its own session; each has at most
            `llm.max_concurrency` requests in flight.
        column_map: `{field: column}` for columns with other names, as for
            `judge.evaluate`.
        custom: extra metrics by name, so `metrics` can name them.
        row_column: a column holding each row's number (results.jsonl's `row`, and the
            id of a row without an id column). Default: Ray's
            `monotonically_increasing_id()`, unique but neither consecutive nor the same
            from one run to the next, since Ray Data does not keep a dataset's order; write
            an index column with the data for numbers that last (`judge eval --ray` numbers
            the rows of its file as a plain run does).
        batch_size: rows per batch sent to an actor; an actor judges a batch's rows
            concurrently.
        num_cpus: CPUs Ray reserves for each actor.

    Returns:
        The dataset's columns plus `row`, a float column per metric (NaN when undefined),
        `<metric>_reason` (why it is NaN, else null), `evidence` (JSON text) and `result`
        (the row's results.jsonl line, as `judge eval` writes it), in an order Ray
        chooses (with `row_column`, sort by `row` for input order). A failed judge
        gives NaN with reason `judge_error`, as in `judge.evaluate`; an `LLMConfigError`
        stops the run (Ray raises it wrapped in a `RayTaskError`, itself an
        `LLMConfigError`).

    Raises:
        judge.errors.JudgeError: ray[data] is not installed, a column is missing or
            would be overwritten, or a metric is unknown.
    """
    require_ray()
    present = list(dataset.columns())
    names = [c for c in present if c != row_column]
    columns = resolve_columns(names, column_map)
    if row_column is None:
        # Ray Data does not keep a dataset's order: numbers 0, 1, ... would mean nothing.
        from ray.data.expressions import monotonically_increasing_id

        dataset, row_column = dataset.with_column(NUMBER, monotonically_increasing_id()), NUMBER
    elif row_column not in present:
        raise InputFormatError(
            f"row_column {row_column!r} is not a column of the dataset "
            f"(columns: {', '.join(present)})"
        )
    caches = ActorCaches.of(cache_dir, cache_mode, also_read)
    spec = make_spec(metrics, columns, (llm, embeddings), custom, caches, row_column)
    clash = sorted(set(spec.result_columns()) & set(present) - {row_column})
    if clash:
        raise InputFormatError(
            f"the dataset already has column(s) {', '.join(clash)}, which the results "
            "would overwrite; rename them first (Dataset.rename_columns)"
        )
    return map_rows(dataset, spec, concurrency, batch_size, num_cpus=num_cpus)
