"""`judge.probe`: rerun the judges on perturbed copies of the rows and check the scores.

Every variant is an ordinary `judge.evaluate` run over rewritten rows, through one cache:
a second probe run makes no request, and the unperturbed rows are judged once for all
probes. Repeats differ by seed (and a temperature above 0), both part of the cache key, so
each repeat is stored under its own key.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import numpy as np

from judge.aio import sync_twin
from judge.cache.store import Cache
from judge.errors import InputFormatError, JudgeError
from judge.llm.config import LLM
from judge.metrics import scorers
from judge.metrics.evidence import Evidence
from judge.metrics.registry import relevant
from judge.metrics.resolve import MetricLike
from judge.probes import checks, perturb
from judge.probes.checks import Check
from judge.probes.result import ProbeResult
from judge.run.data import load_rows
from judge.run.evaluate import aevaluate
from judge.run.options import RunOptions, Unpack
from judge.run.results import EvaluationResult

PROBES = ("repeat", "order", "verbosity", "granularity")
REPEAT_TEMPERATURE = 0.7  # repeats sample; a judge at temperature 0 would only test the server
# Which metrics each probe checks (of those evaluated), and what it expects of them.
ORDER_INVARIANT = ("faithfulness", "faithfulness_strict", "context_recall", "context_focus")
PADDING_MUST_NOT_RAISE = ("faithfulness", "faithfulness_strict", "answer_relevancy")
RESPLIT_CHECKED = ("faithfulness", "faithfulness_strict")

# Runs one variant: (its name, its rows, optionally another judge model) -> its result.
Run = Callable[..., Awaitable[EvaluationResult]]


def _records(
    data: Any, column_map: Mapping[str, str] | None
) -> tuple[list[dict[str, Any]], int, str]:
    """The rows as canonical dicts (bad rows left out: nothing to perturb), how many were
    left out, and the source's description."""
    rows, _, source = load_rows(data, column_map)
    out = []
    for row in rows:
        s = row.sample
        if s is None:
            continue
        out.append(
            {
                **s.extra,
                "id": s.id,
                "question": s.question,
                "answer": s.answer,
                "contexts": list(s.contexts),
                "ground_truth": s.ground_truth,
            }
        )
    if not out:
        raise InputFormatError(f"{source}: no valid row to probe")
    return out, len(rows) - len(out), source


def _scores(result: EvaluationResult, metric: str) -> np.ndarray:
    return np.array([r.scores.get(metric, math.nan) for r in result.rows], dtype=np.float64)


def _expected_precision(result: EvaluationResult, orders: list[list[int]]) -> np.ndarray:
    """Context precision each row should have after its shuffle: the original grades,
    permuted (NaN where the original run has no grades)."""
    out = np.full(len(orders), math.nan)
    for i, (row, order) in enumerate(zip(result.rows, orders, strict=True)):
        grades = [g.grade for g in Evidence(row.evidence).context_grades()]
        if grades and len(grades) == len(order) and None not in grades:
            relevance = relevant([g for g in grades if g is not None])
            out[i] = scorers.context_precision(perturb.reorder(relevance, order))
    return out


async def aprobe(
    data: Any,
    *,
    llm: LLM,
    probes: Sequence[str] = PROBES,
    metrics: Sequence[MetricLike] | None = None,
    second_llm: LLM | None = None,
    repeats: int = 3,
    threshold: float = 0.5,
    seed: int = 0,
    **options: Unpack[RunOptions],
) -> ProbeResult:
    """Judge the rows as given and perturbed, and check that the scores behave (`probe`
    from sync code, `aprobe` awaited).

    Probes (each a list of `Check`s, one per metric, in the result):
    - repeat: each row judged `repeats` times, seeds seed+1 .. seed+repeats at temperature
      0.7 (or the llm's, if above 0): per-row standard deviation, and the share of rows
      whose scores fall on both sides of `threshold`;
    - order: contexts shuffled (seeded, never left in order): faithfulness, context_recall
      and context_focus must not move; context_precision must equal what the original
      grades imply for the new order;
    - verbosity: the answer padded with content-free filler in its language (English or
      Chinese): faithfulness and answer_relevancy must not gain;
    - granularity: the answer's sentences joined into one, and each on its own line:
      how far faithfulness moves;
    - models (with `second_llm`): Spearman and Cohen's kappa at `threshold` per metric.
    Tolerances: `judge.probes.checks.TOLERANCE`.

    Args:
        data: what `judge.evaluate` takes; rows with bad input are left out (counted).
        llm: the judge model.
        probes: which of repeat, order, verbosity, granularity to run.
        metrics: as in `judge.evaluate` (default its default metrics).
        second_llm: a second judge model for cross-model agreement.
        repeats: judgments per row in the repeat probe (at least 2).
        threshold: the pass mark for crossings and kappa.
        seed: seeds the context shuffles and the repeats.
        **options: embeddings, cache, column_map, concurrency, progress,
            progress_interval, as in `judge.evaluate`.

    Returns:
        A `ProbeResult`: the checks, each with its expectation, figures and whether it held.
    """
    unknown = sorted(set(probes) - set(PROBES))
    if unknown:
        raise JudgeError(f"unknown probe {', '.join(unknown)}; valid: {', '.join(PROBES)}")
    if "repeat" in probes and repeats < 2:
        raise JudgeError(f"repeats={repeats}: the repeat probe needs at least 2")
    if not 0 <= threshold <= 1:  # also refuses NaN
        raise JudgeError(f"threshold={threshold}: give a pass mark from 0 to 1")
    if not isinstance(llm, LLM):
        raise JudgeError("llm must be judge.LLM(model=...): the probes vary its settings")
    # The rows are canonical from here on: the variants' runs take no column_map.
    records, skipped, source = _records(data, options.pop("column_map", None))
    cache = options.get("cache")
    if cache is not None and not isinstance(cache, Cache):
        options["cache"] = Cache(cache)  # one connection for every variant's run
    runs: dict[str, EvaluationResult] = {}

    async def run(name: str, rows: list[dict[str, Any]], judge: LLM = llm) -> EvaluationResult:
        runs[name] = await aevaluate(rows, metrics=metrics, llm=judge, **options)
        return runs[name]

    base = await run("base", records)
    names = base.metrics
    found: list[Check] = []
    if "repeat" in probes:
        found += await _repeat(records, llm, names, repeats, threshold, seed, run)
    if "order" in probes:
        found += await _order(records, base, names, seed, run)
    if "verbosity" in probes:
        found += await _verbosity(records, base, names, run)
    if "granularity" in probes:
        found += await _granularity(records, base, names, run)
    if second_llm is not None:
        other = await run("second model", records, second_llm)
        for m in names:
            found.append(checks.models(m, _scores(base, m), _scores(other, m), threshold))
    config = {
        "source": source,
        "rows": len(records),
        "rows_skipped": skipped,
        "metrics": names,
        "probes": [p for p in PROBES if p in probes] + (["models"] if second_llm else []),
        "model": llm.model,
        "second_model": second_llm.model if second_llm else None,
        "repeats": repeats if "repeat" in probes else 0,
        "threshold": threshold,
        "seed": seed,
        "tolerance": dict(checks.TOLERANCE),
        "cache": base.config.get("cache"),
    }
    return ProbeResult(found, runs, config)


probe = sync_twin(aprobe)


async def _repeat(
    records: list[dict[str, Any]],
    llm: LLM,
    names: list[str],
    repeats: int,
    threshold: float,
    seed: int,
    run: Run,
) -> list[Check]:
    """The repeat probe: the rows judged again at seeds seed+1 .. seed+repeats."""
    temperature = llm.temperature if llm.temperature > 0 else REPEAT_TEMPERATURE
    repeated = [
        await run(
            f"repeat {k}", records, dataclasses.replace(llm, seed=seed + k, temperature=temperature)
        )
        for k in range(1, repeats + 1)
    ]
    return [checks.repeat(m, np.stack([_scores(r, m) for r in repeated]), threshold) for m in names]


async def _verbosity(
    records: list[dict[str, Any]], base: EvaluationResult, names: list[str], run: Run
) -> list[Check]:
    """The verbosity probe: every non-blank answer padded with filler."""
    padded = [
        {**r, "answer": perturb.pad(r["answer"])} if (r["answer"] or "").strip() else r
        for r in records
    ]
    result = await run("verbosity", padded)
    return [
        checks.no_gain(m, _scores(base, m), _scores(result, m))
        for m in names
        if m in PADDING_MUST_NOT_RAISE
    ]


async def _granularity(
    records: list[dict[str, Any]], base: EvaluationResult, names: list[str], run: Run
) -> list[Check]:
    """The granularity probe: the answer's sentences joined into one, then one per line."""
    found = []
    for variant, resplit in perturb.RESPLITS.items():
        result = await run(
            f"granularity:{variant}", [{**r, "answer": resplit(r["answer"] or "")} for r in records]
        )
        how = "joined into one" if variant == "joined" else "each on its own line"
        for m in (m for m in names if m in RESPLIT_CHECKED):
            found.append(
                checks.unchanged(
                    f"granularity:{variant}",
                    m,
                    _scores(base, m),
                    _scores(result, m),
                    f"the answer's sentences {how} leave the score where it was",
                )
            )
    return found


async def _order(
    records: list[dict[str, Any]], base: EvaluationResult, names: list[str], seed: int, run: Run
) -> list[Check]:
    """The order probe: contexts shuffled in rows that have two or more."""
    orders = [perturb.permutation(len(r["contexts"]), seed, i) for i, r in enumerate(records)]
    shuffled = [
        {**r, "contexts": perturb.reorder(r["contexts"], order)}
        for r, order in zip(records, orders, strict=True)
    ]
    result = await run("order", shuffled)
    several = np.array([len(r["contexts"]) >= 2 for r in records])

    def only(values: np.ndarray) -> np.ndarray:
        return np.where(several, values, math.nan)  # one context: nothing was shuffled

    found = []
    for m in names:
        if m in ORDER_INVARIANT:
            expectation = "contexts shuffled, the score stays"
            before = _scores(base, m)
        elif m == "context_precision":
            expectation = (
                "contexts shuffled, the score follows the original grades in the new order"
            )
            before = _expected_precision(base, orders)
        else:
            continue
        found.append(
            checks.unchanged("order", m, only(before), only(_scores(result, m)), expectation)
        )
    return found
