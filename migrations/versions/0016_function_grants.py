"""Content functions for granted roles only; the integrator selects no content.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03

PostgreSQL lets PUBLIC execute every new function. Up to 0015 any role that could connect
to the audit database could call ``audit_content_hashes(digests)`` (the SHA-256 of each
stored payload row) and ``audit_read_content(access_seq, digest)`` (which refuses it
without an ACCESS record of its own, but need not be reachable at all). Now neither is
executable by PUBLIC: ``gateway db grant`` grants them to each role it sets up, and this
upgrade grants them to the roles granted before (those holding SELECT on ``events``).

The integrator (``gateway db grant ROLE --integrator``) links events and extends the tree;
it never reads a prompt or an answer, yet kept SELECT on ``payloads`` (0015 changed the
reviewers and the eraser only). It now selects ``digest`` and ``size``, as they do.

SQLite has neither roles nor functions: nothing changes there. A downgrade gives EXECUTE
back to PUBLIC and the integrator its SELECT on ``payloads``.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Roles granted by `gateway db grant` (SELECT on events), the owner and superusers aside.
GRANTED = """
SELECT DISTINCT quote_ident(r.rolname)
FROM pg_class c
CROSS JOIN LATERAL aclexplode(c.relacl) a
JOIN pg_roles r ON r.oid = a.grantee
WHERE c.oid = 'events'::regclass AND a.privilege_type = 'SELECT'
  AND r.oid <> c.relowner AND NOT r.rolsuper
"""
# Integrators: INSERT on chain, none on payloads.
INTEGRATORS = """
SELECT DISTINCT quote_ident(r.rolname)
FROM pg_roles r
WHERE has_table_privilege(r.oid, 'chain'::regclass, 'INSERT')
  AND NOT has_table_privilege(r.oid, 'payloads'::regclass, 'INSERT')
  AND r.oid <> (SELECT relowner FROM pg_class WHERE oid = 'payloads'::regclass)
  AND NOT r.rolsuper
"""


def _schema() -> str:
    return str(
        op.get_bind()
        .exec_driver_sql(
            "SELECT quote_ident(n.nspname) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'events'::regclass"
        )
        .scalar_one()
    )


def _functions(schema: str) -> str:
    return f"{schema}.audit_read_content(integer, text), {schema}.audit_content_hashes(text[])"


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    schema = _schema()
    functions = _functions(schema)
    conn.exec_driver_sql(f"REVOKE EXECUTE ON FUNCTION {functions} FROM PUBLIC")
    for role in conn.exec_driver_sql(GRANTED).scalars().all():
        conn.exec_driver_sql(f"GRANT EXECUTE ON FUNCTION {functions} TO {role}")
    for role in conn.exec_driver_sql(INTEGRATORS).scalars().all():
        conn.exec_driver_sql(f"REVOKE SELECT ON {schema}.payloads FROM {role}")
        conn.exec_driver_sql(f"GRANT SELECT (digest, size) ON {schema}.payloads TO {role}")


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    schema = _schema()
    functions = _functions(schema)
    conn.exec_driver_sql(f"GRANT EXECUTE ON FUNCTION {functions} TO PUBLIC")
    for role in conn.exec_driver_sql(INTEGRATORS).scalars().all():
        conn.exec_driver_sql(f"GRANT SELECT ON {schema}.payloads TO {role}")
