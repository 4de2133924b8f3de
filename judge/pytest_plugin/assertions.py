"""Assertions on judged scores: `judge.assert_scores` for one sample, `judge.assert_evaluation`
for a whole evaluation; the failure message shows each failing metric, its score and
threshold, and the judge's evidence behind it.

Nothing here imports pytest or the LLM stack: the assertions work in any test runner, and
the pytest plugin (`judge.pytest_plugin.plugin`) only adds how a failure is shown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from judge.errors import JudgeError
from judge.formatting import counted, number
from judge.metrics.registry import findings_of, higher_is_better
from judge.pytest_plugin.conversation import ConversationResult
from judge.run.gates import (
    DEFAULT_MAX_ERROR_RATE,
    Gates,
    allowed_nan,
    check_fail_under,
    given_whole,
    good_side,
)
from judge.run.gates import Bound as Gate

# How much of a long text a failure message shows.
_TEXT = 160
# How many pieces of evidence per metric a failure message lists.
_PIECES = 8


@dataclass(frozen=True)
class Bound:
    """A threshold with its direction: the score must be at least (or at most) `value`."""

    value: float
    at_most: bool = False

    def passes(self, score: float) -> bool:
        """Whether a defined score meets the threshold."""
        return score <= self.value if self.at_most else score >= self.value

    def __str__(self) -> str:
        return f"{'<=' if self.at_most else '>='} {self.value:g}"


def at_least(value: float) -> Bound:
    """A minimum: the score passes when it is `value` or more."""
    return Bound(_threshold(value), at_most=False)


def at_most(value: float) -> Bound:
    """A maximum, for rates where lower is better (hallucination_rate): the score passes
    when it is `value` or less."""
    return Bound(_threshold(value), at_most=True)


def _threshold(value: Any, metric: str | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        where = f" of {metric}" if metric else ""
        raise JudgeError(
            f"the threshold{where} is {value!r}: give a number, e.g. faithfulness=0.8, or "
            "judge.at_most(0.1) for a rate that must stay low"
        )
    return float(value)


def bounds(
    thresholds: Mapping[str, float | Bound] | None,
    named: Mapping[str, float | Bound],
    directions: Mapping[str, bool] | None = None,
) -> dict[str, Bound]:
    """Every threshold as a `Bound`: a plain number is a minimum for a metric where higher
    is better and a maximum where lower is (hallucination_rate); `directions` (metric ->
    higher is better) are the scored metrics' own, else the built-ins' are used."""
    given = {**(thresholds or {}), **named}
    if not given:
        raise JudgeError(
            "no thresholds given: name each metric's threshold, e.g. "
            "assert_scores(result, faithfulness=0.8), or {'ndcg@10': 0.5} for names with '@'"
        )
    out = {}
    for metric, value in given.items():
        if isinstance(value, Bound):
            out[metric] = value
        else:
            higher = (directions or {}).get(metric)
            if higher is None:
                higher = higher_is_better(metric)
            out[metric] = Bound(_threshold(value, metric), at_most=not higher)
    return out


class ScoreAssertionError(AssertionError):
    """A judged score missed its threshold (or was undefined); the message holds the
    evidence. `failures` names the metrics that failed."""

    def __init__(self, message: str, failures: list[str]):
        super().__init__(message)
        self.failures = failures


@dataclass(frozen=True)
class _Scored:
    """What an assertion reads of a result, whatever its type."""

    label: str
    scores: Mapping[str, float]
    reasons: Mapping[str, str]
    errors: Mapping[str, str]
    evidence: Mapping[str, Any]
    contexts: list[str]
    higher_is_better: Mapping[str, bool]


def _scored(result: Any) -> _Scored:
    """The scores and evidence of a `judge.score` result or a row of `judge.evaluate`."""
    scores = getattr(result, "scores", None)
    if not isinstance(scores, Mapping):
        raise JudgeError(
            f"assert_scores takes the result of judge.score (or rag_judge.score), or a row "
            f"of judge.evaluate's result, not {type(result).__name__}; for a whole "
            "evaluation use judge.assert_evaluation"
        )
    sample = getattr(result, "sample", None)
    source = sample if sample is not None else result
    label = getattr(source, "id", None) or getattr(source, "question", None) or ""
    return _Scored(
        label=_short(str(label)),
        scores=scores,
        reasons=getattr(result, "reasons", {}) or {},
        errors=getattr(result, "errors", {}) or {},
        evidence=getattr(result, "evidence", {}) or {},
        contexts=list(getattr(source, "contexts", None) or []),
        higher_is_better=getattr(result, "higher_is_better", None) or {},
    )


def assert_scores(
    result: Any,
    thresholds: Mapping[str, float | Bound] | None = None,
    *,
    allow_nan: bool | Collection[str] = False,
    **named: float | Bound,
) -> None:
    """Fail unless every named metric of one judged sample meets its threshold.

    Args:
        result: a `SampleResult` of `judge.score` / `rag_judge.score`, one row of an
            `EvaluationResult`, or a `ConversationResult` of
            `rag_judge.score_conversation`, whose every turn must meet the thresholds.
        thresholds: `{metric: threshold}`, for names that are not Python identifiers
            (`{"ndcg@10": 0.5}`); merged with the keyword arguments.
        allow_nan: True, or the metrics whose undefined score (NaN: no claims in the
            answer, no contexts, no ground truth) passes; by default a NaN fails with its
            reason. A judge that failed (`judge_error`) always fails.
        **named: `metric=threshold`. A number is a minimum for metrics where higher is
            better and a maximum for those where lower is (hallucination_rate);
            `judge.at_least(x)` and `judge.at_most(x)` say it explicitly.

    Raises:
        ScoreAssertionError: (an AssertionError) listing each failing metric with its
            score, threshold and the judge's evidence: unsupported or contradicted
            claims with their reasons, contexts graded irrelevant, reverse questions.
            For a conversation, each failing turn with its question, and each of its
            claims with the verdict and what it rests on (a context, or a message of
            the conversation).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this function's
    if isinstance(result, ConversationResult):
        _assert_turns(result, thresholds, allow_nan, named)
        return
    scored = _scored(result)
    wanted = bounds(thresholds, named, scored.higher_is_better)
    allowed = _allowed(allow_nan)
    failures: list[str] = []
    blocks: list[str] = []
    for metric, bound in wanted.items():
        verdict = _check(scored, metric, bound, metric in allowed)
        if verdict is not None:
            failures.append(metric)
            blocks.append(verdict)
    if failures:
        head = f"{len(failures)} of {counted(len(wanted), 'judged score')} failed"
        if scored.label:
            head += f" for {scored.label!r}"
        raise ScoreAssertionError(head + "\n" + "\n".join(blocks), failures)


def _assert_turns(
    result: ConversationResult,
    thresholds: Mapping[str, float | Bound] | None,
    allow_nan: bool | Collection[str],
    named: Mapping[str, float | Bound],
) -> None:
    """assert_scores on every turn of a conversation: one failure naming each failing turn
    with its question, then its metrics' blocks with the claims' verdicts and sources."""
    __tracebackhide__ = True
    if not result.turns:
        raise ScoreAssertionError(f"conversation {result.id!r} has no judged turn", [])
    directions: dict[str, bool] = {}
    for turn in result.turns:
        directions.update(turn.higher_is_better)
    wanted = bounds(thresholds, named, directions)
    allowed = _allowed(allow_nan)
    failures: dict[str, None] = {}
    blocks: list[str] = []
    failed_turns = 0
    for turn in result.turns:
        scored = _scored(turn)
        own: list[str] = []
        for metric, bound in wanted.items():
            verdict = _check(scored, metric, bound, metric in allowed, turn_evidence_lines)
            if verdict is not None:
                failures[metric] = None
                own.append(verdict)
        if own:
            failed_turns += 1
            question = _short(turn.sample.question)
            blocks.append(f"  turn {turn.sample.turn}: {question!r}")
            blocks += ["\n".join("  " + line for line in b.splitlines()) for b in own]
    if failures:
        head = (
            f"{failed_turns} of {counted(len(result.turns), 'turn')} of conversation "
            f"{result.id!r} failed {', '.join(f'{m} {b}' for m, b in wanted.items())}"
        )
        raise ScoreAssertionError(head + "\n" + "\n".join(blocks), list(failures))


class _Everything:
    """allow_nan=True: every metric is allowed."""

    def __contains__(self, metric: object) -> bool:
        return True


def _allowed(allow_nan: bool | Collection[str]) -> Collection[str] | _Everything:
    """The metrics whose undefined score passes."""
    if allow_nan is True:
        return _Everything()
    if allow_nan is False:
        return ()
    if isinstance(allow_nan, str) or not all(isinstance(m, str) for m in allow_nan):
        raise JudgeError(
            f"allow_nan={allow_nan!r}: allow_nan takes True or a collection of metric names, "
            f"e.g. allow_nan={{{allow_nan!r}}}"
        )
    return set(allow_nan)


def _check(
    scored: _Scored,
    metric: str,
    bound: Bound,
    nan_allowed: bool,
    evidence: Callable[[str, Mapping[str, Any], list[str]], list[str]] | None = None,
) -> str | None:
    """The failure block of one metric, or None when it passes; `evidence` gives its
    evidence lines (default `evidence_lines`)."""
    if metric not in scored.scores:
        scored_names = ", ".join(scored.scores) or "none"
        return (
            f"  {metric}: not scored (scored: {scored_names}); add it to the metrics the "
            "sample is judged with"
        )
    value = float(scored.scores[metric])
    if math.isnan(value):
        reason = scored.reasons.get(metric, "undefined")
        error = scored.errors.get(metric)
        if error is None and nan_allowed:
            return None
        line = f"  {metric}: undefined ({reason}), threshold {bound}"
        if error is not None:
            return f"{line}\n    the judge failed: {_short(error, 400)}"
        return f"{line}; pass allow_nan=True (or allow_nan={{{metric!r}}}) if that is expected"
    if bound.passes(value):
        return None
    lines = [f"  {metric}: {number(value)}, threshold {bound}"]
    shown = (evidence or evidence_lines)(metric, scored.evidence, scored.contexts)
    lines += [f"    {piece}" for piece in shown]
    return "\n".join(lines)


def evidence_lines(metric: str, evidence: Mapping[str, Any], contexts: list[str]) -> list[str]:
    """The judge's evidence behind one metric's score, a line a piece: of each finding the
    items that do not speak for the score, else its summary."""
    pieces: list[str] = []
    for finding in findings_of(metric, evidence, contexts):
        bad = [i for i in finding.items if i.ok is not True]
        if not bad:
            pieces.append(_short(finding.summary, 400))
        for item in bad:
            text = f": {_short(item.text)!r}" if item.text else ""
            reason = f" ({_short(item.reason)})" if item.reason else ""
            pieces.append(f"{item.name} {item.verdict}{text}{reason}")
    if len(pieces) > _PIECES:
        pieces = [*pieces[:_PIECES], f"... and {len(pieces) - _PIECES} more"]
    return pieces or ["(no evidence recorded for this metric)"]


def turn_evidence_lines(metric: str, evidence: Mapping[str, Any], contexts: list[str]) -> list[str]:
    """A conversation turn's evidence behind one metric's score: the items that do not
    speak for it (unsupported claims first), then those resting on a source (a claim
    supported by a context or by a message of the conversation), each with its verdict
    and source; of a finding without such items, its summary."""
    bad: list[str] = []
    sourced: list[str] = []
    for finding in findings_of(metric, evidence, contexts):
        against = [i for i in finding.items if i.ok is not True]
        resting = [i for i in finding.items if i.ok is True and i.source]
        if not against and not resting:
            bad.append(_short(finding.summary, 400))
        for item in finding.items:
            if item.ok is True and not item.source:
                continue
            source = f" by {item.source}" if item.source else ""
            text = f": {_short(item.text)!r}" if item.text else ""
            reason = f" ({_short(item.reason)})" if item.reason and item.ok is not True else ""
            (sourced if item.ok is True else bad).append(
                f"{item.name} {item.verdict}{source}{text}{reason}"
            )
    pieces = bad + sourced
    if len(pieces) > _PIECES:
        pieces = [*pieces[:_PIECES], f"... and {len(pieces) - _PIECES} more"]
    return pieces or ["(no evidence recorded for this metric)"]


def _short(text: str, limit: int = _TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def assert_evaluation(
    result: Any,
    fail_under: Mapping[str, float | Bound] | None = None,
    *,
    gates: Gates | Iterable[str] | None = (),
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    allow_nan: bool | Collection[str] = False,
) -> None:
    """Fail unless a whole evaluation meets its gates, as `judge eval --gate` judges it.

    Args:
        result: an `EvaluationResult` (`judge.evaluate`, `rag_judge.evaluate`).
        fail_under: `{metric: threshold}`: a number is a minimum for metrics where higher
            is better and a maximum for those where lower is (hallucination_rate);
            `judge.at_least(x)` and `judge.at_most(x)` say it explicitly.
        gates: bounds as `judge eval --gate` takes them, e.g. `["faithfulness>=0.8",
            "hallucination_rate<=0.05"]`, or a `judge.Gates` (its max_error_rate then
            replaces `max_error_rate`).
        max_error_rate: the largest share of judged rows with a failed judge, and of all
            rows that could not be read, that passes.
        allow_nan: True, or the metrics whose undefined rows (NaN: no claims, no
            contexts, no ground truth) may be left out of the mean; by default a metric
            with undefined rows fails, naming their reasons, as a mean over the rest could
            stand on a few rows.

    Raises:
        ScoreAssertionError: naming each mean that missed with its 95% interval and the
            rows scored, the undefined rows, and why the run is incomplete as `judge
            eval` says it (exit 3): the judge error rate or unreadable rows over
            max_error_rate, a strict replay's misses, a metric that scored no row.
    """
    __tracebackhide__ = True
    summary = getattr(result, "summary", None)
    if not isinstance(summary, Mapping):
        raise JudgeError(
            f"assert_evaluation takes the result of judge.evaluate (or rag_judge.evaluate), "
            f"not {type(result).__name__}; for one sample use judge.assert_scores"
        )
    config = getattr(result, "config", None)
    lower = list(getattr(config, "lower_is_better", None) or [])
    checked = _gates(gates, fail_under, max_error_rate, lower)
    if allow_nan is not False:  # the Gates' rule of undefined rows, allowed here
        if isinstance(gates, Gates) and gates.allow_nan is not False:
            raise JudgeError(
                "gates= is a judge.Gates with its own allow_nan: give allow_nan in it, or "
                "here, not both"
            )
        checked = dataclasses.replace(checked, allow_nan=allowed_nan(allow_nan))
    checked.check_allow_nan(summary)
    failures: list[str] = []
    lines: list[str] = []
    for bound in checked.bounds:
        metric = bound.metric
        stats = summary.get(metric)
        if stats is None:
            failures.append(metric)
            lines.append(f"  {metric}: not scored (scored: {', '.join(summary) or 'none'})")
            continue
        shown = (
            f"  {metric}: mean {number(stats.mean)} [{number(stats.ci_low)}, "
            f"{number(stats.ci_high)}] over {counted(stats.scored, 'row')}, threshold "
            f"{'<=' if bound.at_most else '>='} {bound.value:g}"
        )
        undefined = checked.undefined_rows(stats)  # judge eval --gate's rule, the same
        if undefined is not None:
            failures.append(metric)
            lines.append(f"{shown}; {undefined}")
        elif not bound.passes(stats.mean):  # a NaN mean never passes
            failures.append(metric)
            lines.append(shown)
    rate = float(result.judge_error_rate)
    if rate > checked.max_error_rate:
        failures.append("judge_error_rate")
        lines.append(
            f"  judge_error_rate: {rate:.1%} of judged rows had a failed judge, over "
            f"max_error_rate {checked.max_error_rate:g}; see 'errors' in the rows"
        )
    if hasattr(result, "config"):  # a run's result: the rules of an incomplete run
        for what, why in checked.verdict(result).failures:
            if what != "error rate":  # said above, with the rows' word for it
                failures.append(what)
                lines.append(f"  {what}: {why}")
    if failures:
        tally = getattr(result, "tally", None)
        resampling = tally.resampling() if tally is not None else None
        if resampling is not None and resampling.unit == "conversation":
            lines.append(f"  (the intervals {resampling}: turns of one chat are not independent)")
        raise ScoreAssertionError(
            f"the evaluation failed {counted(len(failures), 'check')}\n" + "\n".join(lines),
            failures,
        )


def _gates(
    gates: Gates | Iterable[str] | None,
    fail_under: Mapping[str, float | Bound] | None,
    max_error_rate: float,
    lower_is_better: Collection[str] = (),
) -> Gates:
    """assert_evaluation's gates: the strings (or Gates) and the mapping's thresholds, a
    plain number on the metric's good side."""
    if isinstance(gates, Gates):
        return given_whole(gates, bool(fail_under), max_error_rate)
    check_fail_under(fail_under)
    mapped = [
        Gate(metric, value.value, value.at_most)
        if isinstance(value, Bound)
        else good_side(metric, _threshold(value, metric), lower_is_better)
        for metric, value in (fail_under or {}).items()
    ]
    return Gates.of([*Gates.of(gates or ()).bounds, *mapped], max_error_rate=max_error_rate)
