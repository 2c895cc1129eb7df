"""The audit database's tables, as SQLAlchemy Core tables on one ``MetaData``.

    from audit.store.schema import EVENT_COLUMNS, EVENTS, metadata
    metadata.create_all(engine)        # tests only: Alembic owns the real schema
    select(EVENTS).where(EVENTS.c.seq > 10)
    EVENT_COLUMNS                      # ("seq", "event_id", ..., "hash"): the table's order

``events`` is the hash chain. ``payloads`` and ``policies`` are content-addressed side tables:
each row is keyed by the digest of its bytes and is written once. ``audit_meta`` holds the
database identity that checkpoints name, so a checkpoint cannot be checked against a copy of
another log. Append-only triggers live in the migration, not here: SQLAlchemy metadata has no
portable notion of a trigger.

Plain ``Table`` objects, not ORM models: nothing here uses an ORM session, and importing
``sqlalchemy.orm`` and mapping the classes cost every read command about 0.1 s of CPU
(bench/results/cli_start.md). tests/test_cli_fast_start.py holds that reading the log does not
import it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    FromClause,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on every backend.

    SQLite has no time zone type; storing naive UTC and re-attaching UTC on the way out keeps
    the column comparable with the ``recorded_at`` inside the hashed body.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("audit timestamps must be timezone-aware")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData(naming_convention=NAMING)


def _key(name: str, type_: Integer | String) -> Column[Any]:
    """A primary key column the store assigns itself, never the database."""
    return Column(name, type_, primary_key=True, autoincrement=False)


# The hash chain. The order of the columns is a row's shape (EVENT_COLUMNS).
EVENTS = Table(
    "events",
    metadata,
    # Assigned by the store under the chain lock (head + 1), never by the database, so a rolled
    # back append leaves no gap.
    _key("seq", Integer()),
    Column("event_id", String(64), nullable=False, unique=True),
    Column("request_id", String(128), nullable=False, index=True),
    Column("kind", String(32), nullable=False, index=True),
    Column("recorded_at", UTCDateTime(), nullable=False, index=True),
    Column("task", String(200), index=True),
    Column("caller", String(200), index=True),
    Column("policy_fingerprint", String(80)),
    Column("request_hash", String(80), index=True),
    Column("body", LargeBinary(), nullable=False),
    Column("prev_hash", String(80), nullable=False),
    Column("hash", String(80), nullable=False),
    # Outside the hashed body, which they sign (migration 0006; audit.store.signing): the
    # writing gateway's Ed25519 signature of ``hash`` and the fingerprint of its public key.
    # NULL on rows written before signatures existed.
    Column("signature", Text()),
    Column("key_id", String(32)),
    # Migration 0002: a CHECK on PostgreSQL, a BEFORE INSERT trigger on SQLite. A row below 1
    # would sit outside verify's walk (1, 2, 3, ...).
    CheckConstraint("seq >= 1", name="ck_events_seq_positive"),
    # The replay cache's lookup: newest RESPONSE of one request hash (migration 0004).
    Index("ix_events_request_hash_kind_seq", "request_hash", "kind", "seq"),
)

PAYLOADS = Table(
    "payloads",
    metadata,
    Column("digest", String(80), primary_key=True),
    Column("size", Integer(), nullable=False),
    Column("content", LargeBinary(), nullable=False),
)

# A payload an ERASURE event removed (migration 0014): written in the transaction that deletes
# the payload row, and the only thing that lets the row go. Verify reads a missing payload
# with a row here, named by the erasure event at ``erasure_seq``, as erased by policy rather
# than tampered with (audit.erasure).
ERASED_CONTENT = Table(
    "erased_content",
    metadata,
    Column("digest", String(80), primary_key=True),
    _key("erasure_seq", Integer()),
)

# The fingerprint is the digest of the canonical content, so the key proves the row.
POLICIES = Table(
    "policies",
    metadata,
    Column("fingerprint", String(80), primary_key=True),
    Column("content", LargeBinary(), nullable=False),
)

# A complete subtree of the log's Merkle tree (audit.proofs.merkle_store): derived and
# rebuildable. Node (level, node_index) is the RFC 6962 hash of leaves
# [i * 2^level, (i + 1) * 2^level); level 0 holds the leaf hashes. Never trusted: a proof made
# from these rows is checked against the root before anything is signed or handed out
# (migration 0009). One B-tree keyed by (level, node_index) on SQLite: no rowid beside the key.
MERKLE_NODES = Table(
    "merkle_nodes",
    metadata,
    _key("level", Integer()),
    _key("node_index", Integer()),
    Column("hash", LargeBinary(), nullable=False),
    sqlite_with_rowid=False,
)

# A format-2 event's link (migration 0010), written by the integrator only:
# ``hash = sha256(prev_hash || the event's hash)``, where a format-2 event's own ``hash`` is
# ``sha256(body)`` (audit.store.sequenced).
CHAIN = Table(
    "chain",
    metadata,
    _key("seq", Integer()),
    Column("prev_hash", String(80), nullable=False),
    Column("hash", String(80), nullable=False),
)

# "By ``marked_at``, ``events_seq`` had handed out ``reserved``" (migration 0011), written only
# by ``audit_mark_reserved()``: the integrator role may void a seq only once a mark at or above
# it is older than ``audit_void_grace()``.
RESERVATION_MARKS = Table(
    "reservation_marks",
    metadata,
    _key("reserved", Integer()),
    Column("marked_at", UTCDateTime(), nullable=False),
)

# Who inserted the ACCESS event at ``access_seq`` (migration 0015), written only by a trigger
# on ``events``: ``audit_read_content()`` returns content to that reader alone, once the event
# is committed. SQLite has the table and leaves it empty.
CONTENT_READERS = Table(
    "content_readers",
    metadata,
    _key("access_seq", Integer()),
    Column("reader", String(64), nullable=False),
    Column("xact", BigInteger(), nullable=False),
    Column("recorded_at", UTCDateTime(), nullable=False),
)

# A checkpoint the integrator signed over the linked prefix 1..``size`` (migration 0010): the
# RFC 6962 root, the last link, and the signed checkpoint's JSON.
CHAIN_CHECKPOINTS = Table(
    "chain_checkpoints",
    metadata,
    _key("size", Integer()),
    Column("root", String(80), nullable=False),
    Column("chain_head", String(80), nullable=False),
    Column("made_at", UTCDateTime(), nullable=False),
    Column("checkpoint", Text(), nullable=False),
)

AUDIT_META = Table(
    "audit_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text(), nullable=False),
)


def column_names(table: FromClause) -> tuple[str, ...]:
    """A table's column names in definition order: the one source of a row's shape."""
    return tuple(table.columns.keys())


EVENT_COLUMNS = column_names(EVENTS)
