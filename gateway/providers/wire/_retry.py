"""The gateway's own retry rules: what is retryable and how long to wait before the next attempt.

The SDK's retries are switched off (``max_retries=0``) so that every attempt is seen, recorded
and paced here.

    policy = RetryPolicy(max_attempts=4, retry_after_cap_s=60.0, backoff_base_s=0.5)
    policy.delay_s(attempt=2, retry_after_s=None)     # 0.75 .. 1.0 (exponential, jittered)
    policy.delay_s(attempt=2, retry_after_s=120.0)    # 60.0 (the server's wish, capped)
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# Statuses worth another attempt: timeout, conflict (lock contention), rate limit, server errors.
RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Error types worth another attempt whatever the status: a stream that began with HTTP 200
# can still carry one of these in an ``error`` event.
RETRYABLE_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error", "conflict_error"}
)
# Error types that mean the request itself is wrong; never retried even on a 5xx status.
FINAL_ERROR_TYPES = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "billing_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
    }
)


def is_retryable(status: int | None, error_type: str | None) -> bool:
    """Whether a failed attempt with this status and error type may be tried again."""
    if status is not None and 300 <= status < 400:
        return False  # a redirect (never followed) would only answer the same way again
    if error_type in FINAL_ERROR_TYPES:
        return False
    if error_type in RETRYABLE_ERROR_TYPES:
        return True
    if status is None:  # connection errors and timeouts carry no status
        return True
    return status in RETRYABLE_STATUSES or status >= 500


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``retry-after``.

    ``retry-after`` may be seconds or an HTTP date. Unparseable or negative values count as
    absent: the backoff then decides.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    text = headers.get("retry-after")
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return seconds if seconds >= 0 else None


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts, and how long to wait between them."""

    max_attempts: int = 4
    retry_after_cap_s: float = 60.0
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.retry_after_cap_s < 0 or self.backoff_base_s < 0:
            raise ValueError("retry_after_cap_s and backoff_base_s must not be negative")

    def delay_s(self, *, attempt: int, retry_after_s: float | None) -> float:
        """The wait after failed attempt number ``attempt`` (1-based).

        A server's ``retry-after`` is honoured exactly, up to the cap: it knows its own load
        better than our backoff does. Otherwise exponential backoff, with up to 25 % jitter
        taken off so that many clients that failed together do not retry together.
        """
        if retry_after_s is not None:
            return min(retry_after_s, self.retry_after_cap_s)
        ceiling = min(self.backoff_base_s * 2.0 ** (attempt - 1), self.backoff_max_s)
        jitter: float = self.rng.random()
        return ceiling * (1.0 - 0.25 * jitter)
