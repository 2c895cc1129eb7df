"""Which listed requests a reviewer asked for: by outcome and by policy version.

    rows = auditing.requests(selection, limit=None)
    kept = [r for r in rows if wanted(r, statuses=("flagged",), fingerprint="sha256:4f2a")]

A request's status is folded from all its events (``gateway._vocabulary``), so it is known
only once they are read: these filters apply to the listed rows, after the database has
applied the others (task, caller, kind, dates).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from audit import RequestSummary
from gateway._vocabulary import LISTED_STATUSES, has_status
from gateway.errors import InputError

__all__ = ["LISTED_STATUSES", "fingerprint_prefix", "wanted"]

_HEX = re.compile(r"[0-9a-f]{6,64}")


def fingerprint_prefix(given: str) -> str:
    """``given`` (a whole fingerprint, ``sha256:`` and at least six hex digits, or the digits
    alone as `audit list` shows them) as the prefix a request's fingerprint must start with."""
    digits = given.strip().lower().removeprefix("sha256:")
    if not _HEX.fullmatch(digits):
        raise InputError(
            f"--fingerprint {given!r} is not a policy fingerprint.",
            hint="Give at least 6 hex digits of it, as `gateway audit list` or "
            "`gateway policy history TASK` show it (sha256: may be left off).",
        )
    return "sha256:" + digits


def wanted(
    row: RequestSummary, *, statuses: Sequence[str] = (), fingerprint: str | None = None
) -> bool:
    """Whether ``row`` has one of ``statuses`` (any when empty) and ran under a policy
    version whose fingerprint starts with ``fingerprint`` (see :func:`fingerprint_prefix`)."""
    if statuses and not any(has_status(s, row.status, row.kinds) for s in statuses):
        return False
    return fingerprint is None or (row.policy_fingerprint or "").startswith(fingerprint)
