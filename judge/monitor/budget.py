"""`--budget`: a ceiling on judge requests or dollars per hour or per day, spent in steps of
the traces' start times so that a burst takes only its step's share, and never more than
the budget in an hour or day of the clock (a backlog of old traces included).

A row's price is what the dry run estimates for it (`judge.run.dry_run`, as `judge eval
--dry-run` shows it): its requests, and their cost at the model's list price. What was
spent is kept in the monitor's state (the `spend` table), in the same transaction as the
traces it was spent on, per hour and per day of the traces' start times: a restart, even
after kill -9, goes on with what the hour or day has left, and a budget changed from
hourly to daily at a restart still knows what the day has spent.
"""

from __future__ import annotations

import math
import re
import sqlite3
from dataclasses import dataclass

from judge.errors import JudgeError
from judge.llm.config import LLM, Embeddings
from judge.llm.pricing import token_prices

NS = 1_000_000_000
HOUR, DAY = 3600, 86400
PERIODS = {"h": HOUR, "hr": HOUR, "hour": HOUR, "d": DAY, "day": DAY}
# An hour is spent in 5-minute steps, a day in hourly ones: by the end of step k, at most
# (k+1)/steps of the budget.
STEPS = {HOUR: 12, DAY: 24}
_SPEC = re.compile(
    r"(?P<dollar>\$)?\s*(?P<amount>\d+(?:\.\d*)?|\.\d+)\s*(?:/\s*(?P<period>[a-z]+))?"
)
_FORMS = (
    "give requests or dollars per hour or day: 200/h, 5000/day, $3/day (a number alone is "
    "requests per hour)"
)


@dataclass(frozen=True)
class Budget:
    """A ceiling on what judging may take per hour or day of the traces' start times.

    Args:
        amount: requests (a whole number) or US dollars.
        dollars: whether `amount` is dollars (priced by the dry run's estimates).
        seconds: the period: 3600 (an hour) or 86400 (a day).
    """

    amount: float
    dollars: bool = False
    seconds: int = HOUR

    def __post_init__(self) -> None:
        if self.seconds not in STEPS:
            raise JudgeError(f"budget: a period of {self.seconds} s; give {HOUR} or {DAY}")
        try:
            finite = math.isfinite(self.amount)
        except OverflowError:  # an int past a float's range
            finite = False
        if not finite:  # before str(self), which takes int(amount)
            raise JudgeError(f"budget={self.amount!r:.20}: give a finite number, 0 or more")
        if not self.amount >= 0:
            raise JudgeError(f"budget={str(self)!r}: give 0 or more")
        if not self.dollars and self.amount != int(self.amount):
            raise JudgeError(f"budget={str(self)!r}: requests are whole; {_FORMS}")

    def __str__(self) -> str:
        period = "h" if self.seconds == HOUR else "day"
        if self.dollars:
            return f"${self.amount:g}/{period}"
        return f"{int(self.amount)}/{period}"

    @property
    def period(self) -> str:
        """The period's name: "hour" or "day"."""
        return "hour" if self.seconds == HOUR else "day"

    @property
    def steps(self) -> int:
        """The steps a period is spent in."""
        return STEPS[self.seconds]

    def allowed(self, into_ns: int) -> float:
        """What may be spent of a period by the end of the step `into_ns` nanoseconds into
        it falls in: what a quiet step left goes on to the next."""
        step = into_ns * self.steps // (self.seconds * NS)
        return self.amount * (step + 1) / self.steps


def parse_budget(value: int | str | Budget | None) -> Budget | None:
    """`--budget`: N (requests per hour, as before), N/h, N/day, $X/h, $X/day.

    Args:
        value: the text, a number of requests per hour, a `Budget`, or None (no ceiling).
    """
    if value is None or isinstance(value, Budget):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise JudgeError(f"budget={value!r}: {_FORMS}")
    if isinstance(value, int):
        if value < 0:
            raise JudgeError(f"budget={value}: give requests per hour, 0 or more")
        return Budget(value)
    match = _SPEC.fullmatch(value.strip().lower())
    period = match["period"] if match else None
    if match is None or (period is not None and period not in PERIODS):
        raise JudgeError(f"budget={value!r}: {_FORMS}")
    dollars = match["dollar"] is not None
    amount = float(match["amount"])
    if not math.isfinite(amount):  # digits past a float's range read as infinity
        raise JudgeError(f"budget={value!r}: give a finite number, 0 or more; {_FORMS}")
    if not dollars and amount != int(amount):
        raise JudgeError(f"budget={value!r}: requests are whole; {_FORMS}")
    return Budget(amount, dollars, PERIODS[period] if period else HOUR)


def check_priced(budget: Budget | None, llm: LLM | None, embeddings: Embeddings | None) -> None:
    """Refuse a dollar budget when a model's price is unknown: the rows could not be priced."""
    if budget is None or not budget.dollars:
        return
    for model in (llm, embeddings):
        if model is not None and token_prices(model.model) is None:
            raise JudgeError(
                f"budget={str(budget)!r}: the price of {model.model} is unknown (not in "
                "litellm's price map), so no row can be priced in dollars: give the budget "
                "in requests (budget='200/h' or '5000/day')"
            )


def charge(
    db: sqlite3.Connection,
    budget: Budget,
    start_ns: int,
    requests: int,
    dollars: float | None,
    now_ns: int,
) -> bool:
    """Spend a row's requests and dollars if they fit two ledgers: the period its trace
    started in (what that period's steps so far allow: a burst takes only its step's
    share) and the period of the clock now (the whole budget at most, so that a backlog of
    old traces spanning many periods is not judged at once with a budget for each); whether
    they did. Spent in the caller's transaction, recorded per hour and per day in both."""
    price = (dollars or 0.0) if budget.dollars else requests
    number, into = divmod(start_ns, budget.seconds * NS)
    if _spent(db, "spend", budget, number) + price > budget.allowed(into):
        return False
    if _spent(db, "spend_judged", budget, now_ns // (budget.seconds * NS)) + price > budget.amount:
        return False
    for table, at_ns in (("spend", start_ns), ("spend_judged", now_ns)):
        for seconds in STEPS:
            db.execute(
                f"INSERT INTO {table} (seconds, number, requests, dollars) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (seconds, number) DO UPDATE SET"
                " requests=requests+excluded.requests, dollars=dollars+excluded.dollars",
                (seconds, at_ns // (seconds * NS), requests, dollars or 0.0),
            )
    return True


def _spent(db: sqlite3.Connection, table: str, budget: Budget, number: int) -> float:
    """What a ledger (`spend` or `spend_judged`) holds for the budget's period `number`."""
    found = db.execute(
        f"SELECT requests, dollars FROM {table} WHERE seconds=? AND number=?",
        (budget.seconds, number),
    ).fetchone()
    if not found:
        return 0
    return float(found[1]) if budget.dollars else int(found[0])
