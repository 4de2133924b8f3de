"""`judge.dry_run`: what a run over some data would do, found without a single request.

Every row is read as `judge.evaluate` reads it (the same reader,
`judge.run.inputs.open_input`, column mapping and row errors, one row at a time), the
metrics are chosen as a run chooses them, and each row is scored by the real metric code
against a stand-in judge (`judge.run.stand_in.StandInJudge`, a `judge.llm.judge.Judge`
as `LLMSession` is): it renders the real prompts, counts the requests and their tokens,
refuses what the judge's context window would refuse, and answers with stand-in replies
shaped like a judge's (one claim per sentence of the text, one verdict, grade or check
per item), so that the requests a reply leads to (the verify call after the claims) are
counted too. No network client is ever made.

Counts are estimates: tokens are `judge.llm.pricing.estimate_tokens` (about four
characters a token), completion tokens are the size of the stand-in replies, a real
judge may re-ask or split a text into other claims, and a cached judgment costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from judge.aio import sync_twin
from judge.errors import ContextWindowError, InputFormatError, JudgeError
from judge.llm.config import LLM, Embeddings
from judge.llm.pricing import context_window, token_prices
from judge.metrics.prompts import Prompt, load_prompts
from judge.metrics.registry import JUDGE_ERROR, Metric
from judge.metrics.resolve import MetricChoice, MetricLike, choose_metrics
from judge.run.data import Row
from judge.run.dry_report import (
    NO_RETRIEVED_IDS,
    OVER_CONTEXT_WINDOW,
    DryRun,
    MetricCheck,
    no_row_scored,
    wanted_fields,
)
from judge.run.estimate import Estimate, add
from judge.run.inputs import InputRows, open_input
from judge.run.local import ROW_ERROR, evaluate_row
from judge.run.plan import RunPlan, check_variables
from judge.run.score import score_sample
from judge.run.shard import Shard, parse_shard
from judge.run.stand_in import NO_STAND_IN, StandInJudge

# The report types, importable from here as before.
__all__ = [
    "NO_RETRIEVED_IDS",
    "OVER_CONTEXT_WINDOW",
    "DryRun",
    "Estimate",
    "MetricCheck",
    "acheck_scorable",
    "adry_run",
    "arow_estimates",
    "check_scorable",
    "dry_run",
    "row_estimates",
]


async def adry_run(
    data: Any,
    *,
    metrics: Sequence[MetricLike] | str | None = None,
    llm: LLM | None = None,
    embeddings: Embeddings | None = None,
    column_map: Mapping[str, str] | None = None,
    shard: str | Shard | None = None,
    max_error_rate: float = 0.05,
) -> DryRun:
    """What `judge.evaluate` would do with the data, with no request made (`dry_run` from
    sync code, `adry_run` awaited): every row read and checked as a run reads it, what each
    metric would score or leave NaN and why, and the requests, tokens and cost a run would
    take (an estimate: see `ASSUMPTIONS`).

    Args:
        data: as for `judge.evaluate`: a Dataset, a list of dicts, a DataFrame or a path.
        metrics: as for `judge.evaluate`; None for the default metrics.
        llm: the judge model: its price and context window are used, it is never called.
            None still checks the data and counts requests and tokens; the cost is then
            unknown (a run needs a judge model for LLM-judged metrics).
        embeddings: the embedding model (answer_relevancy), never called.
        column_map: `{field: column}`, as for `judge.evaluate`.
        shard: `"I/N"`: only the rows that shard of a run would judge.
        max_error_rate: the largest share of rows that may be unreadable (or have a
            request over the context window) for the data to count as usable, as a run's
            `max_error_rate`.

    Returns:
        A `DryRun`: `usable` and its `problems`, a `MetricCheck` per metric, the `total`
        estimate (shared judgments counted once), `table()` and `to_dict()`.

    Raises:
        judge.errors.InputFormatError: the data cannot be read at all (no such file, no
            question column, a column_map naming a column the data lacks), or a metric
            needs a column it lacks; judge.errors.UnknownMetricError: a name no metric has.
    """
    if not 0 <= max_error_rate <= 1:  # also rejects nan
        raise JudgeError(f"max_error_rate {max_error_rate}: give a share from 0 to 1")
    part = parse_shard(shard) if shard is not None else None
    # Read as a run reads it: the same files accepted and refused, no row held.
    rows = open_input(data, column_map)
    columns = rows.columns
    choice = _choice(metrics, "retrieved_ids" in columns, embeddings)
    check_variables(list(choice.judged), rows)
    blocked = {
        m.name: f"{m.name} needs an embedding model: pass embeddings=Embeddings(model=...)"
        for m in choice.judged
        if m.needs_embeddings and embeddings is None
    }
    runnable = [m for m in choice.judged if m.name not in blocked]
    retrieval = list(choice.retrieval)
    prompts = load_prompts()  # a run's: read once
    checks = {
        m.name: MetricCheck(m.name, "judged", cannot_run=blocked.get(m.name)) for m in choice.judged
    }
    checks.update({name: MetricCheck(name, "retrieval") for name in retrieval})
    session = StandInJudge(llm, embeddings)
    total = Estimate()
    seen: dict[str, set[str]] = {name: set() for name in ["", *checks]}
    rows_over = 0
    count = 0
    unreadable: list[tuple[int, str]] = []
    for row in rows.only(rows.shard_of(part)):
        count += 1
        if row.sample is None:
            unreadable.append((row.number, row.error or ""))
        estimate = await _judge_row(session, row, runnable, retrieval, prompts, checks, seen[""])
        add(total, estimate)
        rows_over += bool(estimate.refused)
        if row.relevance and not row.retrieved_ids:
            for name in retrieval:
                warned = checks[name].warnings
                warned[NO_RETRIEVED_IDS] = warned.get(NO_RETRIEVED_IDS, 0) + 1
        # Each judged metric alone, for its own figures (and a blocked one's reasons).
        for metric in choice.judged:
            check = checks[metric.name]
            if row.sample is None:
                if metric.name in blocked:
                    _count(check, ROW_ERROR, None)
                continue
            session.counting(Estimate(), seen[metric.name])
            alone = await score_sample(row.sample, [metric], session, prompts=prompts)
            add(check.estimate, session.estimate)
            if metric.name in blocked:
                _count(check, alone.reasons.get(metric.name), alone.errors.get(metric.name))
    total.priced(llm, embeddings)
    for check in checks.values():
        check.estimate.priced(llm, embeddings)
    result = DryRun(
        source=rows.source,
        rows=count,
        unreadable=unreadable,
        model=llm.model if llm else None,
        embedding_model=embeddings.model if embeddings else None,
        context_window=(llm.context_window or context_window(llm.model)) if llm else None,
        metrics=list(checks.values()),
        total=total,
        rows_over_window=rows_over,
        notes=_notes(choice, llm, embeddings, total),
        max_error_rate=max_error_rate,
    )
    result.problems = _problems(result, list(blocked.values()), columns, _present(columns, rows))
    return result


dry_run = sync_twin(adry_run)


async def arow_estimates(
    data: Any,
    *,
    metrics: Sequence[MetricLike] | str | None = None,
    llm: LLM | None = None,
    embeddings: Embeddings | None = None,
    column_map: Mapping[str, str] | None = None,
) -> list[Estimate]:
    """Each row's own requests, tokens and price, as `dry_run` estimates a row given alone
    (nothing shared between rows), with the metrics chosen, the prompts read and the
    stand-in judge made once for them all (`row_estimates` from sync code): the price of
    each row `judge monitor --budget` charges, a batch at a time.

    Args:
        data: the rows, as for `judge.evaluate` (a list of dicts, ...).
        metrics, llm, embeddings, column_map: as for `dry_run`.
    """
    rows = open_input(data, column_map)
    choice = _choice(metrics, "retrieved_ids" in rows.columns, embeddings)
    check_variables(list(choice.judged), rows)
    runnable = [m for m in choice.judged if not (m.needs_embeddings and embeddings is None)]
    retrieval = list(choice.retrieval)
    prompts = load_prompts()
    checks = {m.name: MetricCheck(m.name, "judged") for m in choice.judged}
    checks.update({name: MetricCheck(name, "retrieval") for name in retrieval})
    session = StandInJudge(llm, embeddings)
    out = []
    for row in rows.only(rows.shard_of(None)):
        estimate = await _judge_row(session, row, runnable, retrieval, prompts, checks, set())
        estimate.priced(llm, embeddings)
        out.append(estimate)
    return out


row_estimates = sync_twin(arow_estimates)


async def _judge_row(
    judge: StandInJudge,
    row: Row,
    judged: list[Metric],
    retrieval: list[str],
    prompts: Mapping[str, Prompt],
    checks: Mapping[str, MetricCheck],
    seen: set[str],
) -> Estimate:
    """Judge one row as a run judges it, every given metric at once (judgments shared),
    with stand-in replies, and count each metric's outcome into its check; returns the
    row's requests and tokens (those in `seen` counted once)."""
    judge.counting(Estimate(), seen)
    record = await evaluate_row(row, judged, retrieval, judge, prompts)
    for name in [*(m.name for m in judged), *retrieval]:
        _count(checks[name], record.reasons.get(name), record.errors.get(name))
    return judge.estimate


def _choice(
    metrics: Sequence[MetricLike] | str | None, has_retrieval: bool, embeddings: Embeddings | None
) -> MetricChoice:
    """The metrics a run would compute, chosen as a run chooses them, judged ones too when
    no judge model is given; a metric asked for by name that needs embeddings is kept
    without them (the dry run says it cannot run, and what it would take)."""
    given = embeddings is not None or metrics is not None
    return choose_metrics(metrics, has_retrieval=has_retrieval, has_llm=True, embeddings=given)


def _count(check: MetricCheck, reason: str | None, error: str | None) -> None:
    """Count one row's outcome: scored, or NaN and why."""
    if reason == JUDGE_ERROR and error is not None:
        if NO_STAND_IN in error:
            reason = None  # a custom judge's reply: a request is counted, a score assumed
        elif error.startswith(ContextWindowError.__name__):
            reason = OVER_CONTEXT_WINDOW
    if reason is None:
        check.scored += 1
    else:
        check.not_scored[reason] = check.not_scored.get(reason, 0) + 1


def _notes(
    choice: MetricChoice, llm: LLM | None, embeddings: Embeddings | None, total: Estimate
) -> list[str]:
    notes = list(choice.notes)
    if llm is None and choice.judged:
        notes.append(
            "no judge model given (llm=...): the cost is unknown and no context window is "
            "checked; a run of LLM-judged metrics needs one"
        )
    elif llm is not None and total.chat_requests and token_prices(llm.model) is None:
        notes.append(f"the price of {llm.model} is unknown (not in litellm's price map)")
    if (
        embeddings is not None
        and total.embedding_requests
        and token_prices(embeddings.model) is None
    ):
        notes.append(f"the price of {embeddings.model} is unknown (not in litellm's price map)")
    return notes


def _problems(
    result: DryRun, blocked: list[str], columns: Mapping[str, str], present: Sequence[str]
) -> list[str]:
    """Why a run over the data would not work (empty: it would)."""
    problems = list(blocked)
    none = [c for c in result.metrics if c.cannot_run is None and c.scored == 0]
    others = [c.name for c in result.metrics if c not in none and c.cannot_run is None]
    problems.extend(no_row_scored(none, columns, present, others))
    rate = result.max_error_rate
    if result.unreadable and len(result.unreadable) / result.rows > rate:
        share = len(result.unreadable) / result.rows
        problems.append(
            f"{len(result.unreadable)} of {result.rows} rows ({share:.1%}) cannot be read, over "
            f"max_error_rate {rate:g}: fix the input or map its columns with "
            "column_map={'field': ...}"
        )
    judged = result.rows - len(result.unreadable)
    if result.rows_over_window and judged and result.rows_over_window / judged > rate:
        share = result.rows_over_window / judged
        problems.append(
            f"{result.rows_over_window} of {judged} rows ({share:.1%}) have a request over "
            f"{result.model}'s context window of {result.context_window or 0:,} tokens, over "
            f"max_error_rate {rate:g}: shorten or drop contexts, or use a model with a "
            "larger window"
        )
    return problems


def _present(columns: Mapping[str, str], rows: Iterable[Row] | InputRows) -> list[str]:
    """The data's column names: those of the fields, then the other columns of the rows
    (of rows read as the run goes, the columns no field reads: they are not read again)."""
    if isinstance(rows, InputRows):
        return list(dict.fromkeys([*columns.values(), *rows.extra_columns()]))
    extra = (k for r in rows if r.sample is not None for k in r.sample.extra)
    return list(dict.fromkeys([*columns.values(), *extra]))


async def acheck_scorable(plan: RunPlan, rows: Iterable[Row]) -> None:
    """Refuse a run in which no row can be read, or a metric would score no row for want
    of its fields, as `dry_run` calls such data unusable (`check_scorable` from sync code,
    `acheck_scorable` awaited): the rows are scored with stand-in replies, no request
    made, until every metric has scored one (the first row, on good data).

    Raises:
        judge.errors.InputFormatError: no row can be read (the first rows' errors); or the
            metrics that would score no row, the columns found and the mapping to make.
    """
    checks = {m.name: MetricCheck(m.name, "judged") for m in plan.metrics.judged}
    checks.update({n: MetricCheck(n, "retrieval") for n in plan.metrics.retrieval})
    pending = dict(checks)
    session = StandInJudge(None, None)  # no context window: only the fields matter here
    readable = False
    unreadable: list[str] = []  # the first rows' errors
    for row in rows:
        if not pending:
            return
        readable = readable or row.error is None
        if row.error is not None and len(unreadable) < 3:
            unreadable.append(f"row {row.number}: {row.error}")
        judged = [m for m in plan.metrics.judged if m.name in pending]
        retrieval = [n for n in plan.metrics.retrieval if n in pending]
        await _judge_row(session, row, judged, retrieval, plan.prompts, pending, set())
        pending = {name: check for name, check in pending.items() if not check.scored}
    if unreadable and not readable:
        # No row readable: no metric can score one, whatever max_error_rate allows; as
        # dry_run calls such data unusable, refused before any request.
        raise InputFormatError(
            f"{plan.source}: no row can be read, so no metric can score one ("
            + "; ".join(unreadable)
            + "): fix the input or map its columns with column_map={'field': ...}"
        )
    lacking = [c for c in pending.values() if wanted_fields(c) is not None]
    if lacking:
        others = [name for name in checks if checks[name] not in lacking]
        lines = no_row_scored(lacking, plan.columns, _present(plan.columns, rows), others)
        raise InputFormatError(f"{plan.source}: {'; '.join(lines)}")


check_scorable = sync_twin(acheck_scorable)
