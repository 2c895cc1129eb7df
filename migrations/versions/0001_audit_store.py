"""Audit store: the event chain, content-addressed payloads and policies, append-only guards.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GUARDED = ("events", "payloads", "policies", "audit_meta")

# SQLite has no privileges, so triggers are the only guard. INSERT OR REPLACE deletes the old
# row without firing DELETE triggers, hence the BEFORE INSERT checks on the key: events refuse
# a reused seq outright; content-addressed rows ignore a second copy (same key, same bytes).
SQLITE_TRIGGERS = [
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'audit events are append-only: UPDATE refused'); END",
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'audit events are append-only: DELETE refused'); END",
    "CREATE TRIGGER events_no_seq_reuse BEFORE INSERT ON events "
    "WHEN EXISTS (SELECT 1 FROM events WHERE seq = NEW.seq) "
    "BEGIN SELECT RAISE(ABORT, 'audit events are append-only: seq already used'); END",
]
for _table, _key in (("payloads", "digest"), ("policies", "fingerprint"), ("audit_meta", "key")):
    SQLITE_TRIGGERS += [
        f"CREATE TRIGGER {_table}_no_update BEFORE UPDATE ON {_table} "
        f"BEGIN SELECT RAISE(ABORT, '{_table} are append-only: UPDATE refused'); END",
        f"CREATE TRIGGER {_table}_no_delete BEFORE DELETE ON {_table} "
        f"BEGIN SELECT RAISE(ABORT, '{_table} are append-only: DELETE refused'); END",
        f"CREATE TRIGGER {_table}_no_replace BEFORE INSERT ON {_table} "
        f"WHEN EXISTS (SELECT 1 FROM {_table} WHERE {_key} = NEW.{_key}) "
        "BEGIN SELECT RAISE(IGNORE); END",
    ]

PG_FUNCTION = """
CREATE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit table % is append-only: % refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END $$
"""


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("task", sa.String(length=200), nullable=True),
        sa.Column("caller", sa.String(length=200), nullable=True),
        sa.Column("policy_fingerprint", sa.String(length=80), nullable=True),
        sa.Column("request_hash", sa.String(length=80), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("prev_hash", sa.String(length=80), nullable=False),
        sa.Column("hash", sa.String(length=80), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_events")),
        sa.UniqueConstraint("event_id", name=op.f("uq_events_event_id")),
    )
    for column in ("request_id", "kind", "recorded_at", "task", "caller", "request_hash"):
        op.create_index(op.f(f"ix_events_{column}"), "events", [column], unique=False)
    op.create_table(
        "payloads",
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_payloads")),
    )
    op.create_table(
        "policies",
        sa.Column("fingerprint", sa.String(length=80), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("fingerprint", name=op.f("pk_policies")),
    )
    meta = op.create_table(
        "audit_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_audit_meta")),
    )
    # The database identity that checkpoints name: a copy of another log is not this log.
    op.bulk_insert(meta, [{"key": "store_id", "value": str(uuid.uuid4())}])

    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_FUNCTION)
        for table in GUARDED:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION audit_refuse_change()"
            )
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change()"
            )
    else:
        for statement in SQLITE_TRIGGERS:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in GUARDED:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        op.execute("DROP FUNCTION IF EXISTS audit_refuse_change()")
    else:
        for statement in SQLITE_TRIGGERS:
            name = statement.split()[2]
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_table("audit_meta")
    op.drop_table("policies")
    op.drop_table("payloads")
    for column in ("request_id", "kind", "recorded_at", "task", "caller", "request_hash"):
        op.drop_index(op.f(f"ix_events_{column}"), table_name="events")
    op.drop_table("events")
