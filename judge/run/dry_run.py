"""`judge.dry_run`: what a run over some data would do, found without a single request.

Every row is read as `judge.evaluate` reads it (the same loader, column mapping and row
errors), the metrics are chosen as a run chooses them, and each row is scored by the real
metric code against a stand-in session (`StandInSession`): it renders the real prompts,
counts the requests and their tokens, refuses what the judge's context window would
refuse, and answers with stand-in replies shaped like a judge's (one claim per sentence of
the text, one verdict, grade or check per item), so that the requests a reply leads to
(the verify call after the claims) are counted too. No network client is ever made.

Counts are estimates: tokens are `judge.llm.pricing.estimate_tokens` (about four
characters a token), completion tokens are the size of the stand-in replies, a real
judge may re-ask or split a text into other claims, and a cached judgment costs nothing.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from judge.aio import sync_twin
from judge.errors import ContextWindowError, InputFormatError, JudgeError
from judge.formatting import counted
from judge.json_values import canonical_json, sha256_hex
from judge.llm.config import LLM, Embeddings, PromptRef
from judge.llm.pricing import context_window, estimate_tokens, token_prices
from judge.llm.session import LLMSession, check_window
from judge.llm.usage import UsageLedger
from judge.metrics.custom import MISSING_FIELD
from judge.metrics.judges import sentences
from judge.metrics.prompts import load_prompts
from judge.metrics.registry import EMPTY_ANSWER, JUDGE_ERROR, NO_CONTEXTS, NO_GROUND_TRUTH
from judge.metrics.resolve import MetricChoice, MetricLike, choose_metrics
from judge.run.data import COLUMNS, Row, load_rows
from judge.run.local import NO_RELEVANCE_JUDGMENTS, ROW_ERROR, evaluate_row
from judge.run.plan import RunPlan, check_variables
from judge.run.progress import cost_text
from judge.run.score import score_sample
from judge.run.shard import Shard, parse_shard

M = TypeVar("M", bound=BaseModel)

# What a stand-in reply writes as a reason: a typical judge's reason, about 20 tokens.
STAND_IN_REASON = (
    "The retrieved context states this directly, in nearly the same words, so the "
    "statement is supported by it."
)
COMPLETION_ASSUMPTION = (
    "completion tokens are the size of stand-in replies: one claim per sentence of the "
    "text, one verdict, grade or check per item with a reason of about 20 tokens (a "
    "custom metric's reply: one such reason)"
)
# Reasons a dry run gives for a metric that would not score a row, besides the scorers'.
OVER_CONTEXT_WINDOW = "over_context_window"
NO_RETRIEVED_IDS = "no_retrieved_ids"  # a ranking without ids: scored 0, not NaN
# NaN reasons that say a row lacks a field, and the field (a custom prompt's column: "").
WANTED_FIELDS = {
    EMPTY_ANSWER: "answer",
    NO_CONTEXTS: "contexts",
    NO_GROUND_TRUTH: "ground_truth",
    NO_RELEVANCE_JUDGMENTS: "relevance",
    MISSING_FIELD: "",
}
_NO_STAND_IN = "dry run: no stand-in reply for a custom judge's output"
_BLOCK = re.compile(r"<(\w+)>(.*?)</\1>", re.DOTALL)
_EMBEDDING_BATCH: int = Embeddings.batch_size  # the default of a run without embeddings


@dataclass
class Estimate:
    """The requests and tokens of some judging, and their price when known.

    Attributes:
        chat_requests: chat requests that would be sent.
        embedding_requests: embedding requests (batches of texts) that would be sent.
        prompt_tokens: tokens of the rendered chat prompts (an estimate).
        completion_tokens: tokens of the replies, assumed (`COMPLETION_ASSUMPTION`).
        embedding_tokens: tokens of the texts embedded.
        refused: chat requests over the judge's context window: never sent, the metric
            of that row a judge error.
        by_judge: chat requests per judge (claims, verify, context_relevance, ...).
        cost: USD at the models' list prices; None when a price is unknown (or no model
            is named), never a false 0.
    """

    chat_requests: int = 0
    embedding_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embedding_tokens: int = 0
    refused: int = 0
    by_judge: dict[str, int] = field(default_factory=dict)
    cost: float | None = None

    def priced(self, llm: LLM | None, embeddings: Embeddings | None) -> None:
        """Set `cost` from the models' prices (None when a price that counts is unknown)."""
        cost = 0.0
        if self.chat_requests:
            chat = token_prices(llm.model) if llm is not None else None
            if chat is None:
                self.cost = None
                return
            cost += self.prompt_tokens * chat[0] + self.completion_tokens * chat[1]
        if self.embedding_requests:
            embed = token_prices(embeddings.model) if embeddings is not None else None
            if embed is None:
                self.cost = None
                return
            cost += self.embedding_tokens * embed[0]
        self.cost = cost

    def to_dict(self) -> dict[str, Any]:
        """The estimate as JSON values."""
        return {
            "chat_requests": self.chat_requests,
            "embedding_requests": self.embedding_requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "embedding_tokens": self.embedding_tokens,
            "refused": self.refused,
            "by_judge": dict(sorted(self.by_judge.items())),
            "cost": self.cost,
        }


@dataclass
class MetricCheck:
    """What one metric would do with the data.

    Attributes:
        name: the metric's name.
        kind: "judged" (LLM-judged) or "retrieval".
        scored: rows it would score.
        not_scored: NaN reason -> rows it would leave NaN (`no_ground_truth`,
            `no_contexts`, `empty_answer`, `row_error`, `no_relevance_judgments`,
            `over_context_window`, ...).
        warnings: reason -> rows scored in a way worth knowing (`no_retrieved_ids`: a
            retrieval metric scores such a row 0).
        cannot_run: why the metric cannot run at all (a message), or None.
        estimate: its requests and tokens if it ran alone (a run shares judgments
            between metrics: see `DryRun.total`).
    """

    name: str
    kind: str
    scored: int = 0
    not_scored: dict[str, int] = field(default_factory=dict)
    warnings: dict[str, int] = field(default_factory=dict)
    cannot_run: str | None = None
    estimate: Estimate = field(default_factory=Estimate)

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON values."""
        return {
            "name": self.name,
            "kind": self.kind,
            "scored": self.scored,
            "not_scored": dict(self.not_scored),
            "warnings": dict(self.warnings),
            "cannot_run": self.cannot_run,
            "estimate": self.estimate.to_dict() if self.kind == "judged" else None,
        }


@dataclass
class DryRun:
    """What a run over the data would do, found with no request made (`dry_run`).

    Attributes:
        source: where the rows came from.
        rows: the input rows (of the shard, when one is given).
        unreadable: (row number, error) of the rows that cannot be read.
        model: the judge model's name, or None when none was given.
        embedding_model: the embedding model's name, or None.
        context_window: the judge's context window in tokens, or None when unknown.
        metrics: one `MetricCheck` per metric, judged ones first.
        total: the run's requests and tokens, each shared judgment counted once, as a
            run makes it (metrics that cannot run left out).
        rows_over_window: rows with at least one request over the context window.
        notes: what else a run would say (default metrics left out, no judge model).
        problems: why the data is not usable for this run; empty when it is.
        max_error_rate: the share of unreadable rows (and of rows with a refused
            request) allowed, as for a run.
    """

    source: str
    rows: int
    unreadable: list[tuple[int, str]]
    model: str | None
    embedding_model: str | None
    context_window: int | None
    metrics: list[MetricCheck]
    total: Estimate
    rows_over_window: int = 0
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    max_error_rate: float = 0.05

    @property
    def usable(self) -> bool:
        """Whether a run over this data would work: every metric can run and score at
        least one row, and unreadable rows (and rows over the context window) are within
        `max_error_rate`."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The dry run as JSON values."""
        return {
            "dry_run": True,
            "source": self.source,
            "rows": self.rows,
            "unreadable": [{"row": n, "error": e} for n, e in self.unreadable],
            "model": self.model,
            "embedding_model": self.embedding_model,
            "context_window": self.context_window,
            "metrics": [m.to_dict() for m in self.metrics],
            "total": self.total.to_dict(),
            "rows_over_window": self.rows_over_window,
            "usable": self.usable,
            "problems": list(self.problems),
            "notes": list(self.notes),
            "assumptions": ASSUMPTIONS,
        }

    def table(self) -> str:
        """The dry run as a text table, with its notes and problems below."""
        lines = [
            f"dry run of {self.source}: {counted(self.rows, 'row')}, "
            f"{len(self.unreadable)} unreadable; "
            "no request was made",
            f"judge model: {self.model or 'none given'}"
            + (f" (context window {self.context_window:,} tokens)" if self.context_window else "")
            + f"; embedding model: {self.embedding_model or 'none given'}",
            "",
        ]
        head = ("metric", "rows", "chat", "embed", "prompt tok", "compl. tok", "cost", "not scored")
        body = [
            (
                m.name,
                f"{m.scored}/{self.rows}",
                *_figures(m.estimate, m.kind == "judged", self.model),
                _reasons(m) if m.cannot_run is None else f"CANNOT RUN: {m.cannot_run}",
            )
            for m in self.metrics
        ]
        body.append(("total", "", *_figures(self.total, True, self.model), "shared judgments once"))
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head) - 1)]
        for row in [head, *body]:
            cells = [
                row[i].ljust(widths[i]) if i < 2 else row[i].rjust(widths[i])
                for i in range(len(widths))
            ]
            lines.append("  ".join([*cells, row[-1]]).rstrip())
        lines.append("")
        for number, error in self.unreadable[:5]:
            lines.append(f"row {number} cannot be read: {error}")
        if len(self.unreadable) > 5:
            lines.append(f"... and {counted(len(self.unreadable) - 5, 'more unreadable row')}")
        if self.total.refused:
            lines.append(
                f"{counted(self.total.refused, 'request')} in "
                f"{counted(self.rows_over_window, 'row')} "
                "over the context window: a run would not send them (their metrics: judge errors)"
            )
        lines.extend(f"note: {n}" for n in self.notes)
        lines.append("estimate:")
        lines.extend(f"  - {a}" for a in ASSUMPTIONS)
        if self.problems:
            lines.extend(f"NOT USABLE: {p}" for p in self.problems)
        else:
            lines.append("usable: a run over this data would work")
        return "\n".join(lines)


ASSUMPTIONS = [
    "counts are estimates, made with no request",
    "tokens at about 4 characters each (1 per CJK character)",
    COMPLETION_ASSUMPTION,
    "a real judge may re-ask or find other claims, and a noncommittal answer needs no "
    "embedding request",
    "a judgment already in the cache is free; identical requests (and texts to embed) are "
    "counted once, as a run makes them once",
]


def _figures(e: Estimate, judged: bool, model: str | None) -> tuple[str, ...]:
    if not judged:
        return ("-", "-", "-", "-", "-")
    if e.cost is not None:
        cost = cost_text(e.cost) or "$0"  # "" only when nothing is sent: a true 0
    elif not e.chat_requests and not e.embedding_requests:
        cost = "$0"  # nothing is sent: a true 0
    else:
        cost = "price unknown" if model else "no model"
    return (
        f"{e.chat_requests:,}",
        f"{e.embedding_requests:,}",
        f"{e.prompt_tokens:,}",
        f"{e.completion_tokens:,}",
        cost,
    )


def _reasons(m: MetricCheck) -> str:
    listed = [f"{count} {reason}" for reason, count in sorted(m.not_scored.items())]
    listed += [f"{count} {reason} (scored 0)" for reason, count in sorted(m.warnings.items())]
    return ", ".join(listed)


def _blocks(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The data blocks of a rendered built-in prompt's user message, decoded (values are
    JSON with `<`, `>` and `&` escaped, so a block's end tag is never inside its data)."""
    user = next((str(m.get("content", "")) for m in messages if m.get("role") == "user"), "")
    found: dict[str, Any] = {}
    for tag, text in _BLOCK.findall(user):
        try:
            found[tag] = json.loads(text)
        except json.JSONDecodeError:
            continue
    return found


def _stand_in(prompt: str, blocks: Mapping[str, Any], output: type[M]) -> M:
    """A reply shaped like a judge's to one of the built-in prompts (by name)."""
    reply: dict[str, Any]
    if prompt == "claims":
        reply = {"claims": sentences(str(blocks.get("text") or ""))}
    elif prompt == "verify":
        reply = {
            "verdicts": [
                {"claim": i, "reason": STAND_IN_REASON, "verdict": "supported", "context": 0}
                for i in range(len(blocks.get("claims") or []))
            ]
        }
    elif prompt == "reverse_questions":
        count = output.model_json_schema()["properties"]["questions"].get("minItems", 3)
        # Questions of their own per answer, as a judge writes them (a run embeds each).
        about = " ".join(str(blocks.get("answer") or "").split()[:8])
        reply = {
            "questions": [f"Question {i + 1} answered by: {about}?" for i in range(count)],
            "noncommittal": False,
        }
    elif prompt == "context_relevance":
        reply = {
            "contexts": [
                {"context": i, "reason": STAND_IN_REASON, "grade": 2}
                for i in range(len(blocks.get("contexts") or []))
            ]
        }
    elif prompt == "context_sentences":
        reply = {"reason": STAND_IN_REASON, "needed": [0]}
    elif prompt == "citations":
        reply = {
            "checks": [
                {"check": i, "supported": True, "reason": STAND_IN_REASON}
                for i in range(len(blocks.get("checks") or []))
            ]
        }
    else:
        raise JudgeError(_NO_STAND_IN)
    try:
        return output.model_validate(reply)
    except ValidationError:
        raise JudgeError(_NO_STAND_IN) from None


class StandInSession(LLMSession):
    """A session that sends nothing: it counts each request a run would send into
    `estimate` (tokens of the rendered messages, the context window checked as a run
    checks it) and answers with a stand-in reply (`_stand_in`); embeddings are counted
    in batches as a run batches them, and answered with equal vectors.

    Args:
        llm: the judge model (None: no context window to check, no price).
        embeddings: the embedding model, or None.
    """

    def __init__(self, llm: LLM | None, embeddings: Embeddings | None):
        super().__init__(llm, embeddings=embeddings, cache=None)
        self.estimate = Estimate()
        self.seen: set[str] = set()  # requests and texts counted in this run already
        self._tokens: dict[str, int] = {}

    def counting(self, estimate: Estimate, seen: set[str]) -> None:
        """Count from now on into `estimate`, `seen` holding what was counted before."""
        self.estimate, self.seen = estimate, seen

    def count(self, text: str) -> int:
        """`estimate_tokens` of a text, remembered: one row's prompts repeat in its passes."""
        found = self._tokens.get(text)
        if found is None:
            if len(self._tokens) > 4096:
                self._tokens.clear()
            found = self._tokens[text] = estimate_tokens(text)
        return found

    async def chat(
        self,
        messages: Sequence[dict[str, Any]],
        output: type[M],
        *,
        n: int = 1,
        prompt: PromptRef | None = None,
        label: str = "chat",
        sample: str | None = None,
        ledger: UsageLedger | None = None,
    ) -> list[M]:
        """Count the request a run would send (or refuse, over the context window) and
        answer with `n` stand-in replies."""
        if self.llm is not None:
            try:
                check_window(self.llm, list(messages), label)
            except ContextWindowError:
                self.estimate.refused += 1
                raise
        try:
            reply: M | None = _stand_in(prompt.name if prompt else "", _blocks(messages), output)
        except JudgeError:
            reply = None  # a custom judge's output: counted, then the sentinel raised
        # A run makes an identical request once: shared in flight, or a cache hit.
        ref = (prompt.name, prompt.version) if prompt else None
        key = sha256_hex(canonical_json([ref, output.__name__, n, list(messages)]))
        if key not in self.seen:
            self.seen.add(key)
            e = self.estimate
            e.chat_requests += 1
            e.by_judge[label] = e.by_judge.get(label, 0) + 1
            e.prompt_tokens += sum(self.count(str(m.get("content", ""))) for m in messages)
            # A custom reply's size is unknown: a reason's worth of tokens is assumed.
            shown = reply.model_dump_json() if reply is not None else STAND_IN_REASON
            e.completion_tokens += n * self.count(shown)
        if reply is None:
            raise JudgeError(_NO_STAND_IN)
        return [reply] * n

    async def embed(
        self, texts: Sequence[str], *, label: str = "embeddings", ledger: UsageLedger | None = None
    ) -> list[list[float]]:
        """Count the embedding requests a run would send for texts; equal vectors back."""
        return self._embedded(texts).tolist()  # type: ignore[no-any-return]

    async def embed_array(
        self, texts: Sequence[str], *, label: str = "embeddings", ledger: UsageLedger | None = None
    ) -> np.ndarray:
        """`embed` as a matrix, a row per text."""
        return self._embedded(texts)

    def _embedded(self, texts: Sequence[str]) -> np.ndarray:
        # A run embeds a text once: a repeat is shared in flight or a cache hit.
        distinct = [t for t in dict.fromkeys(texts) if f"embed:{t}" not in self.seen]
        self.seen.update(f"embed:{t}" for t in distinct)
        batch = self.embeddings.batch_size if self.embeddings else _EMBEDDING_BATCH
        self.estimate.embedding_requests += math.ceil(len(distinct) / batch)
        self.estimate.embedding_tokens += sum(self.count(t) for t in distinct)
        return np.ones((len(texts), 2))


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
    part = parse_shard(shard) if isinstance(shard, str) else shard
    rows, columns, source = load_rows(data, column_map)
    if part is not None:
        rows = [r for r in rows if part.holds(r.number)]
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
    session = StandInSession(llm, embeddings)
    total = Estimate()
    seen: dict[str, set[str]] = {name: set() for name in ["", *checks]}
    rows_over = 0
    for row in rows:
        # The row as a run judges it: every runnable metric at once, judgments shared.
        session.counting(Estimate(), seen[""])
        record = await evaluate_row(row, runnable, retrieval, session, prompts)
        _add(total, session.estimate)
        rows_over += bool(session.estimate.refused)
        for name in [*(m.name for m in runnable), *retrieval]:
            _count(checks[name], record.reasons.get(name), record.errors.get(name))
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
            _add(check.estimate, session.estimate)
            if metric.name in blocked:
                _count(check, alone.reasons.get(metric.name), alone.errors.get(metric.name))
    total.priced(llm, embeddings)
    for check in checks.values():
        check.estimate.priced(llm, embeddings)
    unreadable = [(r.number, r.error or "") for r in rows if r.sample is None]
    result = DryRun(
        source=source,
        rows=len(rows),
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


def _choice(
    metrics: Sequence[MetricLike] | str | None, has_retrieval: bool, embeddings: Embeddings | None
) -> MetricChoice:
    """The metrics a run would compute, chosen as a run chooses them, judged ones too when
    no judge model is given; a metric asked for by name that needs embeddings is kept
    without them (the dry run says it cannot run, and what it would take)."""
    given = embeddings is not None or metrics is not None
    return choose_metrics(metrics, has_retrieval=has_retrieval, has_llm=True, embeddings=given)


def _add(into: Estimate, more: Estimate) -> Estimate:
    into.chat_requests += more.chat_requests
    into.embedding_requests += more.embedding_requests
    into.prompt_tokens += more.prompt_tokens
    into.completion_tokens += more.completion_tokens
    into.embedding_tokens += more.embedding_tokens
    into.refused += more.refused
    for label, count in more.by_judge.items():
        into.by_judge[label] = into.by_judge.get(label, 0) + count
    return into


def _count(check: MetricCheck, reason: str | None, error: str | None) -> None:
    """Count one row's outcome: scored, or NaN and why."""
    if reason == JUDGE_ERROR and error is not None:
        if _NO_STAND_IN in error:
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


def wanted_fields(check: MetricCheck) -> list[str] | None:
    """The fields for want of which a metric scores no row (a custom prompt's column as
    ""), or None: it scores a row, cannot run, or scores none for other reasons (only
    unreadable rows, requests over the context window)."""
    reasons = set(check.not_scored) - {ROW_ERROR}
    if check.cannot_run is not None or check.scored or not reasons:
        return None
    if reasons - WANTED_FIELDS.keys():
        return None
    return [f for r, f in WANTED_FIELDS.items() if r in reasons]


def no_row_scored(
    checks: Sequence[MetricCheck],
    columns: Mapping[str, str],
    present: Sequence[str],
    others: Sequence[str] = (),
) -> list[str]:
    """What to say of metrics that would score no row, one line per lot that lacks the
    same: their reasons, and for want of fields the columns found and the mapping to make.

    Args:
        checks: the metrics that score no row.
        columns: field -> column, as the data's columns were resolved.
        present: the data's column names.
        others: the run's other metrics (the way to leave these out).
    """
    lots: dict[tuple[str, str], list[str]] = {}
    for check in checks:
        why = ", ".join(f"{c} {r}" for r, c in sorted(check.not_scored.items()))
        fields = wanted_fields(check)
        lack = "; ".join(_lacking(f, columns, present) for f in fields or [])
        lots.setdefault((why, lack), []).append(check.name)
    lines = []
    for (why, lack), names in lots.items():
        line = f"{_listed(names)} would score no row ({why})"
        if lack:
            them = "them" if len(names) > 1 else "it"
            out = f", or leave {them} out (metrics={','.join(others)!r})" if others else ""
            line += f": {lack}{out}"
        lines.append(line)
    return lines


def _lacking(field: str, columns: Mapping[str, str], present: Sequence[str]) -> str:
    """Why rows lack a field: no column for it (and the mapping to make), or its column
    empty."""
    if not field:
        return "a column the metric's prompt reads is empty"
    if field in columns:
        return f"{field} (column {columns[field]!r}) is empty"
    return COLUMNS.no_column(field, present)


def _listed(names: Sequence[str]) -> str:
    """a, b and c."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _present(columns: Mapping[str, str], rows: Iterable[Row]) -> list[str]:
    """The data's column names: those of the fields, then the other columns of the rows."""
    extra = (k for r in rows if r.sample is not None for k in r.sample.extra)
    return list(dict.fromkeys([*columns.values(), *extra]))


async def acheck_scorable(plan: RunPlan, rows: Sequence[Row]) -> None:
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
    session = StandInSession(None, None)  # no context window: only the fields matter here
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
        session.counting(Estimate(), set())
        record = await evaluate_row(row, judged, retrieval, session, plan.prompts)
        for name in [*(m.name for m in judged), *retrieval]:
            _count(pending[name], record.reasons.get(name), record.errors.get(name))
            if pending[name].scored:
                del pending[name]
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
