"""Format 2 reservations: a reader reserves few seqs, and nobody voids one inside its grace.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-09

Under 0010 every role that may append (the application role, and the reviewer for its own
export, checkpoint and access records) held USAGE on ``events_seq``, so a reviewer could
call ``nextval`` 200,000 times in 0.2 s: each seq a hole that the integrator must wait out
and void, one signed row each (152 s of voiding while real events waited unlinked).

Seqs are now reserved through ``audit_reserve(n)`` (``SECURITY DEFINER``, pinned
``search_path``), which every writer calls instead of ``nextval``:

- a full appender (a session that may INSERT into ``payloads``: the application role, the
  tables' owner) gets its ``n`` seqs, as with ``nextval``;
- a session that may INSERT into ``events`` but not ``payloads`` (a reviewer; the
  integrator, which never reserves) gets at most ``MAX_READER_BATCH`` at a time, and none
  while ``MAX_OPEN`` or more seqs above the linked head are reserved and not committed
  (``check_violation``, naming the count): holes are then voided by the integrator after its
  grace, so what a reader can make it void is bounded by ``MAX_OPEN`` per grace;
- anyone else gets ``insufficient_privilege``.

USAGE on ``events_seq`` is taken back from every role that may not INSERT into ``payloads``
(the reviewers ``gateway db grant --read-only`` made); ``audit.store.roles`` no longer grants
it to them.

The integrator role voids seqs whose writer never committed; under 0010 it could void any
reserved seq at once, so a seq a live writer had just reserved was voided under it and that
writer's insert failed (the request failed closed). A void from that role now needs the
seq to have been reserved for at least ``audit_void_grace()`` (30 s; the tables' owner may
``CREATE OR REPLACE`` the function to change it), as the database itself recorded:

- ``reservation_marks(reserved, marked_at)``: "by ``marked_at``, ``events_seq`` had handed
  out ``reserved``", written only by ``audit_mark_reserved()`` (``SECURITY DEFINER``: it
  reads the sequence and the clock itself, so no caller can back-date a mark), which the
  integrator calls when it first sees a hole; one row per value (the earliest time kept);
- the row policy ``events_append_voids`` gains ``audit_void_due(seq)``: a mark at or above
  the seq, older than the grace.

The application role (voiding its own rolled-back seqs) and the owner are not limited. Both
backends get the table (so the models and ``alembic check`` agree); SQLite uses none of it.
A downgrade restores 0010's void policy, drops the functions and the table, and gives the
reviewers their USAGE back.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = "audit_reserve"
MARKS = "reservation_marks"
VOID_POLICY = "events_append_voids"
VOID_POLICY_BEFORE = "(kind = 'void' AND has_table_privilege('chain'::regclass, 'INSERT'))"
GRACE = "30 seconds"  # audit_void_grace(): the integrator's default grace
MAX_READER_BATCH = 16  # seqs a reader's one append may reserve (its group commit)
MAX_OPEN = 256  # reserved, uncommitted seqs above the linked head that stop a reader

RESERVE_BODY = """
DECLARE
  linked bigint;
  pending bigint;
BEGIN
  IF n IS NULL OR n < 1 THEN
    RAISE EXCEPTION 'audit format 2: reserve at least one seq' USING ERRCODE = 'check_violation';
  END IF;
  IF has_table_privilege(session_user, '{schema}.payloads'::regclass, 'INSERT') THEN
    RETURN QUERY SELECT nextval('{schema}.events_seq'::regclass) FROM generate_series(1, n);
    RETURN;
  END IF;
  IF NOT has_table_privilege(session_user, '{schema}.events'::regclass, 'INSERT') THEN
    RAISE EXCEPTION 'audit format 2: this role may not reserve seqs'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF n > {max_batch} THEN
    RAISE EXCEPTION 'audit format 2: a reader reserves at most {max_batch} seqs at a time'
      USING ERRCODE = 'check_violation';
  END IF;
  SELECT coalesce(max(c.seq), {schema}.audit_sequenced_from() - 1) INTO linked
    FROM {schema}.chain c;
  SELECT {schema}.audit_seq_reserved() - linked - count(*) INTO pending
    FROM {schema}.events e WHERE e.seq > linked;
  IF pending >= {max_open} THEN
    RAISE EXCEPTION 'audit format 2: % seqs are reserved and not committed; a reader may reserve more once the integrator has voided them', pending
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN QUERY SELECT nextval('{schema}.events_seq'::regclass) FROM generate_series(1, n);
END
"""

MARK_BODY = """
  INSERT INTO {schema}.reservation_marks (reserved, marked_at)
    VALUES ({schema}.audit_seq_reserved(), clock_timestamp())
    ON CONFLICT (reserved) DO NOTHING;
  SELECT {schema}.audit_seq_reserved();
"""

DUE_BODY = """
  SELECT EXISTS (
    SELECT 1 FROM {schema}.reservation_marks m
    WHERE m.reserved >= s AND m.marked_at <= clock_timestamp() - {schema}.audit_void_grace()
  )
"""

# Roles holding USAGE on the sequence without INSERT on payloads: the reviewers.
READERS_WITH_USAGE = """
SELECT DISTINCT quote_ident(r.rolname)
FROM pg_class c
CROSS JOIN LATERAL aclexplode(c.relacl) a
JOIN pg_roles r ON r.oid = a.grantee
WHERE c.oid = 'events_seq'::regclass AND a.privilege_type = 'USAGE'
  AND NOT has_table_privilege(r.oid, 'payloads'::regclass, 'INSERT')
"""

# Roles that may INSERT into events but not payloads or chain: the reviewers, for a downgrade.
READERS = """
SELECT DISTINCT quote_ident(r.rolname)
FROM pg_class c
CROSS JOIN LATERAL aclexplode(c.relacl) a
JOIN pg_roles r ON r.oid = a.grantee
WHERE c.oid = 'events'::regclass AND a.privilege_type = 'INSERT'
  AND NOT has_table_privilege(r.oid, 'payloads'::regclass, 'INSERT')
  AND NOT has_table_privilege(r.oid, 'chain'::regclass, 'INSERT')
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


def _run_raw(statements: list[str]) -> None:
    """Run on the driver's own cursor: the bodies hold PL/pgSQL's % (see 0005)."""
    cursor = op.get_bind().connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        for statement in statements:
            cursor.execute(statement)
    finally:
        cursor.close()


def upgrade() -> None:
    op.create_table(
        MARKS,
        sa.Column("reserved", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("marked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("reserved", name=op.f("pk_reservation_marks")),
    )
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    schema = _schema()
    body = RESERVE_BODY.format(schema=schema, max_batch=MAX_READER_BATCH, max_open=MAX_OPEN)
    definer = "SECURITY DEFINER SET search_path = pg_catalog, pg_temp"
    _run_raw(
        [
            f"CREATE FUNCTION {schema}.{FUNCTION}(n integer) RETURNS SETOF bigint "
            f"LANGUAGE plpgsql VOLATILE {definer} AS $reserve${body}$reserve$",
            f"CREATE FUNCTION {schema}.audit_void_grace() RETURNS interval LANGUAGE sql "
            f"IMMUTABLE AS $grace$ SELECT interval '{GRACE}' $grace$",
            f"CREATE FUNCTION {schema}.audit_mark_reserved() RETURNS bigint LANGUAGE sql "
            f"VOLATILE {definer} AS $mark${MARK_BODY.format(schema=schema)}$mark$",
            f"CREATE FUNCTION {schema}.audit_void_due(s bigint) RETURNS boolean LANGUAGE sql "
            f"STABLE {definer} AS $due${DUE_BODY.format(schema=schema)}$due$",
            f"ALTER POLICY {VOID_POLICY} ON events WITH CHECK (kind = 'void' AND "
            f"has_table_privilege('chain'::regclass, 'INSERT') AND {schema}.audit_void_due(seq))",
            f"CREATE TRIGGER {MARKS}_append_only BEFORE UPDATE OR DELETE ON {MARKS} "
            "FOR EACH ROW EXECUTE FUNCTION audit_refuse_change()",
        ]
    )
    for role in conn.exec_driver_sql(READERS_WITH_USAGE).scalars().all():
        conn.exec_driver_sql(f"REVOKE USAGE ON SEQUENCE {schema}.events_seq FROM {role}")


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        schema = _schema()
        for role in conn.exec_driver_sql(READERS).scalars().all():
            conn.exec_driver_sql(f"GRANT USAGE ON SEQUENCE {schema}.events_seq TO {role}")
        conn.exec_driver_sql(
            f"ALTER POLICY {VOID_POLICY} ON events WITH CHECK {VOID_POLICY_BEFORE}"
        )
        for function in (f"{FUNCTION}(integer)", "audit_void_due(bigint)",
                         "audit_mark_reserved()", "audit_void_grace()"):  # fmt: skip
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {schema}.{function}")
    op.drop_table(MARKS)
