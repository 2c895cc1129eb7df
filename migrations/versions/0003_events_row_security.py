"""Row-level security on events: a reviewer may append only the records of its own reads.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Reviewers' reads are recorded (``audit export`` and ``audit checkpoint`` append an ``export``
or ``checkpoint`` event before they stream or sign), so a reviewer needs INSERT on ``events``,
but must not be able to forge a request or a response. PostgreSQL grants privileges per table,
not per row, so this revision enables row-level security on ``events`` with three permissive
policies, for PUBLIC (``audit.store.roles.grant`` then needs no per-role policy):

- ``events_read``: every row is visible to whoever holds SELECT (the privilege still decides).
- ``events_append``: any kind, for a role that may also INSERT into ``payloads``. Only a full
  appender (``gateway db grant ROLE``) holds that; a request event needs its payload rows.
- ``events_append_reads``: only ``export`` and ``checkpoint``, for any role that may INSERT
  into ``events``. A reviewer (``gateway db grant ROLE --read-only``) gets INSERT on
  ``events`` alone, so this is the only policy that lets its row in.

Roles granted before this revision keep working unchanged: appenders hold INSERT on payloads,
older read-only roles hold no INSERT at all (grant them again to let them export). The owner
of the table, who runs the migrations, bypasses row security (not FORCEd), and so do
superusers. A downgrade takes INSERT on events back from reviewers.
``'payloads'::regclass`` is stored as the table's OID, so the policy does not
depend on the search path of whoever inserts. SQLite has no roles: nothing to do there.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

POLICIES = {
    "events_read": "FOR SELECT TO PUBLIC USING (true)",
    "events_append": (
        "FOR INSERT TO PUBLIC WITH CHECK (has_table_privilege('payloads'::regclass, 'INSERT'))"
    ),
    "events_append_reads": ("FOR INSERT TO PUBLIC WITH CHECK (kind IN ('export', 'checkpoint'))"),
}

# Roles given INSERT on events directly but not INSERT on payloads: the reviewers.
REVIEWERS = """
SELECT DISTINCT quote_ident(r.rolname)
FROM pg_class c
CROSS JOIN LATERAL aclexplode(c.relacl) a
JOIN pg_roles r ON r.oid = a.grantee
WHERE c.oid = 'events'::regclass AND a.privilege_type = 'INSERT'
  AND NOT has_table_privilege(r.oid, 'payloads'::regclass, 'INSERT')
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, rule in POLICIES.items():
        op.execute(f"CREATE POLICY {name} ON events {rule}")
    op.execute("ALTER TABLE events ENABLE ROW LEVEL SECURITY")


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    # Without row security INSERT on events would let a reviewer append any kind, so the
    # reviewers (INSERT on events, none on payloads) lose INSERT: read-only as under 0002.
    reviewers = conn.exec_driver_sql(REVIEWERS).scalars().all()
    for role in reviewers:
        op.execute(f"REVOKE INSERT ON events FROM {role}")
    op.execute("ALTER TABLE events DISABLE ROW LEVEL SECURITY")
    for name in POLICIES:
        op.execute(f"DROP POLICY IF EXISTS {name} ON events")
