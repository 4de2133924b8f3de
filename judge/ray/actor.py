"""The Ray actor that judges batches of rows: one LLM session and one cache per actor.

It builds each row as `judge eval` does (`judge.run.data.build_rows`) and scores it with
the same code (`judge.run.local.evaluate_row`), so a row's scores, reasons, evidence
and results.jsonl line are those of a plain run. It imports pyarrow, never ray: Ray
constructs it in the worker process and calls it with one batch (a `pyarrow.Table`) at a
time.
"""

from __future__ import annotations

import asyncio
import json
import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.aio import gather_or_cancel
from judge.llm.config import LLM, Embeddings
from judge.llm.session import LLMSession
from judge.metrics.judgments import Conversations
from judge.metrics.prompts import Prompt, load_prompts
from judge.metrics.registry import Metric
from judge.ray.caches import ActorCaches
from judge.run.data import Row, build_rows
from judge.run.local import evaluate_row
from judge.run.plan import check_variables
from judge.run.rows import ResultRow

ROW = "row"  # the result column holding each row's number in the input
RESULT = "result"  # the result column holding the row's results.jsonl line
EVIDENCE = "evidence"
RECORD = "__judge_record__"  # a packed input record (pickled), as `judge eval --ray` sends
NUMBER = "__judge_row__"  # the row numbers the driver adds when the dataset has none


@dataclass
class JudgeSpec:
    """What every actor needs to judge rows as the driver resolved them.

    Args:
        llm: the judge model (None when only retrieval metrics are computed).
        embeddings: the embedding model, if any.
        judged: the LLM-judged metrics.
        retrieval: the retrieval metric names.
        columns: field -> column, resolved once on the driver for the whole input.
        caches: where and how the actors keep their caches.
        row_column: the input column holding each row's number.
        packed: rows arrive as pickled records in one column (`RECORD`) rather than as
            the dataset's own columns; the output then holds the result columns only.
        prompts: the built-in prompts, read once by the driver: every actor judges with
            the same prompts, whatever the files on its machine say.
    """

    llm: LLM | None
    embeddings: Embeddings | None
    judged: list[Metric]
    retrieval: list[str]
    columns: dict[str, str]
    caches: ActorCaches = field(default_factory=ActorCaches)
    row_column: str = ROW
    packed: bool = False
    prompts: dict[str, Prompt] = field(default_factory=load_prompts)

    @property
    def names(self) -> list[str]:
        """Every metric's name, in the order of the result columns."""
        return [m.name for m in self.judged] + self.retrieval

    def result_columns(self) -> list[str]:
        """The columns an actor adds: the row number, a score and a reason per metric, the
        evidence and the whole results.jsonl line."""
        per_metric = [c for m in self.names for c in (m, f"{m}_reason")]
        return [ROW, *per_metric, EVIDENCE, RESULT]


class RowJudge:
    """A callable class for `Dataset.map_batches`: judges a batch, adds the result columns.

    Args:
        spec: the metrics, models, columns and cache settings of the run.
    """

    def __init__(self, spec: JudgeSpec):
        self.spec = spec
        cache = spec.caches.open()
        self.session = (
            LLMSession(spec.llm, embeddings=spec.embeddings, cache=cache) if spec.llm else None
        )
        # One loop for the actor's life: the session's connections are reused across batches.
        self.loop = asyncio.new_event_loop()
        # Turns of a conversation judged by this actor share their earlier turns' judgments.
        self.conversations = Conversations()

    def __call__(self, batch: Any) -> Any:
        """Judge one batch (a pyarrow.Table) and return it with the result columns."""
        import pyarrow

        numbers = [int(n) for n in batch.column(self.spec.row_column).to_pylist()]
        if self.spec.packed:
            records = [pickle.loads(b) for b in batch.column(RECORD).to_pylist()]
        else:
            records = batch.drop_columns([self.spec.row_column]).to_pylist()
        rows = build_rows(records, self.spec.columns, numbers)
        check_variables(self.spec.judged, rows)
        results = self.loop.run_until_complete(self.judge(rows))
        columns = result_arrays(results, self.spec.names)
        if self.spec.packed:
            return pyarrow.table(columns)
        out = batch
        if NUMBER in out.column_names:  # numbers the driver added: `row` holds them
            out = out.drop_columns([NUMBER])
        for name, values in columns.items():
            if name in out.column_names:
                out = out.drop_columns([name])  # the input's own row numbers, replaced
            out = out.append_column(name, values)
        return out

    async def judge(self, rows: Sequence[Row]) -> list[ResultRow]:
        """Score the rows concurrently, at most the judge's `max_concurrency` at once."""
        spec, session = self.spec, self.session
        limit = asyncio.Semaphore(spec.llm.max_concurrency if spec.llm else 1)

        async def one(row: Row) -> ResultRow:
            async with limit:
                return await evaluate_row(
                    row, spec.judged, spec.retrieval, session, spec.prompts, self.conversations
                )

        return await gather_or_cancel(one(r) for r in rows)


def result_arrays(results: Sequence[ResultRow], names: Sequence[str]) -> dict[str, Any]:
    """The result columns of judged rows, as pyarrow arrays."""
    import pyarrow

    data = [r.to_json() for r in results]  # NaN as null, as in results.jsonl
    lines = [json.dumps(d, ensure_ascii=False, sort_keys=True) for d in data]
    columns: dict[str, Any] = {ROW: pyarrow.array([r.row for r in results], pyarrow.int64())}
    for name in names:
        scores = [r.scores.get(name, math.nan) for r in results]
        columns[name] = pyarrow.array(scores, pyarrow.float64())
        columns[f"{name}_reason"] = pyarrow.array(
            [r.reasons.get(name) for r in results], pyarrow.string()
        )
    evidence = [json.dumps(d["evidence"], ensure_ascii=False, sort_keys=True) for d in data]
    columns[EVIDENCE] = pyarrow.array(evidence, pyarrow.string())
    columns[RESULT] = pyarrow.array(lines, pyarrow.string())
    return columns
