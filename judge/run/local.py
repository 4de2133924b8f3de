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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from judge import ir
from judge.aio import gather_or_cancel
from judge.llm.judge import Judge
from judge.llm.session import LLMSession
from judge.llm.usage import UsageSum
from judge.metrics.judgments import Conversations
from judge.metrics.prompts import Prompt
from judge.metrics.registry import Metric
from judge.metrics.tools import (
    INVALID_TOOL_CALLS,
    TOOL_METRICS,
    row_tool_calls,
    score_tool_calls,
)
from judge.run.checkpoint import Checkpoint, RowOffsets
from judge.run.data import Row
from judge.run.digest import DataDigest, row_hash
from judge.run.inputs import InputRows
from judge.run.options import RunSpec
from judge.run.output_folder import remove_leftovers
from judge.run.plan import RunPlan
from judge.run.progress import Progress
from judge.run.results import EvaluationResult
from judge.run.rows import ResultRow, RowTally
from judge.run.sample_memo import SampleMemo
from judge.run.score import score_sample
from judge.samples import Sample

# NaN reasons: every metric of a row that cannot be read; a retrieval metric of a row
# without relevance judgments.
ROW_ERROR = "row_error"
NO_RELEVANCE_JUDGMENTS = "no_relevance_judgments"

# Rows served from the cache finish without waiting, so a worker runs them back to back;
# it lets the loop turn this often, so the requests of other rows and the progress go on.
TURN_SECONDS = 0.05


async def execute(
    plan: RunPlan,
    rows: Sequence[Row] | InputRows,
    session: LLMSession | None,
    spec: RunSpec,
    hashes: Sequence[str] | None = None,
) -> EvaluationResult:
    """Judge the plan's rows (those of its shard) in this process.

    Rows read as the run goes (`judge.run.inputs.InputRows`) are read once (twice when a
    checkpoint has rows of this run: once to find them, once to judge the others), in
    order, each row built when a worker takes it; when the plan has no `data_sha256`
    every input row is hashed on the way (a shard's other rows are built only for that)
    and the config records the hash; when it has one (a shard of `judge eval
    --processes`, whose parent hashed the rows) only the shard's rows are read.

    Args:
        plan: the run, as `judge.run.plan.plan_run` made it from these rows.
        rows: the input rows, loaded or read as the run goes.
        session: the judge's session (its models are the plan's), None for retrieval
            metrics alone. The caller closes it.
        spec: the run's checkpoint (rows of the same plan found there are not judged
            again), concurrency (rows in flight; default the judge's `max_concurrency`)
            and progress, as for `judge.evaluate`.
        hashes: each row's input hash, by row number, when `plan_run` gave them (loaded
            rows); None: computed as the rows are read.
    """
    checkpoint, concurrency = spec.checkpoint, spec.concurrency
    judged, retrieval = list(plan.metrics.judged), list(plan.metrics.retrieval)
    names = plan.names
    # Finished rows go to disk as they finish and are read back when asked: memory holds
    # score vectors, not the rows nor where they are. The result reads them from a
    # temporary file of its own (beside the checkpoint, so not in a RAM-backed /tmp when
    # there is one): the checkpoint may be deleted (judge eval does, once results.jsonl is
    # written) or rewritten by a later run while the result is still in use.
    store = Checkpoint(checkpoint, plan.fingerprint) if checkpoint else None
    temporary_dir = Path(checkpoint).parent if checkpoint else None
    # A run killed there (kill -9, a crash) left its result's files, as big as its
    # checkpoint: a rerun removes them, as judge eval does in its folder.
    remove_leftovers(temporary_dir)
    spill = Checkpoint(None, plan.fingerprint, temporary_dir=temporary_dir)
    done = store.load() if store else None
    if concurrency is None:  # as many samples in flight as the judge takes requests
        concurrency = session.llm.max_concurrency if session and session.llm else 16
    # Nothing is kept of the rows but where each one's result goes: `rows` may read each
    # row from its input when used (`InputRows`, `judge.run.data.LazyRows`), so a run holds
    # the rows being judged, not all of them.
    size, place = _places(plan, rows)
    # The summary's counts are gathered as rows finish, each at its place in input order,
    # so the rows are not read back for it.
    tally = RowTally(names, size=size)
    # Where each finished row is in the spill file: on disk too (8 MiB a million rows).
    offsets = RowOffsets(size, temporary_dir=temporary_dir)
    digest = DataDigest() if plan.data_sha256 is None else None
    # summary.json's usage: the rows', those resumed from the checkpoint among them.
    usage = UsageSum()
    resumed = 0
    # The places of the rows taken from the checkpoint (a byte a row, only on a resume).
    taken: bytearray | None = None
    if store is not None and done:
        taken = bytearray(size)
        for row, input_hash in _mine(plan, rows, hashes, None):
            offset = done.offset(row.number)
            if offset is None:
                continue
            line = json.loads(store.line_at(offset))
            if line["input"] != input_hash:  # the row changed since: judged again
                continue
            # Encoded again, as this run writes rows (results.jsonl is cut from these lines).
            record = ResultRow.from_json(line["result"])
            at = place(row.number)
            tally.add(record, at=at)
            usage.add(record.usage.get("total") or {})
            offsets[at] = spill.write(spill.encode(row.number, line["input"], record))
            taken[at] = 1
            resumed += 1  # counted by Progress(resumed=...)
    todo = size - resumed
    bar = Progress(
        size,
        session,
        mode=None if spec.progress else "off",
        interval=spec.progress_interval,
        resumed=resumed,
    )
    pending = (
        (row, input_hash)
        for row, input_hash in _mine(plan, rows, hashes, digest)
        if taken is None or not taken[place(row.number)]
    )

    conversations = Conversations()
    # A replay judges a sample met again (another id, the same texts) from memory.
    memo = SampleMemo.for_run(judged, session, retrieval)

    async def worker() -> None:
        # A fixed pool of workers takes rows one by one: a task per row would hold a
        # coroutine for each of 100,000 rows at once.
        turn = time.monotonic() + TURN_SECONDS
        for row, input_hash in pending:
            record = await evaluate_row(
                row, judged, retrieval, session, plan.prompts, conversations, memo
            )
            at = place(row.number)
            tally.add(record, at=at)
            usage.add(record.usage.get("total") or {})
            line = memo.line(row, record, input_hash) if memo is not None else None
            if line is None:
                line = spill.encode(row.number, input_hash, record)
                if memo is not None:
                    memo.keep_line(row, record, input_hash, line, spill.fingerprint)
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
    except BaseException:
        # No result is made of a failed run: its files go now, not when the failure's
        # reference cycles (its traceback holds the tasks, which hold it) are collected.
        spill.discard()
        offsets.discard()
        raise
    finally:
        spill.close()
        if store:
            store.close()
        bar.close()
    finished = spill.rows(offsets, names)
    # (summed over the rows in any order alike: a resumed run's is the uninterrupted run's)
    summed = usage.as_dict() if session else {}
    # Every row went through the workers' generator, so through the digest.
    recorded = {} if digest is None else {"data_sha256": digest.hexdigest(plan.data_rows)}
    config = plan.config(
        **recorded,
        structured_output=session.mode if session else None,
        cache=str(cache.path) if cache is not None else None,
        cache_mode=cache.mode if cache is not None else None,
        resumed_rows=resumed,
        seconds=round(time.monotonic() - started, 3),
        notes=session.replay_hints if session else [],
        # Damaged entries found in this run (never served): judge eval says so.
        cache_damaged=cache.damaged - damaged if cache is not None else 0,
    )
    return EvaluationResult(finished, names, config, summed, tally=tally)


def _places(plan: RunPlan, rows: Sequence[Row] | InputRows) -> tuple[int, Callable[[int], int]]:
    """How many rows this run judges, and a row's number -> its place among them: by
    arithmetic for rows read as the run goes (numbered 0, 1, ... by position, a shard
    holding every count-th), so nothing is kept per row; else from the loaded rows."""
    if isinstance(rows, InputRows):
        shard = plan.shard
        if shard is None:
            return len(rows), lambda number: number
        if shard.unit == "row":
            return shard.size(len(rows)), lambda number: number // shard.count
        # By conversation: which rows are held is known from the conversations alone.
        held = array("q", rows.numbers(shard))
        return len(held), _positions(held)
    mine = array("q", (r.number for r in rows if plan.holds(r)))
    return len(mine), _positions(mine)


def _mine(
    plan: RunPlan,
    rows: Sequence[Row] | InputRows,
    hashes: Sequence[str] | None,
    digest: DataDigest | None,
) -> Iterator[tuple[Row, str]]:
    """(row, its input hash) of the rows this run judges, in input order; with a digest,
    every input row is read and hashed into it on the way (the others only for that)."""
    if digest is None and isinstance(rows, InputRows):
        held: Iterable[Row] = rows.only(plan.shard)  # the others are not even parsed
    else:
        held = rows
    for row in held:
        known = hashes[row.number] if hashes is not None else None
        if digest is not None:
            known = digest.add(row, known)
        if plan.holds(row):
            yield row, known if known is not None else row_hash(row)


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
        row.number,
        s.id,
        s.question,
        s.answer,
        list(s.contexts),
        s.ground_truth,
        row.error,
        conversation_id=s.conversation_id,
        turn=s.turn,
        trace_id=turn_trace_id(s),
    )


def turn_trace_id(sample: Sample) -> str | None:
    """The trace a conversation's turn was read from (its `trace_id`, a non-blank string),
    which its row's id (`<conversation>#<turn>`) does not name; None for a row that is no
    turn: results.jsonl keeps the shape it had, its id the trace's when read from one."""
    value = sample.extra.get("trace_id") if sample.in_conversation else None
    return value if isinstance(value, str) and value.strip() else None


async def evaluate_row(
    row: Row,
    judged: list[Metric],
    retrieval: list[str],
    session: Judge | None,
    prompts: Mapping[str, Prompt] | None = None,
    conversations: Conversations | None = None,
    memo: SampleMemo | None = None,
) -> ResultRow:
    """One input row judged and scored: the row `judge eval` writes to results.jsonl, with
    the run's built-in prompts (`load_prompts()`; else read when used), for the turns of
    conversations the run's shared judgments of earlier turns (`conversations`), and in a
    replay the judgments of samples already met (`memo`)."""
    record = _result_row(row)
    names = [m.name for m in judged] + retrieval
    if row.sample is None:
        record.scores = dict.fromkeys(names, math.nan)
        record.reasons = dict.fromkeys(names, ROW_ERROR)
        return record
    if session and judged:
        key = memo.key(row) if memo is not None else None
        found = memo.get(key, row.sample) if memo is not None and key is not None else None
        if found is not None:
            result = found
        else:
            result = await score_sample(
                row.sample, judged, session, prompts=prompts, conversations=conversations
            )
            if memo is not None and key is not None:
                memo.put(key, result)
        record.scores = dict(result.scores)
        record.reasons = dict(result.reasons)
        record.errors, record.evidence, record.usage = result.errors, result.evidence, result.usage
    ranked = [name for name in retrieval if name not in TOOL_METRICS]
    if ranked:
        scores = retrieval_scores(row, ranked)
        record.scores.update(scores)
        for name, value in scores.items():
            if math.isnan(value):
                record.reasons[name] = NO_RELEVANCE_JUDGMENTS
    tools = [name for name in retrieval if name in TOOL_METRICS]
    if tools:
        scores, reasons = tool_scores(row, tools)
        record.scores.update(scores)
        record.reasons.update(reasons)
    return record


def tool_scores(row: Row, names: list[str]) -> tuple[dict[str, float], dict[str, str]]:
    """The tool-call metrics of one row, from its `tools_called` (DeepEval's name) and
    `expected_tools` columns, and the reasons of those that are NaN; a column that is no
    list of calls scores NaN (`invalid_tool_calls`), the row's other metrics kept."""
    assert row.sample is not None
    extra = row.sample.extra
    try:
        called, expected = row_tool_calls(extra)
    except ValueError:
        return dict.fromkeys(names, math.nan), dict.fromkeys(names, INVALID_TOOL_CALLS)
    result = score_tool_calls(called, expected)
    return (
        {name: result.scores[name] for name in names},
        {name: result.reasons[name] for name in names if name in result.reasons},
    )
