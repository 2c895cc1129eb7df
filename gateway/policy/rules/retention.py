"""Rules about how long a task's content is kept (``[retention]``)."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.policy._findings import Finding, error
from gateway.policy._retention import minimum_days
from gateway.policy.rules._subject import Rule, Subject


def retention_below_minimum(s: Subject) -> Iterator[Finding]:
    days = s.policy.retention.content_days
    minimum = minimum_days(s.policy.regulations)
    if days is not None and minimum is not None and days < minimum.days:
        yield error(
            "retention-below-minimum",
            s.file,
            "retention.content_days",
            f"Content would be erased after {days} days, but {minimum.rule} requires "
            f"records of this task to be kept at least {minimum.days} days.",
            f"Set content_days to {minimum.days} or more, or correct `regulations`.",
        )


def retention_above_maximum(s: Subject) -> Iterator[Finding]:
    table = s.policy.retention
    if table.max_days is None:
        return
    if table.content_days is None or table.content_days > table.max_days:
        kept = "forever" if table.content_days is None else f"{table.content_days} days"
        yield error(
            "retention-above-maximum",
            s.file,
            "retention.content_days",
            f"Content would be kept {kept}, longer than the data-protection maximum of "
            f"{table.max_days} days stated for this task.",
            f"Set content_days to at most {table.max_days}.",
        )


RULES: tuple[Rule, ...] = (retention_below_minimum, retention_above_maximum)
