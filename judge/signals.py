"""SIGTERM as an exception, so a stopped run unwinds as after Ctrl-C (the CLI and the
processes of `--processes` both install it)."""

from __future__ import annotations

import logging
import signal
import sys
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that the run unwinds as after Ctrl-C: files
    closed, temporary files removed, child processes stopped. A KeyboardInterrupt, because
    asyncio lets only those (and SystemExit) out of a callback: any other exception raised
    there is logged and the loop goes on."""


def _terminate(signum: int, frame: object) -> None:
    # Once is enough: a second SIGTERM must not cut the clean-up short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


def raise_on_sigterm() -> Any:
    """Make SIGTERM raise `Terminated` (main thread only); returns the handler replaced.

    A run stopped this way says so once, in its own words: the task that `Terminated`
    landed in, and the coroutines it left unfinished, are not reported as failures
    (asyncio's "Task exception was never retrieved", "Exception ignored in ...").
    """
    _quiet_about_terminated()
    return signal.signal(signal.SIGTERM, _terminate)


class _NotTerminated(logging.Filter):
    """Drops asyncio's log records about an exception that is `Terminated`."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        context = getattr(record, "msg", None)
        return not isinstance(exc, Terminated) and "exception=Terminated()" not in str(context)


def _quiet_about_terminated() -> None:
    logger = logging.getLogger("asyncio")
    if not any(isinstance(f, _NotTerminated) for f in logger.filters):
        logger.addFilter(_NotTerminated())
    previous = sys.unraisablehook
    if getattr(previous, "_judge_quiet", False):
        return

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, Terminated):
            previous(unraisable)

    hook._judge_quiet = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def quiet_after_stop() -> None:
    """After a run stopped by a signal: no report of the coroutines and tasks its event
    loop left unfinished when the signal cut its clean-up short (asyncio's "Task was
    destroyed but it is pending!", "Exception ignored in ... Event loop is closed" as they
    are collected). The run said once that it stopped; those say nothing more."""
    logging.getLogger("asyncio").addFilter(_NotPending())
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if not (isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"):
            previous(unraisable)

    sys.unraisablehook = hook


class _NotPending(logging.Filter):
    """Drops asyncio's log records about a task destroyed while pending."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Task was destroyed but it is pending")
