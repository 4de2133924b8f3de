"""Asking the app every question: concurrently, each call with a timeout, every outcome
written down as it comes, a stopped experiment resumed.

Each finished call is appended at once to a progress file in the output folder
(`.app_outputs.jsonl`), so a killed experiment loses no answer: the next run with the
same app reads it back and asks only the questions without an answer. A line holds the
app's part of the row alone, never the test set's columns or labels, under a key made of
what the app was given (its whole row, or its question): a resumed experiment over a
changed test set asks again what changed, and builds every output row from the test set
as it is now. An app error
(an exception, a timeout, a reply outside the contract) is that question's outcome,
never the experiment's end; it is asked again on the next run. The app never runs on
the event loop that times its calls (see `AppRunner`): a sync app's call runs in a thread
of its own (a daemon thread: one that never returns cannot keep the process alive), an
async app's on an event loop of the app's own in a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
import math
import threading
import time
import traceback
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.aio import gather_or_cancel
from judge.errors import InputFormatError, JudgeError
from judge.experiments.app import RESERVED, App, MalformedReply, Turn, parse_reply
from judge.ir.trec import check_trec_id
from judge.json_values import canonical_json, escape_surrogates, lone_surrogate_in, sha256_hex
from judge.lines import LIMIT_VARIABLE, max_line_bytes, shown_limit
from judge.run.checkpoint import open_for_appending, scan_lines
from judge.run.data import JsonlRecords, LazySequence, parse_relevance
from judge.run.digest import APP_LATENCY
from judge.run.output_folder import write_failure
from judge.run.progress import DEFAULT_INTERVAL, Progress

# The columns every app_outputs.jsonl row has; the latency is a timing, left out of the
# rows' data hash (judge.run.digest.TIMINGS).
LATENCY = APP_LATENCY
ERROR = "app_error"


@dataclass(frozen=True)
class Question:
    """One question of the test set, and the columns its output row carries."""

    number: int
    id: str
    question: str
    columns: dict[str, Any]

    def key(self, takes_row: bool) -> str:
        """What matches an answer in the progress file to this question: everything the
        app was given (the whole row, or the question), and for a question the names of
        the row's columns (a reply's extra key may not take one)."""
        given: Any = self.columns if takes_row else [self.question, sorted(self.columns)]
        return sha256_hex(json.dumps(["row" if takes_row else "question", given], **_KEYED))


@dataclass(frozen=True)
class TurnQuestion(Question):
    """One user message of a conversation of the test set, asked of a conversational app
    with the messages before it (`history`, the app's earlier answers among them); its
    `columns` are the turn's labels and the conversation's fields (a reply's extra key may
    not take one)."""

    history: tuple[tuple[str, str], ...] = ()

    def key(self, takes_row: bool) -> str:
        """What matches an answer in the progress file to this turn: the question, the
        messages before it, and the names of its columns."""
        given = [self.question, [list(m) for m in self.history], sorted(self.columns)]
        return sha256_hex(json.dumps(["turn", given], **_KEYED))

    def turn(self) -> Turn:
        """What the app is given: the question and the messages before it (a copy of its
        own: what the app does to it stays out of the next turn's)."""
        return Turn(self.question, [{"role": r, "content": c} for r, c in self.history])


# The key's JSON: canonical (sorted keys), and total over the values a row read by pandas
# may hold (NaN, arrays, timestamps): a value JSON has no form for is keyed by its text.
_KEYED: dict[str, Any] = {
    "sort_keys": True,
    "separators": (",", ":"),
    "ensure_ascii": False,
    "default": lambda value: value.tolist() if hasattr(value, "tolist") else repr(value),
}


@dataclass
class CallStats:
    """What asking the app cost and gave, for summary.json's `config.app`."""

    asked: int = 0
    reused: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """The figures as summary.json records them."""
        ordered = sorted(self.latencies)

        def quantile(q: float) -> float | None:
            if not ordered:
                return None
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4)

        return {
            "questions": self.asked + self.reused,
            "asked": self.asked,
            "reused": self.reused,
            "errors": dict(sorted(self.errors.items())),
            "latency_s": {
                "p50": quantile(0.5),
                "p95": quantile(0.95),
                "max": round(ordered[-1], 4) if ordered else None,
            },
            "seconds": round(self.seconds, 3),
        }


def app_key(app: App) -> str:
    """Which app (target, source and, for a row app, its input) a progress line belongs
    to: answers made from the question are not resumed by an app given the row."""
    parts = [app.target, app.fingerprint] + (["row"] if app.takes_row else [])
    return sha256_hex(canonical_json(parts))[:16]


class ProgressFile:
    """The app's outputs appended as they finish, one JSON line each, written through to
    the OS at once; read back by a later run of the same app.

    A row that cannot be written as it is becomes that question's error: text that is no
    Unicode (a lone surrogate, written escaped), a reply nested too deeply for JSON or
    longer than a line judge reads back (`judge.lines`), and, when the run is written as
    TREC files, an id a TREC line cannot hold.

    Args:
        path: the file (`.app_outputs.jsonl` in the output folder).
        app: the loaded app: lines of another app (or of this one before its source
            changed) are not reused.
        trec: the rows' ids go to run.trec and qrels.txt: the question id, the retrieved
            ids and the relevance labels' ids must be ids a TREC line can hold.
    """

    def __init__(self, path: Path, app: App, trec: bool = False):
        self.path = path
        self.key = app_key(app)
        self.takes_row = app.takes_row
        self.trec = trec
        self._out: Any = None

    def key_of(self, question: Question) -> str:
        """The key of a question's line: what this app was given for it."""
        return question.key(self.takes_row)

    def load(self) -> dict[str, tuple[int, frozenset[str]]]:
        """Question key -> where its line starts (`rows` reads it back) and the keys of its
        row, for the lines of this app without an app error. Lines of another app are not
        reused, nor a line that is not one judge writes (a torn last line, a line damaged
        or rewritten: its question is asked again)."""
        done: dict[str, tuple[int, frozenset[str]]] = {}
        if not self.path.exists():
            return done
        shapes: dict[frozenset[str], frozenset[str]] = {}  # one set of keys per shape
        for offset, line in scan_lines(self.path):
            try:
                item = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                continue  # the last line of a killed run may be cut short
            if not isinstance(item, dict) or item.get("app") != self.key:
                continue
            question, row = item.get("question"), item.get("row")
            if not isinstance(question, str) or not isinstance(row, dict):
                continue
            if row.get(ERROR) is not None:  # asked again: the error may have passed
                done.pop(question, None)
            elif _stored_answer(row) and lone_surrogate_in(item) is None:
                keys = frozenset(row)
                done[question] = offset, shapes.setdefault(keys, keys)
        return done

    def open(self) -> None:
        """Open the file before the app runs, so that it does not take a file descriptor
        the app closes (an app's os.close(1) frees stdout's for the next file opened)."""
        try:
            if self._out is None:
                self._out = open_for_appending(self.path)
        except OSError as exc:
            raise write_failure(self.path, exc) from None

    def write(self, question: Question, row: dict[str, Any]) -> int:
        """Append one finished question's row (or, when it cannot be written, the error
        that says why); returns where its line starts."""
        data = self._encoded(question, row)
        try:
            if self._out is None:
                self._out = open_for_appending(self.path)
            offset: int = self._out.tell()
            self._out.write(data)
            self._out.flush()
        except OSError as exc:  # a full disk stops the experiment: written lines stay
            raise write_failure(self.path, exc) from None
        return offset

    def _encoded(self, question: Question, row: dict[str, Any]) -> bytes:
        """The line of a row as it can be written: a row that cannot be is the question's
        input columns with an app error saying why (an app error already there kept)."""
        failed = row.get(ERROR) is not None
        problem = None if failed or not self.trec else _unfit_id(question, row)
        # The question's columns are never written here (`OutputRows` joins them), but
        # one that no file can hold makes the question's output row unwritable too.
        where = lone_surrogate_in(row) or lone_surrogate_in(question.columns)
        if where is not None:
            both = {**question.columns, **row}
            column = next(k for k, v in both.items() if lone_surrogate_in([k, v]))
            row = escape_surrogates(row)  # shown, not lost: the six characters \ud800
            if not failed:
                problem = problem or (
                    "NotUnicode",
                    f"{column!r} holds a lone surrogate ({where}): text that is not "
                    "Unicode (half of a UTF-16 pair, from a broken \\u escape or a wrong "
                    "decoding), which no file can hold; it is written escaped",
                )
        if problem is None:
            try:
                data = self._line(question, row)
            except (RecursionError, ValueError, TypeError) as exc:
                problem = ("MalformedReply", f"the reply cannot be written as JSON ({exc})")
            else:
                limit = max_line_bytes()
                if len(data) <= limit:
                    return data
                problem = (
                    "ReplyTooLong",
                    f"the app's output row is {len(data):,} bytes, over {shown_limit(limit)}, "
                    f"the longest line judge reads (raise it with {LIMIT_VARIABLE}, in MiB)",
                )
        kind, message = problem
        failure = {"type": kind, "message": message}
        return self._line(question, {LATENCY: row.get(LATENCY), ERROR: failure})

    def _line(self, question: Question, row: dict[str, Any]) -> bytes:
        line = json.dumps(
            {"app": self.key, "question": self.key_of(question), "row": row}, ensure_ascii=False
        )
        return line.encode("utf-8") + b"\n"

    def rows(self, offsets: Sequence[int]) -> JsonlRecords:
        """The app's part of the output rows, of the lines at these offsets (in the
        questions' order), each read from its line when used: memory holds an offset a
        question."""
        return JsonlRecords(self.path, offsets, field="row")

    def close(self) -> None:
        """Close the file (its lines are already written through)."""
        if self._out is not None:
            out, self._out = self._out, None
            out.close()


# The keys of the stored part of a row the app's reply may not have set: the test set's
# (its labels, id and question) and judge's other names for them; the call's own record
# (latency, error) is the stored part's.
_NOT_THE_APPS = frozenset(RESERVED) - {LATENCY, ERROR}


def _stored_answer(row: dict[str, Any]) -> bool:
    """Whether a progress line's row is one an answer of the app makes: its latency, no
    error, and a reply of the contract as `parse_reply` leaves it, with no key the app
    may not set."""
    if not _is_number(row.get(LATENCY)) or ERROR not in row or row[ERROR] is not None:
        return False
    reply = {k: v for k, v in row.items() if k not in (LATENCY, ERROR)}
    try:
        return parse_reply(reply).columns() == reply
    except (MalformedReply, RecursionError):
        return False


def _is_number(value: Any) -> bool:
    """Whether a value is a finite int or float (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _unfit_id(question: Question, row: dict[str, Any]) -> tuple[str, str] | None:
    """("UnfitId", why) when the row's question id, a retrieved id or a relevance label's
    id cannot be an id of a TREC line (run.trec, qrels.txt); None when all can."""
    try:
        check_trec_id(question.id, "the question id")
        for i, doc in enumerate(row.get("retrieved_ids") or ()):
            check_trec_id(doc, f"the app's retrieved_ids[{i}]")
        labels = question.columns.get("relevance")
        for doc in parse_relevance(labels) if labels is not None else ():
            check_trec_id(doc, "the relevance label's document id")
    except InputFormatError as exc:
        return "UnfitId", str(exc)
    except (ValueError, TypeError):
        return None  # labels that cannot be read: judge eval says so for the row
    return None


def error_record(exc: BaseException) -> dict[str, Any]:
    """An app error as app_outputs.jsonl records it: type, message and where it was raised
    (the traceback's last frame)."""
    record: dict[str, Any] = {"type": type(exc).__name__, "message": _message(exc)}
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        record["where"] = f"{_shown_path(last.filename)}:{last.lineno} in {last.name}"
    return record


def _message(exc: BaseException) -> str:
    """An exception's message, or what says it has none that can be shown (its __str__
    raised: an app's exception is the app's code)."""
    try:
        return str(exc)
    except Exception as failure:
        return f"(its message cannot be shown: str() raised {type(failure).__name__})"


def _shown_path(filename: str) -> str:
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd()))
    except ValueError:  # outside the working directory
        return filename


class AppLoopBlocked(JudgeError):
    """An async app's question not asked: its event loop has not run for longer than the
    app timeout (an earlier call blocks it), so no call could run on it."""


async def _settled(make: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """(make()'s value, awaited while it is awaitable, None) or (None, what it raised):
    every exception the app raises is its outcome, also SystemExit, KeyboardInterrupt or
    CancelledError raised by the app, which must not end the loop it runs on."""
    try:
        value = make()
        while inspect.isawaitable(value):
            value = await value
    except BaseException as exc:  # the app's own (or the cancel of a call timed out)
        return None, exc
    return value, None


class AppRunner:
    """Where the app's calls run: away from the event loop that times them, so that the
    app timeout holds whatever the app does. A sync app's call runs in a daemon thread of
    its own; an async app's on one event loop of the app's own in a daemon thread
    (started on first use), as a server runs its handlers: a call that blocks that loop
    (time.sleep, a busy loop, blocking I/O in async code) stalls the app's other calls,
    not the runner, and each is a timeout. Once a call timed out without the app's loop
    running a turn since it began, the next questions fail at once (`AppLoopBlocked`)
    rather than each waiting out the timeout; once the loop runs again, they are asked.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unseen: float | None = None  # since when the app's loop has not run a turn
        self._blocked: float | None = None  # the same, once a call timed out behind it

    async def outcome(
        self, app: App, given: Any, timeout: float
    ) -> tuple[Any, BaseException | None]:
        """(the app's reply to `given`, None) or (None, the exception it raised)."""
        if app.is_async:
            return await self._on_app_loop(lambda: app.call(given), timeout)
        value, failure = await _in_thread(app, given)
        if failure is None and inspect.isawaitable(value):  # a sync function returned one
            return await self._on_app_loop(lambda: value, timeout)
        return value, failure

    async def _on_app_loop(
        self, make: Callable[[], Any], timeout: float
    ) -> tuple[Any, BaseException | None]:
        started = time.monotonic()
        loop = self._app_loop()
        if self._blocked is not None:
            return None, AppLoopBlocked(
                f"not asked: the app's event loop has not run for "
                f"{started - self._blocked:.3g} s (a call blocks it: time.sleep, a busy loop "
                "or blocking I/O in async code), so no async call can run on it"
            )
        call = asyncio.run_coroutine_threadsafe(_settled(make), loop)
        if self._unseen is None:
            self._unseen = started
            # Two hops: seen once the loop has run the turn that starts this call (its
            # task's first step is queued by the first hop), not merely before it.
            loop.call_soon_threadsafe(loop.call_soon, self._seen)
        try:
            return await asyncio.wrap_future(call)
        except asyncio.CancelledError:  # timed out (the cancel reaches the app's task)
            unseen = self._unseen
            if unseen is not None and unseen <= started:  # no turn of the loop since
                self._blocked = unseen
            raise

    def _seen(self) -> None:
        self._unseen = self._blocked = None

    def _app_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(
                target=_serve, args=(self._loop,), name="judge-app-loop", daemon=True
            ).start()
        return self._loop

    def close(self) -> None:
        """Stop the app's loop once it is free (its calls left are cancelled); a loop the
        app blocks for good stays behind in its daemon thread, never waited for."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # closed already
                self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop = None


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run the app's event loop until it is stopped, then cancel what is left on it."""
    asyncio.set_event_loop(loop)
    while True:
        try:
            loop.run_forever()
        except BaseException:  # an app's own task raised SystemExit or KeyboardInterrupt:
            continue  # the call awaiting it records it, and the loop goes on
        break
    with contextlib.suppress(BaseException):  # what the app does when cancelled is its own
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def _in_thread(app: App, given: Any) -> asyncio.Future[tuple[Any, BaseException | None]]:
    """The sync app called in a daemon thread of its own; its outcome as a future."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()

    def settle(outcome: tuple[Any, BaseException | None]) -> None:
        if not future.done():  # timed out meanwhile: the answer comes too late
            future.set_result(outcome)

    def run() -> None:
        outcome: tuple[Any, BaseException | None]
        try:
            outcome = app.call(given), None
        except BaseException as exc:  # also SystemExit, KeyboardInterrupt: the app's error
            outcome = None, exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=run, name="judge-app", daemon=True).start()
    return future


async def ask(app: App, question: Question, timeout: float, runner: AppRunner) -> dict[str, Any]:
    """The app's part of one question's output row: the reply's columns, or the error, and
    the latency in seconds, the app called where `runner` runs it (the test set's columns
    are the question's, joined to it when the output is written: `OutputRows`)."""
    started = time.perf_counter()
    row: dict[str, Any] = {}
    error: dict[str, Any] | None = None
    given: Any
    if isinstance(question, TurnQuestion):
        given = question.turn()
    elif app.chat is not None:  # a single question: a conversation of one message
        given = Turn(question.question, [])
    else:
        # The row as a copy of its own: what the app does to it stays out of the output row.
        given = copy.deepcopy(question.columns) if app.takes_row else question.question
    try:
        value, failure = await asyncio.wait_for(runner.outcome(app, given, timeout), timeout)
    except asyncio.TimeoutError:
        error = {"type": "Timeout", "message": f"no reply within {timeout:g} s (the app timeout)"}
    else:
        if failure is not None:
            error = error_record(failure)
        else:
            try:
                row.update(parse_reply(value, question.columns).columns())
            except MalformedReply as exc:
                error = {"type": "MalformedReply", "message": str(exc)}
            except Exception as exc:  # the reply's own code raised while judge read it
                error = {
                    "type": "MalformedReply",
                    "message": f"reading the reply raised {type(exc).__name__}: {_message(exc)}",
                }
    row[LATENCY] = round(time.perf_counter() - started, 4)
    row[ERROR] = error
    return row


async def ask_all(
    app: App,
    questions: Sequence[Question],
    progress_file: ProgressFile,
    *,
    concurrency: int,
    timeout: float,
    progress: bool = True,
    progress_interval: float = DEFAULT_INTERVAL,
) -> tuple[OutputRows, CallStats]:
    """Every question's output row (in the questions' order, read from the progress file
    when used) and the call figures; the questions already answered in the progress file
    are not asked again.

    Memory holds an offset and a latency a question, never every row: a finished call is
    written to the progress file at once and only where its line starts is kept, so rows
    finished out of order wait on disk, not in a buffer. `questions` is read twice, one
    question at a time (it may build each from its file when used).

    Args:
        app: the loaded app.
        questions: the test set's questions.
        progress_file: where finished calls go as they finish.
        concurrency: calls in flight at once.
        timeout: seconds one call may take.
        progress, progress_interval: as for `judge.evaluate`.
    """
    if concurrency < 1:
        raise JudgeError(f"app_concurrency={concurrency}: give at least 1")
    if not timeout > 0:
        raise JudgeError(f"app_timeout={timeout}: give a positive number of seconds")
    done = progress_file.load()
    offsets = array("q", [-1]) * len(questions)  # where each question's line starts
    stats = CallStats()
    for i, question in enumerate(questions if done else ()):  # read again: only to resume
        found = done.get(progress_file.key_of(question))
        # A row naming a column of the test set is no reply the app gave: asked again.
        if found is not None and found[1].isdisjoint(question.columns):
            offsets[i] = found[0]
            stats.reused += 1
    del done
    bar = Progress(
        len(questions),
        None,
        mode=None if progress else "off",
        interval=progress_interval,
        resumed=stats.reused,
        unit="questions asked of the app",
    )
    # Positions, not questions: the questions are built again one at a time as they are
    # asked (and the reused ones are never built a second time).
    pending: Iterator[tuple[int, Question]] = (
        (i, question) for i, question in enumerate(questions) if offsets[i] < 0
    )

    runner = AppRunner()

    async def worker() -> None:
        for i, question in pending:
            row = await ask(app, question, timeout, runner)
            offsets[i] = progress_file.write(question, row)
            stats.asked += 1
            bar.advance()

    started = time.monotonic()
    bar.start()
    try:
        progress_file.open()
        todo = len(questions) - stats.reused
        await gather_or_cancel(worker() for _ in range(min(concurrency, todo)))
    finally:
        runner.close()
        bar.close()
        progress_file.close()
    stats.seconds = time.monotonic() - started
    answers = _Checked(progress_file.rows(offsets))
    for row in answers:
        if row[LATENCY] is not None:
            stats.latencies.append(row[LATENCY])
        if row[ERROR] is not None:
            stats.errors[row[ERROR]["type"]] += 1
    return OutputRows(questions, answers), stats


def checked_rows(progress_file: ProgressFile, offsets: Sequence[int]) -> Sequence[dict[str, Any]]:
    """The app's part of the rows of the progress file's lines at these offsets, each read
    and checked when used: a line that is no longer one judge writes reads as that
    question's error (`ProgressLineChanged`)."""
    return _Checked(progress_file.rows(offsets))


class _Checked(LazySequence[dict[str, Any]]):
    """The app's part of each row as read back from the progress file, each checked again
    when read: the app can write to the file, so a line that is no longer one judge writes
    is that question's error (asked again on the next run), never taken as it reads."""

    def __init__(self, rows: JsonlRecords):
        self._rows = rows
        message = (
            f"its line in {rows.path.name} changed after judge wrote it (does the app write "
            "to the file?); it is asked again on the next run"
        )
        self._changed = {LATENCY: None, ERROR: {"type": "ProgressLineChanged", "message": message}}

    def __len__(self) -> int:
        return len(self._rows)

    def at(self, number: int) -> dict[str, Any]:
        """The app's part of row `number`, checked."""
        row: Any
        try:
            row = self._rows[number]
        except (JudgeError, LookupError, TypeError, ValueError, RecursionError):
            row = None  # no longer a JSON object, or one without a row
        if _written_row(row):
            checked: dict[str, Any] = row
            return checked
        return copy.deepcopy(self._changed)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self[i]


def _written_row(row: Any) -> bool:
    """Whether a progress line's row is one judge writes: an answer (`_stored_answer`) or
    an app error with its type and message."""
    if not isinstance(row, dict):
        return False
    error = row.get(ERROR)
    if error is None:
        return _stored_answer(row)
    latency = row.get(LATENCY)
    return (
        isinstance(error, dict)
        and isinstance(error.get("type"), str)
        and isinstance(error.get("message"), str)
        and (latency is None or _is_number(latency))
        and lone_surrogate_in(row) is None
    )


class OutputRows(LazySequence[dict[str, Any]]):
    """The output rows: each question's columns (the test set as it is now: its labels
    are never kept with the answers) joined to the app's part of the row, built when used.

    Args:
        questions: the test set's questions.
        answers: the app's part of each question's row, in the same order.
    """

    def __init__(self, questions: Sequence[Question], answers: Sequence[dict[str, Any]]):
        self._questions = questions
        self._answers = answers

    def __len__(self) -> int:
        return len(self._answers)

    def at(self, number: int) -> dict[str, Any]:
        """The output row of question `number`."""
        return _joined(self._questions[number], self._answers[number])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for question, answer in zip(self._questions, self._answers, strict=True):
            yield _joined(question, answer)


def _joined(question: Question, answer: dict[str, Any]) -> dict[str, Any]:
    """A question's output row: its columns (text no file can hold written escaped: the
    question's NotUnicode error says so) and the app's part. The test set's columns win,
    and its labels come from it alone: the app's part is read back from a file the app
    could write to, so a key there that is not the app's to set is left out."""
    columns = question.columns
    if lone_surrogate_in(columns) is not None:
        columns = escape_surrogates(columns)
    own = {
        key: value
        for key, value in answer.items()
        if key in (LATENCY, ERROR) or not (key in columns or key in _NOT_THE_APPS)
    }
    return {**columns, **own}
