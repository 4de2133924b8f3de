"""`judge.evaluate`: plan a run over the user's data, execute it here, return its result.

The CLI's `judge eval` makes the same plan (`judge.run.plan`) and hands it to an executor:
this process (`judge.run.local`), several (`judge.run.processes`) or Ray (`judge.ray`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from judge.aio import sync_twin
from judge.cache.store import Cache
from judge.llm.config import LLM, Embeddings
from judge.llm.session import LLMSession
from judge.metrics.resolve import MetricLike
from judge.run import local
from judge.run.data import Row
from judge.run.dry_run import acheck_scorable
from judge.run.gates import Bound, Gates, as_gates
from judge.run.inputs import InputRows, open_input
from judge.run.options import RunSpec
from judge.run.plan import plan_run
from judge.run.progress import DEFAULT_INTERVAL
from judge.run.results import EvaluationResult
from judge.run.shard import Shard


async def aevaluate(
    data: Any,
    *,
    metrics: Sequence[MetricLike] | None = None,
    llm: LLM | LLMSession | None = None,
    embeddings: Embeddings | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
    column_map: Mapping[str, str] | None = None,
    concurrency: int | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    progress: bool = True,
    progress_interval: float = DEFAULT_INTERVAL,
    shard: str | Shard | None = None,
    gates: Gates | Iterable[str | Bound] | None = None,
    prompts: str | os.PathLike[str] | None = None,
) -> EvaluationResult:
    """Evaluate many samples: LLM-judged metrics and, with retrieval columns, judge.ir metrics.

    Args:
        data: a `datasets.Dataset` (or one split), a list of dicts, a pandas DataFrame, or
            a path (.jsonl, .json, .csv, .parquet, a saved dataset directory).
        metrics: metric names (LLM-judged ones and retrieval ones such as `ndcg@10`) or
            `Metric` objects (see `judge.metrics.custom.judged_metric`); default: the core
            LLM-judged metrics, plus mrr, ndcg@10 and recall@10 when the data has
            retrieval columns.
        llm: the judge model; needed for LLM-judged metrics.
        embeddings: the embedding model (for answer_relevancy).
        cache: a `judge.Cache` or a path: judgments are looked up there first.
        column_map: `{field: column}` for columns with other names, fields being
            question, answer, contexts, ground_truth, id, retrieved_ids, relevance.
        concurrency: samples in flight at once; default the judge's
            `LLM.max_concurrency`, which alone bounds the requests in flight.
        checkpoint: a JSONL file where finished rows are appended; a restarted run with
            the same arguments skips them.
        progress: show progress on stderr: a live bar when stderr is a terminal, else a
            plain status line every `progress_interval` seconds and one at the end;
            False for none.
        progress_interval: seconds between status lines when stderr is not a terminal.
        shard: `"I/N"` (or a `judge.run.shard.Shard`): judge only the rows whose number
            modulo N is I-1, keeping their numbers; `judge merge` joins the N outputs.
        gates: the gates the result will be held to (`result.write(out, gates=...)`),
            as strings such as `["faithfulness>=0.8"]` or a `judge.Gates`: a gate naming
            a metric the run does not compute is refused before any row is judged.
        prompts: a prompt set: a folder of prompt files named after the built-in prompts
            they replace (`verify.txt`, as `judge align` writes it); each file's hash is its
            version, so the run's fingerprint and cache keys are its own. None: the
            built-in prompts.

    Returns:
        An `EvaluationResult`: rows in input order and a summary per metric; a judge that
        failed gives its metric NaN (reason `judge_error`) in that row, and
        `judge_error_rate` is the share of rows where one did. Its `rows` are read back
        when used from a temporary file of the result's own (beside the checkpoint if
        there is one), deleted with the result, so memory stays flat however many rows
        there are; each access parses the row again, and `list(result.rows)` holds them
        all.

    Raises:
        judge.errors.InputFormatError: the data cannot be read, or a metric would score
            no row for want of its fields (no column for them, or theirs empty in every
            row): the metrics, the columns found and the `column_map` to pass are named,
            and no request is made (`judge.dry_run` says the same of the data).
        judge.errors.LLMConfigError: the API key is missing or refused, the model is
            unknown, or no server answers at `api_base`. The run stops at the first one,
            cancelling requests in flight; rows finished before it are in the checkpoint
            and their judgments in the cache, so a rerun after the fix resumes them.
    """
    spec = RunSpec(
        metrics=metrics,
        llm=llm,
        embeddings=embeddings,
        cache=cache,
        concurrency=concurrency,
        checkpoint=checkpoint,
        progress=progress,
        progress_interval=progress_interval,
        shard=shard,
        gates=None if gates is None else as_gates(gates),
        prompts=prompts,
    )  # checked before the data is read
    # Read as the run consumes them: memory holds the rows in flight, not all of them.
    rows = open_input(data, column_map)
    return await aevaluate_rows(rows, rows.columns, rows.source, spec, refuse_unscorable=True)


async def aevaluate_rows(
    rows: Sequence[Row] | InputRows,
    columns: Mapping[str, str],
    source: str,
    spec: RunSpec,
    *,
    refuse_unscorable: bool = False,
) -> EvaluationResult:
    """`aevaluate` of rows already loaded (`judge.run.data.load_rows`, or `load_rows_lazily`
    or `judge.run.inputs.open_input` to hold none of them) with the run's spec: rows,
    columns and source as those give them; with `refuse_unscorable` (as `aevaluate` does)
    a metric no row can score for want of its fields is an `InputFormatError` before any
    request."""
    llm, embeddings = spec.models()
    plan, hashes = plan_run(
        rows,
        columns,
        source,
        metrics=spec.metrics,
        llm=llm,
        embeddings=embeddings,
        shard=spec.part,
        gates=spec.gates,
        prompts=spec.prompts,
    )
    if refuse_unscorable:
        await acheck_scorable(plan, rows)
    session = spec.session()
    try:
        return await local.execute(plan, rows, session, spec, hashes=hashes or None)
    finally:
        if spec.owns_session(session):  # ours: close its connections
            assert session is not None
            await session.aclose()


evaluate = sync_twin(aevaluate)
