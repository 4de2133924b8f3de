"""Run progress on stderr: a tqdm bar on a terminal, a plain status line every N seconds
otherwise (CI logs, pipes, notebooks), both with samples, requests, cache hits, tokens,
cost and ETA."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TextIO

from judge.errors import JudgeError

if TYPE_CHECKING:  # asyncio is imported when a run starts: `judge ir` and `--help` stay quick
    import asyncio

DEFAULT_INTERVAL = 30.0  # seconds between status lines when stderr is not a terminal
BAR_REFRESH = 1.0  # seconds between bar redraws while no sample finishes (tokens, elapsed)

Mode = Literal["bar", "lines", "off"]


def clock_text(seconds: float) -> str:
    """Seconds as m:ss or h:mm:ss."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def cost_text(cost: float | None) -> str:
    """The cost so far as the status shows it: "cost unknown" when a model's price is not
    known, nothing before any answer was priced (never a false "$0.0000"), "<$0.0001" below
    a hundredth of a cent, else dollars to four places."""
    if cost is None:
        return "cost unknown"
    if cost <= 0:
        return ""
    return "<$0.0001" if cost < 0.0001 else f"${cost:.4f}"


class Progress:
    """What a run has done so far, shown as a bar, as periodic lines, or not at all.

    Args:
        total: samples in the run.
        session: the run's LLMSession (for requests, cache hits, tokens and cost), or None.
        mode: "bar" (a tqdm bar), "lines" (a line when the run starts, every `interval`
            seconds, and when it ends) or "off"; None picks "bar" when `stream` is a
            terminal and "lines" otherwise.
        interval: seconds between status lines in "lines" mode.
        resumed: samples already done before this run (from a checkpoint): counted as
            done but left out of the rate, so the ETA is not flattered by them.
        stream: where to write; default sys.stderr.
        clock: monotonic seconds (tests pass a fake one).
    """

    def __init__(
        self,
        total: int,
        session: Any = None,
        *,
        mode: Mode | None = None,
        interval: float = DEFAULT_INTERVAL,
        resumed: int = 0,
        unit: str = "samples",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not interval > 0:
            raise JudgeError(
                f"the progress interval must be a positive number of seconds, not {interval}"
            )
        self.total = total
        self.unit = unit
        self.done = resumed
        self.resumed = resumed
        self.session = session
        self.stream = sys.stderr if stream is None else stream
        if mode is None:
            isatty = getattr(self.stream, "isatty", None)
            mode = "bar" if isatty is not None and isatty() else "lines"
        self.mode: Mode = mode
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self._printed = self.started
        self._ticker: asyncio.Task[None] | None = None
        self._bar: Any = None
        if mode == "bar":
            from tqdm import tqdm  # here, not at the top: `import judge` stays cheap

            self._bar = tqdm(
                total=total,
                initial=resumed,
                unit=unit.removesuffix("s"),
                file=self.stream,
                dynamic_ncols=True,
                mininterval=0.2,
                postfix=self.usage_text(),
            )
        elif mode == "lines":
            self._write(self.line())

    def start(self) -> None:
        """Keep the display alive while no sample finishes (call inside the run's loop)."""
        import asyncio

        if self.mode != "off" and self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick_forever())

    async def _tick_forever(self) -> None:
        import asyncio

        while True:
            if self.mode == "bar":
                wait = BAR_REFRESH
            else:  # sleep until the next line is due
                wait = max(0.01, self._printed + self.interval - self.clock())
            await asyncio.sleep(wait)
            self.tick()

    def advance(self, samples: int = 1) -> None:
        """Samples finished."""
        self.done += samples
        if self._bar is not None:
            self._bar.set_postfix_str(self.usage_text(), refresh=False)
            self._bar.update(samples)
        else:
            self.tick()

    def tick(self) -> None:
        """Redraw the bar, or print a status line if one is due."""
        if self._bar is not None:
            self._bar.set_postfix_str(self.usage_text(), refresh=True)
        elif self.mode == "lines" and self.clock() - self._printed >= self.interval:
            self._write(self.line())

    def usage_text(self) -> str:
        """Requests, cache hits, tokens and the cost so far (see `cost_text`); empty without
        a session."""
        if self.session is None:
            return ""
        usage = self.session.usage.total()
        parts = [
            f"{usage.requests:,} requests",
            f"{usage.cache_hits:,} cache hits",
            f"{usage.prompt_tokens + usage.completion_tokens:,} tokens",
        ]
        cost = cost_text(usage.cost)
        if cost:
            parts.append(cost)
        return ", ".join(parts)

    def line(self, *, final: bool = False) -> str:
        """The status as one plain line: samples, usage, elapsed time and ETA."""
        elapsed = self.clock() - self.started
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        state = ("done, " if self.done >= self.total else "stopped, ") if final else ""
        parts = [f"judge: {state}{self.done}/{self.total} {self.unit}{share}"]
        if self.session is not None:
            parts.append(self.usage_text())
        parts.append(f"{clock_text(elapsed)} elapsed")
        worked = self.done - self.resumed
        if not final and worked > 0 and self.done < self.total:
            parts.append(f"ETA {clock_text(elapsed / worked * (self.total - self.done))}")
        return " | ".join(parts)

    def _write(self, text: str) -> None:
        self._printed = self.clock()
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Stop ticking; end the bar, or print the final line."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._bar is not None:
            with contextlib.suppress(Exception):  # never let the display hide the run's error
                self._bar.set_postfix_str(self.usage_text(), refresh=False)
                self._bar.close()
            self._bar = None
        elif self.mode == "lines":
            self._write(self.line(final=True))
            self.mode = "off"  # closed: a second close prints nothing
