"""A reviewer's format-1 appends on PostgreSQL: one committing procedure call per event.

    schema = review_schema(backend)           # None unless it may not INSERT into payloads
    review_commit(backend, schema, signer, [prepare(draft)])   # -> [Appended(...)]

A reviewer (``gateway db grant --read-only``) records its exports, checkpoints and content
reads, and must not be able to hold up the gateway while it does: it never takes the chain
lock in a transaction of its own (migration 0013). So the head is read without the lock, the
row linked and signed here, and ``CALL audit_review_append(...)`` takes the lock, checks that
the row still links to the head, inserts it and commits, all on the server. When a writer
moved the head on in between, the procedure refuses (``serialization_failure``) and the row
is linked again to the new head.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from audit.canonical import canonical_bytes
from audit.errors import AppendFailed
from audit.store._prepare import Prepared
from audit.store.backend import Backend
from audit.store.chain import GENESIS, canonical_time
from audit.store.models import Appended
from audit.store.signing import Signer

HEAD_SQL = "SELECT seq, hash FROM events WHERE seq >= 1 ORDER BY seq DESC LIMIT 1"
HEAD_MOVED = "40001"  # migration 0013's refusal when the row no longer links to the head
# Each retry follows an append that moved the head: a busy gateway appends a few hundred
# times a second, each a short transaction, so the reviewer's row goes in within a few.
RETRIES = 50
COLUMNS = (
    "seq",
    "event_id",
    "request_id",
    "kind",
    "recorded_at",
    "task",
    "caller",
    "policy_fingerprint",
    "request_hash",
    "body",
    "prev_hash",
    "hash",
    "signature",
    "key_id",
)
# The procedure checks that the statement names it with its schema (migration 0013).
CALL_SQL = "CALL {}.audit_review_append(" + ", ".join(f"%({c})s" for c in COLUMNS) + ")"
REVIEWER_SQL = (
    "SELECT has_table_privilege(current_user, 'payloads', 'INSERT'), quote_ident(n.nspname) "
    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.oid = 'events'::regclass"
)


def review_schema(backend: Backend) -> str | None:
    """The events table's schema when this session appends as a reviewer (PostgreSQL,
    without INSERT on payloads), else None."""
    if backend.dialect != "postgresql":
        return None
    with backend.writer.connect() as conn:
        appender, schema = conn.exec_driver_sql(REVIEWER_SQL).one()
    return None if appender else str(schema)


def review_commit(
    backend: Backend, schema: str, signer: Signer | None, batch: list[Prepared]
) -> list[Appended]:
    """Append each of ``batch`` through the committing procedure, in order. Each event
    commits on its own: a reviewer's batch is its own records, and one that went in stays."""
    durability = canonical_bytes(backend.durability)
    results: list[Appended] = []
    call = CALL_SQL.format(schema)
    with backend.writer.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")  # CALL may then COMMIT
        for item in batch:
            if item.payload_rows or item.policy_row is not None:
                raise AppendFailed(
                    "a reviewer's session records no content (its records name digests).",
                    hint="Record requests with the application role.",
                )
            results.append(_one(conn, call, durability, signer, item))
    return results


def _one(
    conn: Connection, call: str, durability: bytes, signer: Signer | None, item: Prepared
) -> Appended:
    for _ in range(RETRIES):
        head = conn.exec_driver_sql(HEAD_SQL).all()
        seq, prev = (head[0][0], head[0][1]) if head else (0, GENESIS)
        now = datetime.now(UTC)
        row: dict[str, Any] = item.event_row(seq + 1, prev, now, (durability, canonical_time(now)))
        if signer is not None:
            row["signature"] = signer.sign(row["hash"])
            row["key_id"] = signer.key_id
        try:
            conn.exec_driver_sql(call, row)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) != HEAD_MOVED:
                raise
            continue
        return Appended(seq=row["seq"], hash=row["hash"], event_id=item.event_id, recorded_at=now)
    raise AppendFailed(
        f"the log moved on {RETRIES} times while this reviewer's record waited for its place.",
        hint="Nothing was written. Retry when the gateway is less busy.",
    )
