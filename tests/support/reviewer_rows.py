"""A reviewer's hand-made events row, put in the one way a reviewer can (migration 0013).

    review_append(conn, row)   # an autocommit psycopg connection as the reviewer

A reviewer's session inserts no format-1 row itself: its rows go in through
``CALL public.audit_review_append(...)``, which commits on the server. Tests that play a
reviewer planting a row (a deep body, a forged kind) use this, so the row meets the same
checks (row kinds, the chain guard) that a reviewer's own store meets.
"""

from __future__ import annotations

from typing import Any

import psycopg

COLUMNS = (
    "seq", "event_id", "request_id", "kind", "recorded_at", "task", "caller",
    "policy_fingerprint", "request_hash", "body", "prev_hash", "hash", "signature", "key_id",
)  # fmt: skip
CALL = "CALL public.audit_review_append(" + ", ".join(["%s"] * len(COLUMNS)) + ")"


def review_append(conn: psycopg.Connection[Any], row: dict[str, Any]) -> None:
    """Append ``row`` (its missing columns NULL) as the reviewer connected by ``conn``."""
    conn.execute(CALL, tuple(row.get(c) for c in COLUMNS))
