"""Retries with backoff and jitter.

What is retried: 429 (after its Retry-After), 5xx, and network errors. A write is only retried
when repeating it is harmless: GET/PUT/DELETE, and POST/PATCH bodies whose items carry a client id
chosen *before* the first attempt (see ``client_id``), so the server answers a repeat with the row
it already stored. A request that is not safe to repeat (claim-next) is retried only when it
cannot have reached the application: a refused connection or a 429.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


def client_id() -> str:
    """A fresh idempotency id; made once per item, before any attempt, and reused by every retry."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # tries in all, the first included
    base_delay: float = 0.2
    max_delay: float = 5.0
    max_retry_after: float = 30.0  # a Retry-After longer than this is not waited for

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before try number ``attempt + 1`` (attempt counts from 1)."""
        if retry_after:
            try:
                return min(max(0.0, float(retry_after)), self.max_retry_after)
            except ValueError:
                pass  # an HTTP-date: rare from this server, fall back to backoff
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)  # "equal jitter": spread out, never zero


NO_RETRY = RetryPolicy(attempts=1)


def send_with_retry(
    send: Callable[[], httpx.Response],
    *,
    policy: RetryPolicy,
    idempotent: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> httpx.Response:
    """Call ``send`` until it answers something final; the last answer or error goes to the caller."""
    attempt = 0
    while True:
        attempt += 1
        last = attempt >= policy.attempts
        try:
            response = send()
        except httpx.ConnectError:
            # Refused or unresolvable: the request never reached the server, so any request may retry.
            if last:
                raise
            sleep(policy.delay(attempt))
            continue
        except httpx.TransportError:
            # Sent, but the answer was lost (read timeout, reset): only a repeatable request retries.
            if last or not idempotent:
                raise
            sleep(policy.delay(attempt))
            continue
        status = response.status_code
        retryable = status == 429 or (idempotent and status in RETRY_STATUSES)
        if not retryable or last:
            return response
        sleep(policy.delay(attempt, response.headers.get("Retry-After")))
