"""`judge eval DATA --ray`: the rows of a file judged on Ray, gathered as a plain run's result.

The driver reads the file as `judge eval` does (the same records, columns and row
numbers), sends each record to the actors as it is (pickled, so no type is lost to Arrow's
inference), and writes the rows that come back in input order, from which the summary,
bootstrap intervals and report are computed by the same code as a plain run's.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judge.cache.store import Cache, CacheMode
from judge.errors import InputFormatError, JudgeError
from judge.llm.config import LLM, Embeddings
from judge.llm.usage import Usage
from judge.metrics.resolve import MetricLike
from judge.ray.actor import NUMBER, RECORD, RESULT, ROW
from judge.ray.caches import ActorCaches, caches_beside
from judge.ray.evaluate import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_NUM_CPUS,
    make_spec,
    map_rows,
    ray_plan,
    require_ray,
)
from judge.run.checkpoint import Checkpoint
from judge.run.data import as_turn_records, build_rows, read_records, resolve_columns
from judge.run.dry_run import check_scorable
from judge.run.gates import Gates
from judge.run.merge import sum_usage
from judge.run.options import RunSpec
from judge.run.results import EvaluationResult
from judge.run.rows import ResultRow


def connect(ray: Any, address: str | None) -> None:
    """Join the cluster at `address` (None: start a local one), unless already joined."""
    if address is not None and address != "auto":
        check_reachable(address)
    if ray.is_initialized():  # e.g. by the caller, or a test's session
        return
    try:
        ray.init(address=address, include_dashboard=False if address is None else None)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise JudgeError(
            f"cannot join the Ray cluster at {address} ({type(exc).__name__}: {exc}); start "
            "one with `ray start --head` and give the address it prints to --ray-address"
        ) from None


def check_reachable(address: str) -> None:
    """Refuse at once an address where nothing listens: Ray itself waits a minute, then
    ends the process."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except (OSError, ValueError) as exc:
        raise JudgeError(
            f"no Ray cluster answers at --ray-address {address} ({exc}); start one with "
            "`ray start --head` on the head node and give the address it prints "
            "(host:6379), or leave --ray-address out for a local Ray"
        ) from None


def judge_error_in(exc: BaseException) -> JudgeError | None:
    """The JudgeError an actor raised, from the error Ray raised for it, or None."""
    cause = getattr(exc, "cause", None)  # RayTaskError keeps the actor's exception
    if not isinstance(cause, JudgeError):
        return None
    # Ray appends its retry advice to the message: the judge's own message is the point.
    message = str(cause).split("\nFailed to apply UDF", 1)[0]
    try:
        return type(cause)(message)
    except TypeError:  # an error class that takes more than its message: keep it whole
        return cause


def evaluate_file(
    data: Any,
    *,
    metrics: Sequence[MetricLike] | None,
    llm: LLM | None,
    embeddings: Embeddings | None,
    caches: ActorCaches,
    column_map: Mapping[str, str] | None = None,
    actors: int = 2,
    address: str | None = None,
    rows_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    gates: Gates | None = None,
) -> EvaluationResult:
    """Judge every row of `data` on Ray; the result a plain `judge.evaluate` would give.

    Args:
        data: what `judge.evaluate` takes (a path, a list of dicts, ...).
        metrics, llm, embeddings, column_map: as for `judge.evaluate`.
        caches: where and how the actors keep their caches.
        actors: the number of actors.
        address: the Ray cluster (`ray start --head` prints it); None starts a local one.
        rows_dir: where the rows are kept while the result is used (default the
            system's temporary directory).
        progress: show Ray Data's progress bars on stderr.
        gates: as for `judge.evaluate`: one naming a metric the run does not compute is
            refused before Ray starts.
    """
    ray = require_ray()
    records, source = read_records(data)
    records = as_turn_records(records, column_map, source)
    if not records:
        raise InputFormatError(f"{source}: no rows to evaluate")
    columns = resolve_columns(dict.fromkeys(k for r in records for k in r), column_map)
    rows = build_rows(records, columns)
    plan, hashes = ray_plan(metrics, columns, source, (llm, embeddings), rows, gates)
    check_scorable(plan, rows)  # as judge.evaluate checks it: before Ray starts
    del rows  # the actors build their own
    spec = make_spec(plan, caches, NUMBER, packed=True)
    fingerprint = plan.fingerprint
    names = spec.names
    started = time.monotonic()
    connect(ray, address)
    items = [{NUMBER: i, RECORD: pickle.dumps(r)} for i, r in enumerate(records)]
    judged_rows = map_rows(
        # Blocks of one batch each: Ray's default of a few rows per block makes one small
        # task per block, and a batch waits for its slowest row.
        ray.data.from_items(items, override_num_blocks=-(-len(items) // DEFAULT_BATCH_SIZE)),
        spec,
        actors,
        DEFAULT_BATCH_SIZE,
        num_cpus=DEFAULT_NUM_CPUS,
    ).select_columns([ROW, RESULT])
    judged_rows.context.enable_progress_bars = progress  # this dataset's, not the process's
    if rows_dir is not None:
        Path(rows_dir).mkdir(parents=True, exist_ok=True)
    spill = Checkpoint(None, fingerprint, temporary_dir=rows_dir)
    offsets: dict[int, int] = {}
    usages = []
    try:
        for batch in judged_rows.iter_batches(batch_format="pyarrow", batch_size=None):
            for number, line in zip(batch[ROW].to_pylist(), batch[RESULT].to_pylist(), strict=True):
                row = ResultRow.from_json(json.loads(line))
                offsets[number] = spill.write(spill.encode(number, hashes[number], row))
                if row.usage:
                    usages.append(row.usage["total"])
    except Exception as exc:
        cause = judge_error_in(exc)
        if cause is None:
            raise
        raise cause from None
    finally:
        spill.close()
    if len(offsets) != len(records):
        raise JudgeError(f"Ray returned {len(offsets)} of {len(records)} rows; rerun")
    config = plan.config(
        structured_output=None,  # each actor's session settles on its own
        cache=caches.directory,
        cache_mode=None if caches.directory is None else caches.mode,
        seconds=round(time.monotonic() - started, 3),
        ray={"address": address or "local", "actors": actors},
        # the plan's notes on the default metrics (the actors' replay hints are not gathered)
    )
    finished = spill.rows([offsets[n] for n in range(len(records))], names)
    usage = sum_usage([Usage().as_dict(), *usages])  # a plain run's keys, in its order
    return EvaluationResult(finished, names, config, usage)


def evaluate_on_ray(
    data: Any,
    spec: RunSpec,
    *,
    actors: int = 2,
    address: str | None = None,
    work: str | os.PathLike[str] | None = None,
    cache_mode: CacheMode | None = None,
    column_map: Mapping[str, str] | None = None,
) -> EvaluationResult:
    """Rows judged by Ray actors, as `judge eval --ray` judges them: the Ray twin of
    `judge.run.processes.evaluate_in_processes` (the same rows and scores as one process
    gives).

    Args:
        data: what `judge.evaluate` takes (a path, a list of dicts, ...).
        spec: the run's choices (metrics, models, gates, progress); its judge is an `LLM`,
            never a session (each actor opens its own). Its cache, a `Cache` or a path, is
            read by every actor, each of which writes its own file in the directory
            beside it (`judge.ray.caches.caches_beside`: cache.sqlite -> cache.ray/).
        actors: the number of actors.
        address: the Ray cluster (`ray start --head` prints it); None starts a local one
            (or uses the Ray this process already joined).
        work: where the rows are kept while the result is used (default the system's
            temporary directory).
        cache_mode: the actors' cache mode (None: the `Cache`'s own, else "read-write").
        column_map: as for `judge.evaluate`.
    """
    if actors < 1:
        raise JudgeError(f"actors={actors}: give 1 or more")
    if spec.prompts is not None:
        raise JudgeError("prompts= cannot be used on Ray yet: drop it, or judge without Ray")
    if spec.part is not None:
        raise JudgeError(
            "shard= cannot be used on Ray: Ray spreads the rows over its actors itself"
        )
    llm, embeddings = spec.models()
    if isinstance(spec.cache, Cache) and cache_mode is None:
        cache_mode = spec.cache.mode
    return evaluate_file(
        data,
        metrics=spec.metrics,
        llm=llm,
        embeddings=embeddings,
        caches=caches_beside(spec.cache, cache_mode or "read-write"),
        column_map=column_map,
        actors=actors,
        address=address,
        rows_dir=work,
        progress=spec.progress,
        gates=spec.gates,
    )
