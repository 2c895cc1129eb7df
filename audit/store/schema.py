"""The audit database's tables, as typed SQLAlchemy 2.0 models.

    from audit.store.schema import EVENT_COLUMNS, Base, Event
    Base.metadata.create_all(engine)   # tests only: Alembic owns the real schema
    EVENT_COLUMNS                      # ("seq", "event_id", ..., "hash"): the table's order

``events`` is the hash chain. ``payloads`` and ``policies`` are content-addressed side tables:
each row is keyed by the digest of its bytes and is written once. ``audit_meta`` holds the
database identity that checkpoints name, so a checkpoint cannot be checked against a copy of
another log. Append-only triggers live in the migration, not here: SQLAlchemy metadata has no
portable notion of a trigger.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    FromClause,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
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


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Event(Base):
    __tablename__ = "events"
    # Migration 0002: a CHECK on PostgreSQL, a BEFORE INSERT trigger on SQLite. A row below 1
    # would sit outside verify's walk (1, 2, 3, ...).
    __table_args__ = (
        CheckConstraint("seq >= 1", name="ck_events_seq_positive"),
        # The replay cache's lookup: newest RESPONSE of one request hash (migration 0004).
        Index("ix_events_request_hash_kind_seq", "request_hash", "kind", "seq"),
    )

    # Assigned by the store under the chain lock (head + 1), never by the database, so a rolled
    # back append leaves no gap.
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    event_id: Mapped[str] = mapped_column(String(64), unique=True)
    request_id: Mapped[str] = mapped_column(String(128), index=True)
    kind: Mapped[str] = mapped_column(String(32), index=True)
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    task: Mapped[str | None] = mapped_column(String(200), index=True)
    caller: Mapped[str | None] = mapped_column(String(200), index=True)
    policy_fingerprint: Mapped[str | None] = mapped_column(String(80))
    request_hash: Mapped[str | None] = mapped_column(String(80), index=True)
    body: Mapped[bytes] = mapped_column(LargeBinary)
    prev_hash: Mapped[str] = mapped_column(String(80))
    hash: Mapped[str] = mapped_column(String(80))
    # Outside the hashed body, which they sign (migration 0006; audit.store.signing): the writing
    # gateway's Ed25519 signature of ``hash`` and the fingerprint of its public key. NULL on
    # rows written before signatures existed.
    signature: Mapped[str | None] = mapped_column(Text)
    key_id: Mapped[str | None] = mapped_column(String(32))


class Payload(Base):
    __tablename__ = "payloads"

    digest: Mapped[str] = mapped_column(String(80), primary_key=True)
    size: Mapped[int] = mapped_column(Integer)
    content: Mapped[bytes] = mapped_column(LargeBinary)


class ErasedContent(Base):
    """A payload an ERASURE event removed (migration 0014): written in the transaction that
    deletes the payload row, and the only thing that lets the row go. Verify reads a missing
    payload with a row here, named by the erasure event at ``erasure_seq``, as erased by
    policy rather than tampered with (audit.erasure)."""

    __tablename__ = "erased_content"

    digest: Mapped[str] = mapped_column(String(80), primary_key=True)
    erasure_seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)


class PolicyVersion(Base):
    __tablename__ = "policies"

    # The fingerprint is the digest of the canonical content, so the key proves the row.
    fingerprint: Mapped[str] = mapped_column(String(80), primary_key=True)
    content: Mapped[bytes] = mapped_column(LargeBinary)


class MerkleNode(Base):
    """A complete subtree of the log's Merkle tree (audit.proofs.merkle_store): derived and
    rebuildable.

    Node (level, node_index) is the RFC 6962 hash of leaves [i * 2^level, (i + 1) * 2^level);
    level 0 holds the leaf hashes. Never trusted: a proof made from these rows is checked
    against the root before anything is signed or handed out (migration 0009)."""

    __tablename__ = "merkle_nodes"
    # One B-tree keyed by (level, node_index) on SQLite: no rowid beside the key.
    __table_args__ = ({"sqlite_with_rowid": False},)

    level: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    node_index: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    hash: Mapped[bytes] = mapped_column(LargeBinary)


class ChainLink(Base):
    """A format-2 event's link (migration 0010), written by the integrator only:
    ``hash = sha256(prev_hash || the event's hash)``, where a format-2 event's own ``hash``
    is ``sha256(body)`` (audit.store.sequenced)."""

    __tablename__ = "chain"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    prev_hash: Mapped[str] = mapped_column(String(80))
    hash: Mapped[str] = mapped_column(String(80))


class ReservationMark(Base):
    """ "By ``marked_at``, ``events_seq`` had handed out ``reserved``" (migration 0011), written
    only by ``audit_mark_reserved()``: the integrator role may void a seq only once a mark
    at or above it is older than ``audit_void_grace()``."""

    __tablename__ = "reservation_marks"

    reserved: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    marked_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ContentReader(Base):
    """Who inserted the ACCESS event at ``access_seq`` (migration 0015), written only by a
    trigger on ``events``: ``audit_read_content()`` returns content to that reader alone,
    once the event is committed. SQLite has the table and leaves it empty."""

    __tablename__ = "content_readers"

    access_seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    reader: Mapped[str] = mapped_column(String(64))
    xact: Mapped[int] = mapped_column(BigInteger)
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ChainCheckpoint(Base):
    """A checkpoint the integrator signed over the linked prefix 1..``size`` (migration 0010):
    the RFC 6962 root, the last link, and the signed checkpoint's JSON."""

    __tablename__ = "chain_checkpoints"

    size: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    root: Mapped[str] = mapped_column(String(80))
    chain_head: Mapped[str] = mapped_column(String(80))
    made_at: Mapped[datetime] = mapped_column(UTCDateTime())
    checkpoint: Mapped[str] = mapped_column(Text)


class AuditMeta(Base):
    __tablename__ = "audit_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


metadata = Base.metadata


def column_names(table: FromClause) -> tuple[str, ...]:
    """A table's column names in definition order: the one source of a row's shape."""
    return tuple(table.columns.keys())


EVENT_COLUMNS = column_names(Event.__table__)
