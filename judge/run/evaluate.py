"""`judge.evaluate`: many samples, one concurrency limit, progress, and resumable runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judge import ir
from judge.aio import gather_or_cancel, run_sync
from judge.cache.identity import server_identity
from judge.cache.store import Cache
from judge.errors import InputFormatError, UnknownMetricError
from judge.ir.measure_names import MeasureFormError
from judge.json_values import canonical_json, sha256_hex
from judge.llm.config import LLM, Embeddings
from judge.llm.session import LLMSession
from judge.metrics.prompts import Prompt, load_prompts
from judge.metrics.registry import Metric
from judge.metrics.judgments import Sample
from judge.run.checkpoint import Checkpoint
from judge.run.data import Row, load_rows
from judge.run.progress import DEFAULT_INTERVAL, Progress
from judge.run.results import EvaluationResult, ResultRow, RowTally
from judge.run.score import MetricLike, make_session, resolve_metrics, score_sample
from judge.run.shard import Shard, parse_shard

# Rows served from the cache finish without waiting, so a worker runs them back to back;
# it lets the loop turn this often, so the requests of other rows and the progress go on.
TURN_SECONDS = 0.05


def split_metrics(
    names: Sequence[MetricLike] | str | None, has_retrieval: bool
) -> tuple[list[MetricLike] | None, list[str]]:
    """(LLM-judged metrics or None for the default, retrieval metric names)."""
    if names is None:
        return None, list(ir.DEFAULT_METRICS) if has_retrieval else []
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    judged: list[MetricLike] = []
    retrieval: list[str] = []
    for name in names:
        if isinstance(name, Metric):
            judged.append(name)
            continue
        try:
            ir.parse_measure(name)
        except MeasureFormError:
            raise  # a retrieval metric written wrong (`ndcg@0`): its own message, no guess
        except UnknownMetricError:
            judged.append(name)
        else:
            retrieval.append(name)
    if retrieval and not has_retrieval:
        raise InputFormatError(
            f"{', '.join(retrieval)} need retrieval columns: retrieved_ids (ranked doc ids) "
            "and relevance (relevant ids, or {doc_id: grade})"
        )
    return judged, retrieval


def skipped_defaults(names: Sequence[MetricLike] | str | None, embeddings: bool) -> list[str]:
    """Notes on the default metrics a judged run leaves out, so none goes without a word."""
    if names is not None or embeddings:
        return []
    return [
        "answer_relevancy, a default metric, was not computed: it needs an embedding model "
        "(pass embeddings=Embeddings(model=...))"
    ]


def retrieval_scores(row: Row, names: list[str]) -> dict[str, float]:
    """trec_eval-exact retrieval metrics of one row from its ranked ids and judgments."""
    ranked = row.retrieved_ids or []
    run = {"q": {doc: float(len(ranked) - i) for i, doc in enumerate(dict.fromkeys(ranked))}}
    qrels = {"q": row.relevance or {}}
    if not qrels["q"]:
        return {name: math.nan for name in names}
    values = ir.score_queries(qrels, run, names).values
    return {name: float(values[name][0]) for name in names}


def check_variables(judged: list[Metric], columns: Mapping[str, str], rows: list[Row]) -> None:
    """A custom metric's prompt variable that no row can fill is an error before any call."""
    known = {"question", "answer", "contexts", "ground_truth", "id"}
    present = known | {k for r in rows if r.sample for k in r.sample.extra}
    for metric in judged:
        lacking = sorted(metric.variables - present)
        if lacking:
            raise InputFormatError(
                f"metric {metric.name!r} reads {', '.join(lacking)}, which the data has no "
                f"column for (columns: {', '.join(sorted(present))})"
            )


def run_fingerprint(
    judged: list[Metric],
    retrieval: list[str],
    session: LLMSession,
    prompts: Mapping[str, Prompt] | None = None,
) -> str:
    """What decides the results besides the inputs: metrics, models and their servers,
    the versions of the built-in prompts (the run's, else as they are now)."""
    metrics = [[m.name, m.version] for m in judged] + [[name, ""] for name in retrieval]
    versions = prompt_versions(prompts if prompts is not None else load_prompts())
    llm, embeddings = session.llm, session.embeddings
    return sha256_hex(
        canonical_json(
            {
                "metrics": metrics,
                "model": llm.model if llm else None,
                "embeddings": embeddings.model if embeddings else None,
                "servers": [
                    server_identity(c.model, c.api_base, c.cache_as) if c else None
                    for c in (llm, embeddings)
                ],
                "prompts": versions,
            }
        )
    )


def prompt_versions(prompts: Mapping[str, Prompt]) -> dict[str, str]:
    """Name -> version of a run's built-in prompts, as its summary and fingerprint hold them."""
    return {name: prompt.version for name, prompt in prompts.items()}


def row_hash(row: Row) -> str:
    """A fingerprint of a row's inputs. Extra columns may hold NaN, dates or other values
    JSON cannot encode exactly: they are hashed through their text, never rejected."""
    data = {
        "sample": _sample_fields(row.sample) if row.sample else None,
        "error": row.error,
        "retrieved_ids": row.retrieved_ids,
        "relevance": row.relevance,
    }
    return sha256_hex(json.dumps(data, sort_keys=True, ensure_ascii=False, default=repr))


def _sample_fields(sample: Sample) -> dict[str, Any]:
    """dataclasses.asdict(sample), without its deep copy when the fields hold plain text
    (extra columns may hold anything: they take the copy, which also turns dataclasses
    inside them into dicts)."""
    if sample.extra:
        return dataclasses.asdict(sample)
    return {name: getattr(sample, name) for name in _SAMPLE_FIELDS}


_SAMPLE_FIELDS = tuple(f.name for f in dataclasses.fields(Sample))


def _result_row(row: Row) -> ResultRow:
    """The inputs of a row, with nothing scored yet."""
    s = row.sample
    if s is None:
        return ResultRow(row.number, error=row.error)
    return ResultRow(
        row.number, s.id, s.question, s.answer, list(s.contexts), s.ground_truth, row.error
    )


async def evaluate_row(
    row: Row,
    judged: list[Metric],
    retrieval: list[str],
    session: LLMSession | None,
    prompts: Mapping[str, Prompt] | None = None,
) -> ResultRow:
    """One input row judged and scored: the row `judge eval` writes to results.jsonl, with
    the run's built-in prompts (`load_prompts()`; else read when used)."""
    record = _result_row(row)
    names = [m.name for m in judged] + retrieval
    if row.sample is None:
        record.scores = dict.fromkeys(names, math.nan)
        record.reasons = dict.fromkeys(names, "row_error")
        return record
    if session and judged:
        result = await score_sample(row.sample, judged, session, prompts=prompts)
        record.scores = dict(result.scores)
        record.reasons = dict(result.reasons)
        record.errors, record.evidence, record.usage = result.errors, result.evidence, result.usage
    if retrieval:
        scores = retrieval_scores(row, retrieval)
        record.scores.update(scores)
        for name, value in scores.items():
            if math.isnan(value):
                record.reasons[name] = "no_relevance_judgments"
    return record


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
    custom: Mapping[str, Metric] | None = None,
    shard: str | Shard | None = None,
) -> EvaluationResult:
    """Async twin of `evaluate`."""
    part = parse_shard(shard) if shard is not None else None  # a bad spec fails before loading
    rows, columns, source = load_rows(data, column_map)
    has_retrieval = "retrieved_ids" in columns
    judged_names, retrieval = split_metrics(metrics, has_retrieval)
    if llm is None and judged_names is None and retrieval:
        judged_names = []  # no judge model given: the default is the retrieval metrics alone
    if llm is None and (judged_names is None or judged_names):
        raise InputFormatError("LLM-judged metrics need llm=judge.LLM(model=...)")
    session: LLMSession | None = None
    judged: list[Metric] = []
    notes: list[str] = []
    if llm is not None:
        session = make_session(llm, embeddings, cache)
        judged = resolve_metrics(
            judged_names, embeddings=session.embeddings is not None, custom=custom
        )
        notes = skipped_defaults(judged_names, session.embeddings is not None)
    check_variables(judged, columns, rows)
    names = [m.name for m in judged] + retrieval
    prompts = load_prompts()  # the run's: every row, the fingerprint and the summary use them
    fingerprint = run_fingerprint(judged, retrieval, session or LLMSession(), prompts)
    # Finished rows go to disk as they finish and are read back when asked: memory holds
    # offsets and score vectors, not the rows. The result reads them from a temporary file
    # of its own (beside the checkpoint, so not in a RAM-backed /tmp when there is one):
    # the checkpoint may be deleted (judge eval does, once results.jsonl is written) or
    # rewritten by a later run while the result is still in use.
    store = Checkpoint(checkpoint, fingerprint) if checkpoint else None
    spill = Checkpoint(
        None, fingerprint, temporary_dir=Path(checkpoint).parent if checkpoint else None
    )
    done = store.load() if store else {}
    hashes = [row_hash(r) for r in rows]
    mine = [r for r in rows if part is None or part.holds(r.number)]
    if concurrency is None:  # as many samples in flight as the judge takes requests
        concurrency = session.llm.max_concurrency if session and session.llm else 16
    offsets: dict[int, int] = {}
    # The summary's counts are gathered as rows finish, each at its place in input order,
    # so the rows are not read back for it.
    position = {row.number: i for i, row in enumerate(mine)}
    tally = RowTally(names, size=len(mine))
    todo = []
    for row in mine:
        offset = done.get((row.number, hashes[row.number]))
        if offset is None:
            todo.append(row)
        elif store:  # counted by Progress(resumed=...)
            # Encoded again, as this run writes rows (results.jsonl is cut from these lines).
            line = json.loads(store.line_at(offset))
            record = ResultRow.from_json(line["result"])
            tally.add(record, at=position[row.number])
            offsets[row.number] = spill.write(spill.encode(row.number, line["input"], record))
    resumed = len(offsets)
    bar = Progress(
        len(mine),
        session,
        mode=None if progress else "off",
        interval=progress_interval,
        resumed=resumed,
    )
    pending = iter(todo)

    async def worker() -> None:
        # A fixed pool of workers takes rows one by one: a task per row would hold a
        # coroutine for each of 100,000 rows at once.
        turn = time.monotonic() + TURN_SECONDS
        for row in pending:
            record = await evaluate_row(row, judged, retrieval, session, prompts)
            tally.add(record, at=position[row.number])
            line = spill.encode(row.number, hashes[row.number], record)
            if store:
                store.write(line)
            offsets[row.number] = spill.write(line)
            bar.advance()
            if time.monotonic() >= turn:
                await asyncio.sleep(0)
                turn = time.monotonic() + TURN_SECONDS

    damaged = session.cache.damaged if session and session.cache is not None else 0
    started = time.monotonic()
    bar.start()
    try:
        # A configuration error in one row stops them all: finished rows are already
        # checkpointed and their judgments cached, so a rerun after the fix resumes.
        await gather_or_cancel(worker() for _ in range(max(1, min(concurrency, len(todo)))))
    finally:
        spill.close()
        if store:
            store.close()
        bar.close()
        if session is not None and session is not llm:  # ours: close its connections
            await session.aclose()
    finished = spill.rows([offsets[r.number] for r in mine], names)
    usage = session.usage.total().as_dict() if session else {}
    config: dict[str, Any] = {
        "source": source,
        "columns": columns,
        "metrics": names,
        "model": session.llm.model if session and session.llm else None,
        "embeddings": session.embeddings.model if session and session.embeddings else None,
        "structured_output": session.mode if session else None,
        "prompts": prompt_versions(prompts),
        "cache": str(session.cache.path) if session and session.cache is not None else None,
        "cache_mode": session.cache.mode if session and session.cache is not None else None,
        "run": fingerprint,
        "data": {"rows": len(rows), "sha256": sha256_hex("".join(hashes))},
        "resumed_rows": resumed,
        "seconds": round(time.monotonic() - started, 3),
        "notes": notes + (session.replay_hints if session else []),
    }
    if part is not None:
        config["shard"] = {"index": part.index, "count": part.count}
    if session and session.cache is not None and session.cache.damaged > damaged:
        # Damaged entries found in this run (never served): judge eval says so.
        config["cache_damaged"] = session.cache.damaged - damaged
    return EvaluationResult(finished, names, config, usage, tally=tally)


def evaluate(
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
    custom: Mapping[str, Metric] | None = None,
    shard: str | Shard | None = None,
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
        custom: extra metrics by name, so `metrics` can name them (the CLI's
            `--metrics-module` fills it).
        shard: `"I/N"` (or a `judge.run.shard.Shard`): judge only the rows whose number
            modulo N is I-1, keeping their numbers; `judge merge` joins the N outputs.

    Returns:
        An `EvaluationResult`: rows in input order and a summary per metric; a judge that
        failed gives its metric NaN (reason `judge_error`) in that row, and
        `judge_error_rate` is the share of rows where one did. Its `rows` are read back
        when used from a temporary file of the result's own (beside the checkpoint if
        there is one), deleted with the result, so memory stays flat however many rows
        there are; each access parses the row again, and `list(result.rows)` holds them
        all.

    Raises:
        judge.errors.LLMConfigError: the API key is missing or refused, the model is
            unknown, or no server answers at `api_base`. The run stops at the first one,
            cancelling requests in flight; rows finished before it are in the checkpoint
            and their judgments in the cache, so a rerun after the fix resumes them.
    """
    return run_sync(
        aevaluate(
            data,
            metrics=metrics,
            llm=llm,
            embeddings=embeddings,
            cache=cache,
            column_map=column_map,
            concurrency=concurrency,
            checkpoint=checkpoint,
            progress=progress,
            progress_interval=progress_interval,
            custom=custom,
            shard=shard,
        )
    )
