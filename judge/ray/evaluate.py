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
from judge.metrics.resolve import MetricLike
from judge.ray.actor import NUMBER, JudgeSpec, RowJudge
from judge.ray.caches import ActorCaches
from judge.run.data import Row, resolve_columns
from judge.run.gates import Gates
from judge.run.plan import RunPlan, plan_run

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


def ray_plan(
    metrics: Sequence[MetricLike] | str | None,
    columns: Mapping[str, str],
    source: str,
    models: tuple[LLM | None, Embeddings | None],
    rows: Sequence[Row] | None = None,
    gates: Gates | None = None,
) -> tuple[RunPlan, list[str]]:
    """The run's plan (and its rows' hashes), as `judge.evaluate` makes it (`gates`
    checked against its metrics); each actor opens its own session, so the judge is an
    `LLM`, never a shared session."""
    llm, embeddings = models
    if llm is not None and not isinstance(llm, LLM):
        raise JudgeError(
            "judge.ray.evaluate needs llm=judge.LLM(model=...): each actor opens its own "
            "session, so an LLMSession cannot be shared"
        )
    return plan_run(
        rows, columns, source, metrics=metrics, llm=llm, embeddings=embeddings, gates=gates
    )


def make_spec(
    plan: RunPlan, caches: ActorCaches, row_column: str, packed: bool = False
) -> JudgeSpec:
    """What the actors need: the plan's models, metrics, columns and prompts. The spec
    holds them rather than the plan: Ray sends it with cloudpickle, which carries a
    Python-defined custom metric as it is, while a pickled plan resolves its metrics by
    name again (from built-ins, plugins and metric modules only)."""
    return JudgeSpec(
        plan.llm,
        plan.embeddings,
        list(plan.metrics.judged),
        list(plan.metrics.retrieval),
        dict(plan.columns),
        caches,
        row_column,
        packed,
        dict(plan.prompts),
    )


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
    plan, _ = ray_plan(metrics, columns, "a Ray dataset", (llm, embeddings))
    spec = make_spec(plan, caches, row_column)
    clash = sorted(set(spec.result_columns()) & set(present) - {row_column})
    if clash:
        raise InputFormatError(
            f"the dataset already has column(s) {', '.join(clash)}, which the results "
            "would overwrite; rename them first (Dataset.rename_columns)"
        )
    return map_rows(dataset, spec, concurrency, batch_size, num_cpus=num_cpus)
