"""How long a task's content is kept, and the record-keeping minimums a policy's regulations set.

    [retention]                      # in a policy file; absent: content is kept for the log's life
    content_days = 2192              # prompts, answers, attachments, caller-supplied parts
    max_days = 2557                  # the data-protection maximum the firm states for this task

    minimum_days(policy.regulations)  # -> (2192, "SEC 17a-4") or None

Metadata (who, when, which policy and model, digests, usage, outcome) is kept for the log's
life whatever the class says: it is what proves the log complete. Only content expires.
The minimums are the periods the named rules set for the records a task produces; a
regulation the table does not know sets none, and the review says nothing of it.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["REGULATORY_MINIMUMS", "Minimum", "RetentionTable", "minimum_days"]


class RetentionTable(BaseModel):
    """A task's retention class. The default keeps content for the log's life, so a policy
    without a ``[retention]`` table keeps the fingerprint it had before the table existed."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    # Days after a request was recorded that its content may be erased by `gateway audit purge`.
    content_days: int | None = Field(default=None, gt=0)
    # The data-protection maximum stated for this task's content (GDPR Art. 5(1)(e)): the
    # review refuses a class that keeps content longer, or forever.
    max_days: int | None = Field(default=None, gt=0)
    # A name for the class, shown in reviews and purge summaries ("client-comms-6y").
    name: str | None = None


class Minimum(NamedTuple):
    match: str  # matched case-insensitively anywhere in a `regulations` entry
    days: int
    rule: str  # how the review names it


# Whole years rounded up to include leap days, so a class of exactly N years passes.
_YEAR = 366
# The longest period a named rule sets for the records it covers: a task's prompts and answers
# may be communications (17a-4(b)(4): three years) or a firm's books (17a-4(a): six), and the
# review cannot tell which, so it holds the policy to the longer one.
REGULATORY_MINIMUMS: tuple[Minimum, ...] = (
    Minimum("17a-4", 6 * _YEAR, "SEC Rule 17a-4 (six years, its longest period: 17a-4(a))"),
    Minimum("finra 4511", 6 * _YEAR, "FINRA Rule 4511 (six years)"),
    Minimum("mifid", 5 * _YEAR, "MiFID II Art. 16(7) and MiFIR Art. 25(1) (five years)"),
    Minimum("sysc 10a", 5 * _YEAR, "FCA SYSC 10A (five years)"),
    Minimum("ai act", 183, "EU AI Act Art. 19 (at least six months)"),
)


def minimum_days(regulations: tuple[str, ...]) -> Minimum | None:
    """The longest minimum any named regulation sets, or None when none sets one."""
    found = [m for m in REGULATORY_MINIMUMS for r in regulations if m.match in r.casefold()]
    return max(found, key=lambda m: m.days, default=None)
