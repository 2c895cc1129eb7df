"""Events start at seq 1: refuse a row with seq < 1, which no link of the chain would cover.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Verify walks seq 1, 2, 3, ...; a row at seq 0 or below would sit outside that walk (verify
now also counts such rows and reports them as ``outside_chain``). PostgreSQL gets a CHECK
constraint; SQLite cannot add one with ALTER TABLE, so a BEFORE INSERT trigger refuses the row
instead (UPDATE is already refused by ``events_no_update``). The PostgreSQL constraint is
added NOT VALID: an upgrade must not fail on a log that already holds such a row; verify is
what names it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CONSTRAINT = "ck_events_seq_positive"
SQLITE_TRIGGER = (
    f"CREATE TRIGGER {CONSTRAINT} BEFORE INSERT ON events WHEN NEW.seq < 1 "
    "BEGIN SELECT RAISE(ABORT, 'audit events start at seq 1: seq < 1 refused'); END"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE events ADD CONSTRAINT {CONSTRAINT} CHECK (seq >= 1) NOT VALID")
    else:
        op.execute(SQLITE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE events DROP CONSTRAINT IF EXISTS {CONSTRAINT}")
    else:
        op.execute(f"DROP TRIGGER IF EXISTS {CONSTRAINT}")
