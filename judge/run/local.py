"""The local executor: a plan's rows judged in this process by a pool of workers on one
event loop, finished rows checkpointed as they finish, a stopped run resumed."""

from __future__ import annotations

import asyncio
import bisect
import itertools
import json
import math
import time
from array import array
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from judge import ir
from judge.aio import gather_or_cancel
from judge.llm.judge import Judge
from judge.llm.session import LLMSession
from judge.metrics.prompts import Prompt
from judge.metrics.registry import Metric
from judge.run.checkpoint import Checkpoint
from judge.run.data import Row
from judge.run.options import RunSpec
from judge.run.plan import RunPlan
from judge.run.progress import Progress
from judge.run.results import EvaluationResult
from judge.run.rows import ResultRow, RowTally
from judge.run.score import score_sample

# NaN reasons: every metric of a row that cannot be read; a retrieval metric of a row
# without relevance judgments.
ROW_ERROR = "row_error"
NO_RELEVANCE_JUDGMENTS = "no_relevance_judgments"

# Rows served from the cache finish without waiting, so a worker runs them back to back;
# it lets the loop turn this often, so the requests of other rows and the progress go on.
TURN_SECONDS = 0.05


async def execute(
    plan: RunPlan,
    rows: Sequence[Row],
    hashes: Sequence[str],
    session: LLMSession | None,
    spec: RunSpec,
) -> EvaluationResult:
    """Judge the plan's rows (those of its shard) in this process.

    Args:
        plan: the run, as `judge.run.plan.plan_run` made it from these rows.
        rows: the input rows; hashes: each one's input hash (`plan_run` gives both).
        session: the judge's session (its models are the plan's), None for retrieval
            metrics alone. The caller closes it.
        spec: the run's checkpoint (rows of the same plan found there are not judged
            again), concurrency (rows in flight; default the judge's `max_concurrency`)
            and progress, as for `judge.evaluate`.
    """
    checkpoint, concurrency = spec.checkpoint, spec.concurrency
    judged, retrieval = list(plan.metrics.judged), list(plan.metrics.retrieval)
    names = plan.names
    # Finished rows go to disk as they finish and are read back when asked: memory holds
    # offsets and score vectors, not the rows. The result reads them from a temporary file
    # of its own (beside the checkpoint, so not in a RAM-backed /tmp when there is one):
    # the checkpoint may be deleted (judge eval does, once results.jsonl is written) or
    # rewritten by a later run while the result is still in use.
    store = Checkpoint(checkpoint, plan.fingerprint) if checkpoint else None
    spill = Checkpoint(
        None, plan.fingerprint, temporary_dir=Path(checkpoint).parent if checkpoint else None
    )
    done = store.load() if store else {}
    if concurrency is None:  # as many samples in flight as the judge takes requests
        concurrency = session.llm.max_concurrency if session and session.llm else 16
    # Only numbers are kept of the rows: `rows` may read each row from its file when used
    # (`judge.run.data.LazyRows`), so a run holds the rows being judged, not all of them.
    mine = array("q", (r.number for r in rows if plan.holds(r)))
    # The summary's counts are gathered as rows finish, each at its place in input order,
    # so the rows are not read back for it.
    place = _positions(mine)
    tally = RowTally(names, size=len(mine))
    offsets = array("q", [-1]) * len(mine)  # where each finished row is in the spill file
    resumed = 0
    for row in rows if done else ():  # each row read again: only when some are done
        if not plan.holds(row):
            continue
        offset = done.get((row.number, hashes[row.number]))
        if offset is not None and store:  # counted by Progress(resumed=...)
            # Encoded again, as this run writes rows (results.jsonl is cut from these lines).
            line = json.loads(store.line_at(offset))
            record = ResultRow.from_json(line["result"])
            at = place(row.number)
            tally.add(record, at=at)
            offsets[at] = spill.write(spill.encode(row.number, line["input"], record))
            resumed += 1
    todo = len(mine) - resumed
    bar = Progress(
        len(mine),
        session,
        mode=None if spec.progress else "off",
        interval=spec.progress_interval,
        resumed=resumed,
    )
    pending = (
        row for row in rows if plan.holds(row) and (row.number, hashes[row.number]) not in done
    )

    async def worker() -> None:
        # A fixed pool of workers takes rows one by one: a task per row would hold a
        # coroutine for each of 100,000 rows at once.
        turn = time.monotonic() + TURN_SECONDS
        for row in pending:
            record = await evaluate_row(row, judged, retrieval, session, plan.prompts)
            at = place(row.number)
            tally.add(record, at=at)
            line = spill.encode(row.number, hashes[row.number], record)
            if store:
                store.write(line)
            offsets[at] = spill.write(line)
            bar.advance()
            if time.monotonic() >= turn:
                await asyncio.sleep(0)
                turn = time.monotonic() + TURN_SECONDS

    cache = session.cache if session else None
    damaged = cache.damaged if cache is not None else 0
    started = time.monotonic()
    bar.start()
    try:
        # A configuration error in one row stops them all: finished rows are already
        # checkpointed and their judgments cached, so a rerun after the fix resumes.
        await gather_or_cancel(worker() for _ in range(max(1, min(concurrency, todo))))
    finally:
        spill.close()
        if store:
            store.close()
        bar.close()
    finished = spill.rows(offsets, names)
    usage = session.usage.total().as_dict() if session else {}
    config = plan.config(
        structured_output=session.mode if session else None,
        cache=str(cache.path) if cache is not None else None,
        cache_mode=cache.mode if cache is not None else None,
        resumed_rows=resumed,
        seconds=round(time.monotonic() - started, 3),
        notes=session.replay_hints if session else [],
        # Damaged entries found in this run (never served): judge eval says so.
        cache_damaged=cache.damaged - damaged if cache is not None else 0,
    )
    return EvaluationResult(finished, names, config, usage, tally=tally)


def _positions(numbers: Sequence[int]) -> Callable[[int], int]:
    """Row number -> its place among `numbers`: by bisection when they ascend (rows in input
    order, as loaded: no table per row), else from a table."""
    if all(a < b for a, b in itertools.pairwise(numbers)):
        return lambda number: bisect.bisect_left(numbers, number)
    table = {number: i for i, number in enumerate(numbers)}
    return table.__getitem__


def retrieval_scores(row: Row, names: list[str]) -> dict[str, float]:
    """trec_eval-exact retrieval metrics of one row from its ranked ids and judgments."""
    ranked = row.retrieved_ids or []
    run = {"q": {doc: float(len(ranked) - i) for i, doc in enumerate(dict.fromkeys(ranked))}}
    qrels = {"q": row.relevance or {}}
    if not qrels["q"]:
        return {name: math.nan for name in names}
    values = ir.score_queries(qrels, run, names).values
    return {name: float(values[name][0]) for name in names}


def _result_row(row: Row) -> ResultRow:
    """The inputs of a row, with nothing scored yet."""
    s = row.sample
    if s is None:
        return ResultRow(row.number, row.id, row.question, error=row.error)
    return ResultRow(
        row.number, s.id, s.question, s.answer, list(s.contexts), s.ground_truth, row.error
    )


async def evaluate_row(
    row: Row,
    judged: list[Metric],
    retrieval: list[str],
    session: Judge | None,
    prompts: Mapping[str, Prompt] | None = None,
) -> ResultRow:
    """One input row judged and scored: the row `judge eval` writes to results.jsonl, with
    the run's built-in prompts (`load_prompts()`; else read when used)."""
    record = _result_row(row)
    names = [m.name for m in judged] + retrieval
    if row.sample is None:
        record.scores = dict.fromkeys(names, math.nan)
        record.reasons = dict.fromkeys(names, ROW_ERROR)
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
                record.reasons[name] = NO_RELEVANCE_JUDGMENTS
    return record
