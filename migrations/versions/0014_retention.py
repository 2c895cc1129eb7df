"""Erasure: content may leave the log only as an erasure event recorded, and only by the eraser.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

Content (prompts, answers, attachments) expires under a policy's retention class or is erased
on a data-subject request (audit.erasure, docs/security.md). The chain keeps every event; the
content rows go. This revision adds ``erased_content(digest, erasure_seq)``: the payloads an
ERASURE event removed, written in the transaction that deletes them. On both backends a
payload row may be deleted only while ``erased_content`` names its digest, and a row goes
into ``erased_content`` only when the event at its ``erasure_seq`` is an ``erasure`` event
whose body names the digest. ``erased_content`` itself is append-only.

On PostgreSQL only a dedicated eraser role (``gateway db grant ROLE --eraser``: DELETE on
``payloads``, INSERT on ``erased_content`` and ``events``) may remove content. Row security
gains a restrictive policy: an ``erasure`` event is let in only for a role that may DELETE
from ``payloads`` (so the application role and the reviewers cannot forge one), and a
permissive one that lets that role append its ``erasure``, ``legal_hold`` and
``hold_release`` events (it holds no INSERT on ``payloads``). The owner and superusers can
still do anything; verify tells content gone without an erasure event as tampering.
A downgrade drops the table, the policies and the triggers, and refuses DELETE again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ERASER_KINDS = "('erasure', 'legal_hold', 'hold_release')"

SQLITE_UP = [
    "DROP TRIGGER IF EXISTS payloads_no_delete",
    "CREATE TRIGGER payloads_no_delete BEFORE DELETE ON payloads "
    "WHEN NOT EXISTS (SELECT 1 FROM erased_content WHERE digest = OLD.digest) "
    "BEGIN SELECT RAISE(ABORT, 'payloads are append-only: DELETE refused without an erasure "
    "event'); END",
    "CREATE TRIGGER erased_content_named BEFORE INSERT ON erased_content "
    "WHEN NOT EXISTS (SELECT 1 FROM events WHERE seq = NEW.erasure_seq AND kind = 'erasure' "
    "AND instr(CAST(body AS TEXT), NEW.digest) > 0) "
    "BEGIN SELECT RAISE(ABORT, 'erased_content: no erasure event names this content'); END",
    "CREATE TRIGGER erased_content_no_update BEFORE UPDATE ON erased_content "
    "BEGIN SELECT RAISE(ABORT, 'erased_content is append-only: UPDATE refused'); END",
    "CREATE TRIGGER erased_content_no_delete BEFORE DELETE ON erased_content "
    "BEGIN SELECT RAISE(ABORT, 'erased_content is append-only: DELETE refused'); END",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS erased_content_named",
    "DROP TRIGGER IF EXISTS erased_content_no_update",
    "DROP TRIGGER IF EXISTS erased_content_no_delete",
    "DROP TRIGGER IF EXISTS payloads_no_delete",
    "CREATE TRIGGER payloads_no_delete BEFORE DELETE ON payloads "
    "BEGIN SELECT RAISE(ABORT, 'payloads are append-only: DELETE refused'); END",
]

PG_UP = [
    """
CREATE FUNCTION audit_erasable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND EXISTS (
      SELECT 1 FROM erased_content e WHERE e.digest = OLD.digest) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'audit table % is append-only: % refused without an erasure event',
    TG_TABLE_NAME, TG_OP USING ERRCODE = 'insufficient_privilege';
END $$
""",
    """
CREATE FUNCTION audit_erasure_named() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (
      SELECT 1 FROM events e WHERE e.seq = NEW.erasure_seq AND e.kind = 'erasure'
        AND position(convert_to(NEW.digest, 'UTF8') IN e.body) > 0) THEN
    RAISE EXCEPTION 'erased_content: no erasure event at seq % names %',
      NEW.erasure_seq, NEW.digest USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$
""",
    "DROP TRIGGER payloads_append_only ON payloads",
    "CREATE TRIGGER payloads_append_only BEFORE UPDATE OR DELETE ON payloads "
    "FOR EACH ROW EXECUTE FUNCTION audit_erasable()",
    "CREATE TRIGGER erased_content_named BEFORE INSERT ON erased_content "
    "FOR EACH ROW EXECUTE FUNCTION audit_erasure_named()",
    "CREATE TRIGGER erased_content_append_only BEFORE UPDATE OR DELETE ON erased_content "
    "FOR EACH ROW EXECUTE FUNCTION audit_refuse_change()",
    "CREATE TRIGGER erased_content_no_truncate BEFORE TRUNCATE ON erased_content "
    "FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change()",
    # Every role that reads the content reads what was erased of it (verify needs both).
    """
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT DISTINCT quote_ident(g.rolname) AS name
           FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
           JOIN pg_roles g ON g.oid = a.grantee
           WHERE c.oid = 'payloads'::regclass AND a.privilege_type = 'SELECT' LOOP
    EXECUTE 'GRANT SELECT ON erased_content TO ' || r.name;
  END LOOP;
END $$
""",
    "CREATE POLICY events_erasure_by_eraser ON events AS RESTRICTIVE FOR INSERT TO PUBLIC "
    "WITH CHECK (kind <> 'erasure' OR has_table_privilege('payloads'::regclass, 'DELETE'))",
    "CREATE POLICY events_append_erasures ON events FOR INSERT TO PUBLIC WITH CHECK "
    f"(kind IN {ERASER_KINDS} AND has_table_privilege('payloads'::regclass, 'DELETE'))",
]
PG_DOWN = [
    "DROP POLICY IF EXISTS events_append_erasures ON events",
    "DROP POLICY IF EXISTS events_erasure_by_eraser ON events",
    "DROP TRIGGER IF EXISTS erased_content_no_truncate ON erased_content",
    "DROP TRIGGER IF EXISTS erased_content_append_only ON erased_content",
    "DROP TRIGGER IF EXISTS erased_content_named ON erased_content",
    "DROP TRIGGER IF EXISTS payloads_append_only ON payloads",
    "CREATE TRIGGER payloads_append_only BEFORE UPDATE OR DELETE ON payloads "
    "FOR EACH ROW EXECUTE FUNCTION audit_refuse_change()",
    "DROP FUNCTION IF EXISTS audit_erasure_named()",
    "DROP FUNCTION IF EXISTS audit_erasable()",
]


def upgrade() -> None:
    op.create_table(
        "erased_content",
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("erasure_seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("digest", "erasure_seq", name=op.f("pk_erased_content")),
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in PG_UP if postgres else SQLITE_UP:
        op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in PG_DOWN if postgres else SQLITE_DOWN:
        op.execute(statement)
    op.drop_table("erased_content")
