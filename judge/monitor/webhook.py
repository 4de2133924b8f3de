"""An alert sent to a webhook: one JSON POST, retried with backoff on a connection error or
a 5xx, 408, 425 or 429 answer (after the Retry-After the webhook gives, when it gives
one). The monitor posts what its state's outbox holds undelivered
(`judge.monitor.monitor.Monitor.deliver`): at least once, with the alert's id."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)
from yarl import URL

ATTEMPTS = 4  # the first try and three retries
# 4xx answers that ask for the request again (timed out reading it, too early, too many):
# retried as a 5xx is; any other 4xx refuses the alert.
RETRIED_4XX = frozenset({408, 425, 429})
LONGEST_WAIT = 30.0  # seconds: a longer Retry-After ends the tries (the outbox waits it)


@dataclass(frozen=True)
class Undelivered:
    """Why an alert was not delivered, and whether a later try may deliver it.

    Attributes:
        reason: what went wrong, in a sentence's words.
        retry: True when the webhook could not be reached or answered 408, 425, 429 or 5xx after
            every try; False when it refused the alert (another 4xx): sending it again
            would be refused again.
        after: the seconds the webhook asked to wait (its Retry-After), when it said.
    """

    reason: str
    retry: bool
    after: float | None = None

    def __str__(self) -> str:
        return self.reason


class _Retryable(Exception):
    """A delivery worth trying again: no connection, or the server's own trouble (with the
    seconds its Retry-After asked for, when it said)."""

    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.after = after


def retry_after(value: str | None) -> float | None:
    """A Retry-After header's seconds (given as seconds or as an HTTP date); None when
    absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def shown(url: str | None) -> str:
    """A URL as messages say it: its scheme, host and port alone. A chat webhook's path is
    its secret (Slack's, Discord's), and a URL can carry a password."""
    if not url:
        return "(none)"
    try:
        parsed = URL(url)
        origin = str(parsed.origin())
    except ValueError:  # not absolute: nothing of it is said
        return "(a URL not absolute)"
    return origin + ("/..." if parsed.path not in ("", "/") or parsed.query_string else "")


def _location(url: str, location: str | None) -> str:
    """Where a redirect pointed, as `shown` says it (a relative Location too)."""
    if not location:
        return "nowhere"
    try:
        return shown(str(URL(url).join(URL(location))))
    except ValueError:  # a Location no URL can be made of
        return "a Location that is no URL"


async def post_alert(
    url: str, alert: Mapping[str, Any], *, attempts: int = ATTEMPTS, wait: float = 0.5
) -> Undelivered | None:
    """POST the alert as JSON to `url` (its "id", when it has one, also as the
    Idempotency-Key header); None when the server took it (2xx), else why it was not
    delivered after `attempts` tries.

    Args:
        url: the webhook.
        alert: the alert, as the monitor records it.
        attempts: tries in all.
        wait: the first wait between tries, in seconds (doubled each time).
    """
    backoff = wait_exponential(multiplier=wait, max=LONGEST_WAIT)

    def pause(state: RetryCallState) -> float:
        """The webhook's Retry-After when it gave one, else the backoff."""
        failed = state.outcome.exception() if state.outcome else None
        if isinstance(failed, _Retryable) and failed.after is not None:
            return failed.after
        return float(backoff(state))

    body = json.dumps(alert, ensure_ascii=False, sort_keys=True).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if alert.get("id"):  # a receiver de-duplicates a redelivered alert by it
        headers["Idempotency-Key"] = str(alert["id"])
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(attempts),
            wait=pause,
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        ):
            with attempt:
                try:
                    async with (
                        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
                        # A redirect is not followed: aiohttp would GET a 301-303's
                        # Location without the alert (and its 200 would mark it delivered),
                        # or send the alert to whatever host a 307's Location names.
                        session.post(
                            url, data=body, headers=headers, allow_redirects=False
                        ) as answer,
                    ):
                        status = answer.status
                        location = answer.headers.get("Location")
                        asked = retry_after(answer.headers.get("Retry-After"))
                except (aiohttp.ClientConnectionError, TimeoutError) as exc:
                    raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
                if (status in RETRIED_4XX or status >= 500) and asked is not None:
                    said = f"the webhook answered HTTP {status}, Retry-After {asked:g} s"
                    if asked > LONGEST_WAIT:  # asked not to be tried again that soon
                        return Undelivered(f"not delivered to {shown(url)} ({said})", True, asked)
                    raise _Retryable(said, asked)
                if status in RETRIED_4XX or status >= 500:
                    raise _Retryable(f"the webhook answered HTTP {status}")
                if 300 <= status < 400:  # kept: the next start, given that URL, posts it
                    target = _location(url, location)
                    return Undelivered(
                        f"the webhook {shown(url)} redirected it (HTTP {status}) to {target} "
                        "(not followed): give the URL that takes the POST itself",
                        True,
                    )
                if not 200 <= status < 300:
                    return Undelivered(
                        f"the webhook {shown(url)} refused it (HTTP {status})", False
                    )
    except _Retryable as exc:
        return Undelivered(
            f"not delivered to {shown(url)} after {attempts} tries ({exc})", True, exc.after
        )
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return Undelivered(f"not delivered to {shown(url)} ({type(exc).__name__})", True)
    return None
