"""The retry rules on their own: what is retryable, how retry-after is read, how long we wait."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from gateway.providers.wire._retry import RetryPolicy, is_retryable, parse_retry_after


@pytest.mark.parametrize(
    ("status", "error_type", "expected"),
    [
        (408, "timeout_error", True),
        (409, "conflict_error", True),
        (429, "rate_limit_error", True),
        (500, "api_error", True),
        (503, "http_503", True),
        (529, "overloaded_error", True),
        (200, "overloaded_error", True),  # an error event inside a 200 stream
        (None, "connection_error", True),
        (400, "invalid_request_error", False),
        (401, "authentication_error", False),
        (403, "permission_error", False),
        (404, "not_found_error", False),
        (413, "request_too_large", False),
        (500, "invalid_request_error", False),  # the type says the request is wrong
        (200, "invalid_request_error", False),
    ],
)
def test_retryable_by_status_and_error_type(
    status: int | None, error_type: str, expected: bool
) -> None:
    assert is_retryable(status, error_type) is expected


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25


def test_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"retry-after": "Mon, 30 Nov 2026 12:00:07 GMT"}, now=now) == 7.0


@pytest.mark.parametrize("value", ["soon", "-3", ""])
def test_unusable_retry_after_counts_as_absent(value: str) -> None:
    assert parse_retry_after({"retry-after": value}) is None


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(retry_after_cap_s=60.0)
    assert policy.delay_s(attempt=1, retry_after_s=1.5) == 1.5
    assert policy.delay_s(attempt=1, retry_after_s=3600.0) == 60.0


def test_backoff_is_exponential_with_bounded_jitter() -> None:
    policy = RetryPolicy(backoff_base_s=0.5, backoff_max_s=8.0, rng=random.Random(7))
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (9, 8.0)]:
        delays = [policy.delay_s(attempt=attempt, retry_after_s=None) for _ in range(50)]
        assert all(0.75 * ceiling <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1  # jittered, not constant


def test_zero_attempts_is_refused() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
