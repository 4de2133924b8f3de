"""An alert sent to a webhook: one JSON POST, retried with backoff on a connection error or
a 5xx/429 answer. The monitor posts what its state's outbox holds undelivered
(`judge.monitor.monitor.Monitor.deliver`): at least once, with the alert's id."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

ATTEMPTS = 4  # the first try and three retries


@dataclass(frozen=True)
class Undelivered:
    """Why an alert was not delivered, and whether a later try may deliver it.

    Attributes:
        reason: what went wrong, in a sentence's words.
        retry: True when the webhook could not be reached or answered 429 or 5xx after
            every try; False when it refused the alert (another 4xx): sending it again
            would be refused again.
    """

    reason: str
    retry: bool

    def __str__(self) -> str:
        return self.reason


class _Retryable(Exception):
    """A delivery worth trying again: no connection, or the server's own trouble."""


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
    body = json.dumps(alert, ensure_ascii=False, sort_keys=True).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if alert.get("id"):  # a receiver de-duplicates a redelivered alert by it
        headers["Idempotency-Key"] = str(alert["id"])
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(attempts),
            wait=wait_exponential(multiplier=wait, max=30),
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
                except (aiohttp.ClientConnectionError, TimeoutError) as exc:
                    raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
                if status == 429 or status >= 500:
                    raise _Retryable(f"the webhook answered HTTP {status}")
                if 300 <= status < 400:  # kept: the next start, given that URL, posts it
                    return Undelivered(
                        f"the webhook {url} redirected it (HTTP {status}) to {location} (not "
                        "followed): give the URL that takes the POST itself",
                        True,
                    )
                if not 200 <= status < 300:
                    return Undelivered(f"the webhook {url} refused it (HTTP {status})", False)
    except _Retryable as exc:
        return Undelivered(f"not delivered to {url} after {attempts} tries ({exc})", True)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return Undelivered(f"not delivered to {url} ({type(exc).__name__}: {exc})", True)
    return None
