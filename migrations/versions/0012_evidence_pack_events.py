"""A reviewer may also append the ``evidence_pack`` record of a pack it builds.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02

`gateway evidence REGIME` records each pack as an ``evidence_pack`` event (the regime, the
period, who built it, each verdict, the digest of each file). A reviewer (``gateway db grant
ROLE --read-only``) builds packs, so ``events_append_reads`` (0003, widened to ``access`` by
0008) is widened to ``evidence_pack``. The event carries no payload or policy row, so a
reviewer still cannot write content, and every other kind stays refused. SQLite has no
roles: nothing to do there. A downgrade narrows the policy back.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

READ_KINDS = "('export', 'checkpoint', 'access', 'evidence_pack')"
READ_KINDS_BEFORE = "('export', 'checkpoint', 'access')"


def _reads_policy(kinds: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"ALTER POLICY events_append_reads ON events WITH CHECK (kind IN {kinds})")


def upgrade() -> None:
    _reads_policy(READ_KINDS)


def downgrade() -> None:
    _reads_policy(READ_KINDS_BEFORE)
