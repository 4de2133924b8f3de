"""A one-line progress display on stderr: samples, requests, cache hits, tokens, cost, ETA."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    """Redraws at most 5 times a second; silent when stderr is not a terminal (CI, pipes).

    Args:
        total: samples to do.
        session: the run's LLMSession (for requests, tokens and cost), or None.
        enabled: force on or off; None means "only on a terminal".
    """

    def __init__(self, total: int, session: Any = None, *, enabled: bool | None = None):
        self.total = total
        self.done = 0
        self.session = session
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.started = time.monotonic()
        self._drawn = 0.0

    def advance(self) -> None:
        """One sample finished."""
        self.done += 1
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= 0.2 or self.done == self.total):
            self._drawn = now
            sys.stderr.write("\r" + self.line(now) + "\x1b[K")
            sys.stderr.flush()

    def line(self, now: float | None = None) -> str:
        """The current status as text."""
        now = time.monotonic() if now is None else now
        elapsed = now - self.started
        parts = [f"{self.done}/{self.total} samples"]
        if self.session is not None:
            usage = self.session.usage.total()
            cost = "cost ?" if usage.cost is None else f"${usage.cost:.4f}"
            parts += [
                f"{usage.requests} requests",
                f"{usage.cache_hits} cached",
                f"{usage.prompt_tokens + usage.completion_tokens} tokens",
                cost,
            ]
        if 0 < self.done < self.total:
            parts.append(f"ETA {elapsed / self.done * (self.total - self.done):.0f}s")
        else:
            parts.append(f"{elapsed:.1f}s")
        return " | ".join(parts)

    def close(self) -> None:
        """End the line."""
        if self.enabled and self.done:
            sys.stderr.write("\n")
            sys.stderr.flush()
