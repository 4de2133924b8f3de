"""SIGTERM as an exception, so a stopped run unwinds as after Ctrl-C (the CLI and the
processes of `--processes` both install it)."""

from __future__ import annotations

import signal
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
    """Make SIGTERM raise `Terminated` (main thread only); returns the handler replaced."""
    return signal.signal(signal.SIGTERM, _terminate)
