"""The gates of a finished run: the exit codes of its outcome and the rules that make a
run incomplete (judge errors over max_error_rate, unreadable rows, a strict replay's
misses, a metric that scored no row)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from judge.errors import is_replay_miss
from judge.run.data import APP_FAILED
from judge.run.rows import ResultRow

if TYPE_CHECKING:
    from judge.run.results import EvaluationResult

PASSED = 0
THRESHOLD_MISSED = 1  # a fail_under threshold was missed (`judge eval`'s exit 1)
INCOMPLETE = 3  # scores are missing: judge errors, unreadable rows, a replay's misses (exit 3)
# Above 5% of rows without scores, a mean can move by more than a typical 95% CI is wide:
# the missing rows shift a [0, 1] metric's mean by up to their share (see judge_error_rate).
DEFAULT_MAX_ERROR_RATE = 0.05
SHOWN_ROWS = 3  # rows named for a failure that concerns many


def no_scores_failure(result: EvaluationResult, unscored: Sequence[str]) -> str | None:
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


def error_rate_failure(result: EvaluationResult, max_rate: float) -> str | None:
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


def unreadable_failure(result: EvaluationResult, max_rate: float) -> tuple[str | None, str | None]:
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


def replay_failure(result: EvaluationResult) -> str | None:
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
