"""Record signatures: each event carries the writing gateway's Ed25519 signature of its hash.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04

The hash chain proves order, not authorship: whoever can INSERT can append a well-linked row.
So each event is signed by the writing gateway's record key, a key the database never holds.
The signature cannot live inside the hashed body (it signs the body), so it is stored beside
it: ``signature`` is the base64 Ed25519 signature of the event's ``hash`` (which covers
``prev_hash`` and the body; see ``audit.store.signing``), ``key_id`` the short fingerprint of the
public key that made it. Both are nullable: rows written before this revision have neither,
and verify reports them as unsigned (a defect unless ``--allow-unsigned-before`` says the log
predates signing).

The PostgreSQL chain guard of 0005 is unchanged: it cannot check an Ed25519 signature, and it
checks only columns the body mirrors. Adding nullable columns rewrites no rows on either
backend, and the SQLite triggers (which name no columns but ``seq``) stay as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE ADD COLUMN on both backends: a batch (copy-and-move) on SQLite would
    # drop the append-only triggers with the old table.
    op.add_column("events", sa.Column("signature", sa.Text(), nullable=True))
    op.add_column("events", sa.Column("key_id", sa.String(length=32), nullable=True))


def downgrade() -> None:
    # SQLite 3.35+ drops a column in place (Alembic's SQLite drop_column would need a batch).
    for column in ("key_id", "signature"):
        op.execute(f"ALTER TABLE events DROP COLUMN {column}")
