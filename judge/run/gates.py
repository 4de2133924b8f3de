"""`Gates`: what a finished run must meet, one value for every front end (`judge eval
--gate`/`--fail-under`, `EvaluationResult.write`, `judge.assert_evaluation`, the trace
export's pass/fail labels): direction-aware bounds on metrics' means, and the rules that
make a run incomplete (judge errors or unreadable rows over max_error_rate, a strict
replay's misses, a metric that scored no row), with the exit codes of the outcome.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.errors import JudgeError, is_replay_miss
from judge.formatting import counted
from judge.metrics.registry import higher_is_better
from judge.run.data import APP_FAILED
from judge.run.result_view import ResultView
from judge.run.rows import MetricSummary, ResultRow

PASSED = 0
THRESHOLD_MISSED = 1  # a fail_under threshold was missed (`judge eval`'s exit 1)
INCOMPLETE = 3  # scores are missing: judge errors, unreadable rows, a replay's misses (exit 3)
# Above 5% of rows without scores, a mean can move by more than a typical 95% CI is wide:
# the missing rows shift a [0, 1] metric's mean by up to their share (see judge_error_rate).
DEFAULT_MAX_ERROR_RATE = 0.05
SHOWN_ROWS = 3  # rows named for a failure that concerns many
# A mean this close to a bound is on it: summing floats is off in the last digits.
ROUNDING = 1e-9
_GATE = re.compile(
    r"\s*(?P<metric>[^<>=\s](?:[^<>=]*[^<>=\s])?)\s*(?P<op>>=|<=)\s*(?P<value>\S+)\s*"
)


@dataclass(frozen=True)
class GateWords:
    """How the caller names the gates' settings, for its error messages: a keyword
    argument under Python, a flag under the CLI."""

    gate: str = "gates"
    fail_under: str = "fail_under"
    max_error_rate: str = "max_error_rate"
    allow_nan: str = "allow_nan"

    def gate_example(self, text: str) -> str:
        """How the caller writes one gate string."""
        return f"--gate {text!r}" if self.gate.startswith("--") else f"{self.gate}=[{text!r}]"

    def allow_example(self, metric: str) -> str:
        """How the caller lets a metric's undefined rows be left out of its mean."""
        if self.allow_nan.startswith("--"):
            return f"{self.allow_nan} {metric}"
        return f"{self.allow_nan}=True (or {self.allow_nan}={{{metric!r}}})"


PYTHON_WORDS = GateWords()
CLI_WORDS = GateWords("--gate", "--fail-under", "--max-error-rate", "--allow-nan")


@dataclass(frozen=True)
class Bound:
    """One gate on a metric's mean: at least `value` (`METRIC>=VALUE`), or at most
    (`METRIC<=VALUE`, for a metric where lower is better such as hallucination_rate)."""

    metric: str
    value: float
    at_most: bool = False
    # a --fail-under/fail_under floor: refused on a metric where lower is better
    floor: bool = field(default=False, compare=False, repr=False)

    def passes(self, score: float) -> bool:
        """Whether the score meets the bound; an undefined (NaN) score never does. A mean
        off the bound by float rounding alone meets it (three rows of 0.7 have the mean
        0.6999999999999998)."""
        if math.isclose(score, self.value, rel_tol=ROUNDING, abs_tol=ROUNDING):
            return True
        return score <= self.value if self.at_most else score >= self.value

    def missed(self, mean: float) -> str:
        """The bound missed by `mean`, as summary.json and `judge eval` say it."""
        shown = "n/a" if math.isnan(mean) else f"{mean:.4f}"
        if shown != "n/a" and float(shown) == float(_shown(self.value)):  # not "0.85 < 0.85"
            shown = f"{mean:.10g}"
        return f"{self.metric} = {shown} {'>' if self.at_most else '<'} {_shown(self.value)}"

    def __str__(self) -> str:
        return f"{self.metric}{'<=' if self.at_most else '>='}{_shown(self.value)}"


def _shown(value: float) -> str:
    """A bound's value with every digit it was given (0.8500001 is not 0.85), shortest."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def good_side(metric: str, value: float, lower_is_better: Collection[str] = ()) -> Bound:
    """The bound on the metric's good side: a floor where higher is better, a cap where
    lower is (the trace export's --threshold, a plain number of assert_evaluation);
    `lower_is_better` names the run's own metrics where lower is (`RunConfig`'s), which
    the built-ins' registry does not know."""
    own = metric in users_metrics(lower_is_better)
    return Bound(metric, value, at_most=own or not higher_is_better(metric))


def users_metrics(names: Iterable[str]) -> list[str]:
    """The names that are no metric of judge's own: a `lower_is_better` read from a
    summary.json (which results.jsonl's sha256 does not cover) cannot turn a built-in
    metric's direction, which is judge's."""
    from judge.ir.measure_names import parse_measure
    from judge.metrics.registry import get_metric

    own = []
    for name in names:
        try:
            get_metric(name)
            continue
        except JudgeError:
            pass
        try:
            parse_measure(name)
            continue
        except JudgeError:
            own.append(name)
    return own


def parse_gate(text: str, words: GateWords = PYTHON_WORDS) -> Bound:
    """A `METRIC>=VALUE` or `METRIC<=VALUE` string as a `Bound`."""
    found = _GATE.fullmatch(text) if isinstance(text, str) else None
    value = _number(found.group("value")) if found else math.nan
    if found is None or not math.isfinite(value):  # ±inf passes or fails every run
        raise JudgeError(
            f"{words.gate_example(text)}: write a gate as METRIC>=VALUE (a floor) or "
            f"METRIC<=VALUE (a cap), e.g. {words.gate_example('faithfulness>=0.8')} or "
            f"{words.gate_example('hallucination_rate<=0.05')}"
        )
    return Bound(found.group("metric"), value, at_most=found.group("op") == "<=")


def floor(metric: str, value: float, words: GateWords = PYTHON_WORDS) -> Bound:
    """A `--fail-under METRIC=VALUE` floor; refused on a metric where lower is better,
    which a floor would fail for being good."""
    if not higher_is_better(metric):
        raise _no_floor(metric, value, words)
    return Bound(metric, value, floor=True)


def _no_floor(metric: str, value: float, words: GateWords) -> JudgeError:
    """The error of a fail_under floor on a metric where lower is better."""
    return JudgeError(
        f"{words.fail_under} {metric}={value:g}: lower is better for {metric}, so a "
        f"floor would fail the runs that are good; cap it with "
        f"{words.gate_example(f'{metric}<={value:g}')}"
    )


def check_fail_under(fail_under: object, words: GateWords = PYTHON_WORDS) -> None:
    """Refuse a fail_under that is not a mapping of metric to number."""
    if fail_under is not None and not isinstance(fail_under, Mapping):
        raise JudgeError(
            f"{words.fail_under}={fail_under!r}: give a mapping of metric to its lowest "
            f"mean, e.g. {words.fail_under}={{'faithfulness': 0.8}}"
        )


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


@dataclass(frozen=True)
class Verdict:
    """What the gates say of a run: `code` (0 passed, 1 a bound missed, 3 scores are
    missing; 3 wins over 1), the bounds missed, the reasons the run is incomplete as
    (what, why), notes worth saying although the run passed, and the metrics that scored
    no row."""

    code: int
    missed: tuple[str, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    unscored: tuple[str, ...] = ()
    error_rate_failed: bool = False
    unreadable_failed: bool = False
    replay_missed: bool = False


@dataclass(frozen=True)
class Gates:
    """What a finished run must meet to pass.

    Attributes:
        bounds: the metrics' means, each at least or at most a value.
        max_error_rate: the largest share of judged rows with a failed judge, and of all
            rows that could not be read, that passes (exit 3 above it). A strict replay
            that missed a judgment, and a metric that scored no row, fail whatever it says.
        allow_nan: True, or the metrics whose undefined rows (NaN: no claims, no
            contexts, no ground truth) may be left out of the mean a bound holds; by
            default a gated metric with undefined rows misses its bound, as a mean over
            the rest could stand on a few rows (`undefined_rows`).
        words: how the caller names these settings, for error messages.
    """

    bounds: tuple[Bound, ...] = ()
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    words: GateWords = field(default=PYTHON_WORDS, compare=False, repr=False)
    allow_nan: bool | frozenset[str] = False

    def __post_init__(self) -> None:
        rate = self.max_error_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
            raise JudgeError(  # also rejects nan
                f"{self.words.max_error_rate} {rate}: give a share from 0 to 1"
            )
        for bound in self.bounds:  # ±inf passes or fails every run, and is not JSON
            if not math.isfinite(bound.value):
                raise JudgeError(
                    f"{self.words.gate_example(str(bound))}: give a finite number, e.g. "
                    f"{self.words.gate_example('faithfulness>=0.8')}"
                )

    @classmethod
    def of(
        cls,
        gates: Iterable[str | Bound] = (),
        *,
        fail_under: Mapping[str, float] | None = None,
        max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
        words: GateWords = PYTHON_WORDS,
        allow_nan: bool | Collection[str] = False,
    ) -> Gates:
        """The gates of `METRIC>=VALUE`/`METRIC<=VALUE` strings (or `Bound`s) and of
        `fail_under` floors (refused on a metric where lower is better).

        Args:
            gates: the bounds, as strings or `Bound`s.
            fail_under: metric -> the lowest mean that passes.
            max_error_rate: see `Gates.max_error_rate`.
            allow_nan: see `Gates.allow_nan`.
            words: how the caller names these settings (`CLI_WORDS` under the CLI).
        """
        if isinstance(gates, str):
            raise JudgeError(
                f"{words.gate} {gates!r}: give a list of gates, e.g. {words.gate_example(gates)}"
            )
        bounds = [g if isinstance(g, Bound) else parse_gate(g, words) for g in gates]
        check_fail_under(fail_under, words)
        for metric, value in (fail_under or {}).items():
            number = value if isinstance(value, (int, float)) else math.nan
            if isinstance(value, bool) or not math.isfinite(number):
                raise JudgeError(
                    f"{words.fail_under} {metric}: give a finite number, not {value!r}"
                )
            bounds.append(floor(metric, float(number), words))
        return cls(tuple(bounds), max_error_rate, words, allowed_nan(allow_nan, words))

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics the bounds name, each once, in order."""
        return tuple(dict.fromkeys(b.metric for b in self.bounds))

    def check_metrics(self, computed: Iterable[str], lower_is_better: Collection[str] = ()) -> None:
        """Refuse gates on metrics the run does not compute, and fail_under floors on
        `lower_is_better` (the run's own metrics where lower is better, which `floor`
        cannot know), before any row is judged."""
        lower = users_metrics(lower_is_better)
        for bound in self.bounds:
            if bound.floor and bound.metric in lower:
                raise _no_floor(bound.metric, bound.value, self.words)
        names = list(computed)
        unknown = [m for m in self.metrics if m not in names]
        if unknown:
            one = len(unknown) == 1
            raise JudgeError(
                f"{'a gate names' if one else 'gates name'} {', '.join(unknown)}, which the "
                f"run does not compute (its metrics: {', '.join(names) or 'none'}): add "
                f"{'it' if one else 'them'} to the metrics or drop the gate"
            )
        self.check_allow_nan(names)

    def check_allow_nan(self, computed: Iterable[str]) -> None:
        """Refuse an allow_nan naming a metric the run does not compute (a misspelt name
        would leave the metric it meant failing, the name given never questioned)."""
        if isinstance(self.allow_nan, bool):
            return
        names = list(computed)
        strays = sorted(m for m in self.allow_nan if m not in names)
        if strays:
            flag = self.words.allow_nan
            raise JudgeError(
                f"{flag if flag.startswith('--') else flag + '='} names {', '.join(strays)}, "
                f"which the run does not compute (its metrics: {', '.join(names) or 'none'}):"
                " name the metrics whose undefined rows the gates may leave out"
            )

    def summary(self, missed: Sequence[str]) -> dict[str, Any]:
        """The gates as summary.json records them ("required": the floor by metric, the
        highest where a metric has several: the run is held to every one)."""
        required: dict[str, float] = {}
        for b in self.bounds:
            if not b.at_most:
                required[b.metric] = max(b.value, required.get(b.metric, b.value))
        return {
            "required": required,
            "gates": [str(b) for b in self.bounds],
            "missed": list(missed),
        }

    def missed(
        self,
        summary: Mapping[str, MetricSummary],
        intervals: Mapping[str, tuple[float, float]] | None = None,
        what: str = "interval",
    ) -> list[str]:
        """The bounds the means miss; a metric without a mean (NaN) misses every bound. A
        metric in `intervals` (`judge eval --labels`: its label-corrected interval) is
        held to its interval's far end instead of its mean (`missed_by_intervals`)."""
        held = intervals or {}
        missed = []
        for b in self.bounds:
            if b.metric in held:
                missed += Gates((b,)).missed_by_intervals(held, what)
                continue
            stats = summary.get(b.metric)
            mean = stats.mean if stats is not None else math.nan
            undefined = self.undefined_rows(stats) if stats is not None else None
            if not math.isnan(mean) and undefined is not None:
                missed.append(f"{b.metric}: {undefined}")
            elif not b.passes(mean):
                missed.append(b.missed(mean))
        return missed

    def undefined_rows(self, stats: MetricSummary) -> str | None:
        """Why a gated metric's mean cannot be held to a bound for its undefined rows, or
        None: the one rule of `judge eval --gate` (and every front end of `Gates.verdict`)
        and `judge.assert_evaluation`. A metric with undefined rows (NaN: no claims, no
        contexts, no ground truth) misses its bounds unless `allow_nan` allows it: a mean
        over the rest could stand on a few rows (1 scored of 100 passed a gate)."""
        undefined = sum(stats.nan.values())
        allowed = self.allow_nan is True or (
            not isinstance(self.allow_nan, bool) and stats.metric in self.allow_nan
        )
        if not undefined or allowed:
            return None
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(stats.nan.items()))
        return (
            f"{counted(undefined, 'row')} undefined ({reasons}); pass "
            f"{self.words.allow_example(stats.metric)} to gate the mean of the "
            f"{counted(stats.scored, 'row')} scored, which could stand on a few rows"
        )

    def missed_by_intervals(
        self, intervals: Mapping[str, tuple[float, float]], what: str = "interval"
    ) -> list[str]:
        """The bounds an interval misses (`judge estimate --gate`: a label-corrected mean's
        interval): a floor (METRIC>=VALUE) is met when the interval's lower end meets it, a
        cap (METRIC<=VALUE) when its upper end does, so a gate passes only when the whole
        interval is on its good side; a metric without an interval misses every bound.

        Args:
            intervals: metric -> (low, high).
            what: what the intervals are, as the messages name them.
        """
        missed = []
        for b in self.bounds:
            low, high = intervals.get(b.metric, (math.nan, math.nan))
            end = high if b.at_most else low
            if not b.passes(end):
                shown = "n/a" if math.isnan(end) else f"{end:.4f}"
                side = "upper" if b.at_most else "lower"
                missed.append(
                    f"{b.metric}: the {what}'s {side} end {shown} "
                    f"{'>' if b.at_most else '<'} {_shown(b.value)}"
                )
        return missed

    def verdict(
        self,
        result: ResultView,
        intervals: Mapping[str, tuple[float, float]] | None = None,
        what: str = "interval",
    ) -> Verdict:
        """Every gate applied to a finished run (a bound on a metric the run did not
        compute is missed: `check_metrics` refuses it first where that is an error); a
        metric in `intervals` is held to its interval's far end, named `what` (`missed`)."""
        missed = self.missed(result.summary, intervals, what)
        too_many = error_rate_failure(result, self.max_error_rate)
        unreadable_note, unreadable = unreadable_failure(result, self.max_error_rate)
        unscored = [m for m, s in result.summary.items() if not s.scored] if result.rows else []
        replay_missed = replay_failure(result)
        failures = tuple(
            (what, why)
            for what, why in (
                ("unreadable rows", unreadable),
                ("replay", replay_missed),
                ("error rate", too_many),
                ("no scores", no_scores_failure(result, unscored)),
            )
            if why
        )
        code = INCOMPLETE if failures else THRESHOLD_MISSED if missed else PASSED
        return Verdict(
            code,
            tuple(missed),
            failures,
            (unreadable_note,) if unreadable_note else (),
            tuple(unscored),
            error_rate_failed=too_many is not None,
            unreadable_failed=unreadable is not None,
            replay_missed=replay_missed is not None,
        )


def allowed_nan(allow_nan: object, words: GateWords = PYTHON_WORDS) -> bool | frozenset[str]:
    """`Gates.allow_nan` of an allow_nan= (True, False, or metric names), checked."""
    if isinstance(allow_nan, bool):
        return allow_nan
    if (
        isinstance(allow_nan, str)
        or not isinstance(allow_nan, Iterable)
        or not all(isinstance(m, str) for m in allow_nan)
    ):
        raise JudgeError(
            f"{words.allow_nan}={allow_nan!r}: {words.allow_nan} takes True or a collection "
            f"of metric names, e.g. {words.allow_nan}={{{allow_nan!r}}}"
        )
    return frozenset(allow_nan)


def no_scores_failure(result: ResultView, unscored: Sequence[str]) -> str | None:
    """Why the run fails for metrics that scored no row, whatever the cause: a metric
    without a single score is no result, whatever max_error_rate allows."""
    if not unscored:
        return None
    why = "; ".join(
        f"{metric} ("
        + ", ".join(
            [f"{n} {r}" for r, n in sorted(result.summary[metric].nan.items())]
            + (
                [f"{result.summary[metric].errored} errors"]
                if result.summary[metric].errored
                else []
            )
        )
        + ")"
        for metric in unscored
    )
    return f"no row was scored for {why}: see 'error', 'errors' and 'reasons' in results.jsonl"


def error_rate_failure(result: ResultView, max_rate: float) -> str | None:
    """Why the run fails for its judge errors, or None."""
    rate = result.judge_error_rate
    if not rate > max_rate:
        return None
    kinds = Counter(
        row.errors[metric].partition(":")[0]
        for row in result.rows
        for metric, reason in row.reasons.items()
        if reason == "judge_error" and metric in row.errors
    )
    most = f"; most often {kinds.most_common(1)[0][0]}" if kinds else ""
    return (
        f"judges failed in {result.rows_with_judge_errors} of {result.judged_rows} judged "
        f"rows ({rate:.1%}), over max_error_rate {max_rate:g}{most}: their scores are "
        "missing from the means; see 'errors' in results.jsonl"
    )


def _first(
    rows: Iterable[ResultRow], test: Callable[[ResultRow], str | None], limit: int = SHOWN_ROWS
) -> list[str]:
    """'row N: reason' of the first rows for which test gives a reason."""
    found = []
    for row in rows:
        reason = test(row)
        if reason:
            found.append(f"row {row.row}: {reason}")
            if len(found) == limit:
                break
    return found


def unreadable_failure(result: ResultView, max_rate: float) -> tuple[str | None, str | None]:
    """(a note on the rows that could not be read, why the run fails for them) or Nones.

    Unreadable rows (bad input: no question, contexts not a list...; in an experiment's
    app_outputs.jsonl, a question the app failed on) have no scores at all, so they count
    against max_error_rate as failed judges do."""
    total = len(result.rows)
    unreadable = total - result.judged_rows
    if not unreadable:
        return None, None
    shown: list[str] = []
    app_failed = 0
    for row in result.rows:  # read once: the first errors shown, the app's failures counted
        if row.error:
            if len(shown) < SHOWN_ROWS:
                shown.append(f"row {row.row}: {row.error}")
            app_failed += row.error.startswith(APP_FAILED)
    what = f"{unreadable} of {total} rows"
    if app_failed:  # an experiment's: the app's failures are not the input's
        what += f" ({app_failed} of them questions the app failed on)"
    note = (
        f"{what} could not be read and have no scores: "
        + "; ".join(shown)
        + ("; ..." if unreadable > len(shown) else "")
    )
    rate = unreadable / total
    if not rate > max_rate:
        return note, None
    fix = (
        "fix the input (see 'error' in results.jsonl) or map its columns with "
        "column_map={'field': ...}"
    )
    if app_failed == unreadable:
        fix = "see app_error in app_outputs.jsonl for why the app failed"
    elif app_failed:
        fix = "see app_error in app_outputs.jsonl and 'error' in results.jsonl"
    return note, (f"{what} ({rate:.1%}) could not be read, over max_error_rate {max_rate:g}: {fix}")


def replay_failure(result: ResultView) -> str | None:
    """Why a strict replay fails: a judgment was not in the cache (or damaged there). A
    replay that misses is not a replay, whatever max_error_rate allows."""
    if result.config.cache_mode != "replay" or not result.rows_with_judge_errors:
        return None

    def missed(row: ResultRow) -> str | None:
        for metric, error in row.errors.items():
            if is_replay_miss(error):  # its text is in results.jsonl ('errors')
                return str(metric)
        return None

    shown = _first(result.rows, missed, limit=1)
    if not shown:
        return None
    return (
        "the replay found no recorded judgment for some rows, so their scores are missing "
        f"(first: {shown[0]}); record them first with a cache that stores (not a replay), "
        "or check cache= and cache_as="
    )


def as_gates(
    gates: Gates | Iterable[str | Bound] | None,
    fail_under: Mapping[str, float] | None = None,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
) -> Gates:
    """The gates of a Python call's `gates=`, `fail_under=` and `max_error_rate=`."""
    if isinstance(gates, Gates):
        return given_whole(gates, bool(fail_under), max_error_rate)
    return Gates.of(gates or (), fail_under=fail_under, max_error_rate=max_error_rate)


def given_whole(gates: Gates, fail_under_given: bool, max_error_rate: float) -> Gates:
    """A `judge.Gates` given as `gates=`: it holds the bounds and the error rate itself, so
    a `fail_under=` or `max_error_rate=` beside it is refused, not silently dropped."""
    if fail_under_given or max_error_rate != DEFAULT_MAX_ERROR_RATE:
        raise JudgeError(
            "gates= is a judge.Gates: give its bounds (fail_under's too) and max_error_rate "
            "in it, or give gates= as strings such as ['faithfulness>=0.8']"
        )
    return gates
