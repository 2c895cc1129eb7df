"""A reviewer may also append the ``access`` records of its content reads.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06

``audit show --content`` and ``audit export --with-content`` record each read as an
``access`` event before they show anything (who looked at a client's data must be answerable).
Under 0003 a reviewer (``gateway db grant ROLE --read-only``: INSERT on ``events`` only) could
append only ``export`` and ``checkpoint`` rows, so on PostgreSQL a reviewer could not read
content at all. This revision widens ``events_append_reads`` to ``access``. An access event
carries no payload or policy row (its data names the digests it showed), so a reviewer still
cannot write content, and every other kind (request, response, cache hit, approval, key
events) stays refused. SQLite has no roles: nothing to do there. A downgrade narrows the
policy back.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

READ_KINDS = "('export', 'checkpoint', 'access')"
READ_KINDS_BEFORE = "('export', 'checkpoint')"


def _reads_policy(kinds: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"ALTER POLICY events_append_reads ON events WITH CHECK (kind IN {kinds})")


def upgrade() -> None:
    _reads_policy(READ_KINDS)


def downgrade() -> None:
    _reads_policy(READ_KINDS_BEFORE)
