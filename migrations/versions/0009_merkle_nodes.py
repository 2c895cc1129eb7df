"""The log's Merkle tree, stored: complete subtree hashes, so a proof costs O(log n) reads.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07

``merkle_nodes(level, node_index, hash)`` holds, for every complete subtree of the RFC 6962
tree over the log, the hash of leaves [node_index * 2^level, (node_index + 1) * 2^level);
level 0 holds the leaf hashes. It is derived from the ``hash`` column of ``events`` and
filled incrementally by ``gateway audit tree-head`` and ``prove`` (audit.proofs.merkle_store), so
this revision only creates the empty table: an existing log's nodes are computed on first
use. The rows are never trusted: every proof made from them is checked against the root the
signer computed, and ``gateway audit tree-head --rebuild`` recomputes them from the log.

No append-only triggers: the table holds no evidence (the log and the signed heads do), and
a rebuild deletes it. On PostgreSQL the application and reviewer roles get INSERT and SELECT
(audit.store.roles), never DELETE; a rebuild runs as the owner.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "merkle_nodes",
        sa.Column("level", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("node_index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("level", "node_index", name=op.f("pk_merkle_nodes")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("merkle_nodes")
