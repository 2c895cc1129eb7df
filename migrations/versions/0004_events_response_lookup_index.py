"""An index for the replay cache's lookup: the newest RESPONSE for a request hash.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

``AuditStore.find_response`` asks for events of one request hash and kind, newest seq first.
With only the single-column ``request_hash`` index, a hash that has served many cache hits
makes the database walk every CACHE_HIT row of that hash (about 1.2 ms per lookup in
bench/results/gateway.md); (request_hash, kind, seq) answers it from the index.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_events_request_hash_kind_seq"


def upgrade() -> None:
    op.create_index(INDEX, "events", ["request_hash", "kind", "seq"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name="events")
