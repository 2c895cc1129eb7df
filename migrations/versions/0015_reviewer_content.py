"""A reviewer reads content only against an ACCESS record it committed first.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02

Up to 0014 a reviewer (``gateway db grant ROLE --read-only``) held ``SELECT`` on
``payloads``: the gateway's content reads record an ACCESS event before they show anything,
but the same role, connected with ``psql``, could select every prompt and answer and nothing
was recorded. Now:

- A role that reads but does not write content (no INSERT on ``payloads``, no INSERT on
  ``chain``: the reviewers and the eraser) loses ``SELECT`` on ``payloads`` and keeps it on
  the ``digest`` and ``size`` columns only: which content exists, never what it says.
  Every other table (the events, whose bodies hold digests and metadata, never content)
  stays readable.
- ``content_readers(access_seq, reader, xact, recorded_at)``: who inserted each ``access``
  event, written by an AFTER INSERT trigger on ``events`` (``SECURITY DEFINER``) with the
  session user and the inserting transaction; nobody else may write it, and it is
  append-only. It rolls back with its event.
- ``audit_read_content(access_seq, digest)`` (``SECURITY DEFINER``, ``search_path`` pinned)
  returns the stored bytes of ``digest`` only when the event at ``access_seq`` is an
  ``access`` event inserted by this same session user, committed (not inserted by the
  calling transaction itself, which could still roll it back), inserted within the last
  ``audit_content_window()`` (15 minutes; the owner may ``CREATE OR REPLACE`` it), and whose
  body names ``digest`` (as a JSON string). Anything else is ``insufficient_privilege``.
  The function checks a record rather than writing one because the record must be signed
  with the gateway's record key, which the database never holds.
- ``audit_content_hashes(digests)`` (``SECURITY DEFINER``) returns each stored digest with the
  SHA-256 of its bytes, so ``audit verify`` checks content as any role without reading it.

SQLite gets the table too (so the models and ``alembic check`` agree) and uses none of it: a
SQLite file is protected by its file mode. A downgrade gives those roles ``SELECT`` on
``payloads`` back and drops the functions, the trigger and the table.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "content_readers"
WINDOW = "15 minutes"  # audit_content_window(): how long an ACCESS record lets its reader read
DIGEST_PATTERN = "^sha256:[0-9a-f]{64}$"
DEFINER = "SECURITY DEFINER SET search_path = pg_catalog, pg_temp"

# Roles holding SELECT on payloads that neither append content nor integrate.
CONTENT_READERS = """
SELECT DISTINCT quote_ident(r.rolname)
FROM pg_class c
CROSS JOIN LATERAL aclexplode(c.relacl) a
JOIN pg_roles r ON r.oid = a.grantee
WHERE c.oid = 'payloads'::regclass AND a.privilege_type = 'SELECT'
  AND NOT has_table_privilege(r.oid, 'payloads'::regclass, 'INSERT')
  AND NOT has_table_privilege(r.oid, 'chain'::regclass, 'INSERT')
"""
# Roles holding SELECT on payloads.digest but not on the table (what upgrade left them).
DIGEST_READERS = """
SELECT DISTINCT quote_ident(r.rolname)
FROM pg_attribute t
CROSS JOIN LATERAL aclexplode(t.attacl) a
JOIN pg_roles r ON r.oid = a.grantee
WHERE t.attrelid = 'payloads'::regclass AND t.attname = 'digest'
  AND a.privilege_type = 'SELECT'
  AND NOT has_table_privilege(r.oid, 'payloads'::regclass, 'SELECT')
"""

NOTE_BODY = """
BEGIN
  INSERT INTO {schema}.content_readers (access_seq, reader, xact, recorded_at)
    VALUES (NEW.seq, session_user, pg_current_xact_id()::text::bigint, clock_timestamp())
    ON CONFLICT (access_seq) DO NOTHING;
  RETURN NULL;
END
"""

READ_BODY = """
DECLARE
  r record;
  body bytea;
  named jsonb;
  content bytea;
BEGIN
  IF p_digest IS NULL OR p_digest !~ '{pattern}' THEN
    RAISE EXCEPTION 'audit content: % is not a content digest', p_digest
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT c.reader, c.xact, c.recorded_at INTO r
    FROM {schema}.content_readers c WHERE c.access_seq = p_access_seq;
  IF NOT FOUND OR r.reader IS DISTINCT FROM session_user::text THEN
    RAISE EXCEPTION 'audit content: seq % is no ACCESS record of yours', p_access_seq
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF r.xact IS NOT DISTINCT FROM pg_current_xact_id_if_assigned()::text::bigint THEN
    RAISE EXCEPTION 'audit content: the ACCESS record at seq % is not committed', p_access_seq
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF r.recorded_at < clock_timestamp() - {schema}.audit_content_window() THEN
    RAISE EXCEPTION 'audit content: the ACCESS record at seq % has expired; record another',
      p_access_seq USING ERRCODE = 'insufficient_privilege';
  END IF;
  SELECT e.body INTO body FROM {schema}.events e
    WHERE e.seq = p_access_seq AND e.kind = 'access';
  -- Named where the gateway names what it reads (data.payloads), not anywhere in the body:
  -- the reviewer chooses other fields (its name, an export's filters), and a digest put there
  -- must not open content its record does not say it read.
  IF body IS NOT NULL THEN
    named := convert_from(body, 'UTF8')::jsonb #> '{{data,payloads}}';
  END IF;
  IF named IS NULL OR jsonb_typeof(named) <> 'object'
     OR NOT EXISTS (SELECT 1 FROM jsonb_each(named) n WHERE n.value = to_jsonb(p_digest)) THEN
    RAISE EXCEPTION 'audit content: the ACCESS record at seq % does not name %',
      p_access_seq, p_digest USING ERRCODE = 'insufficient_privilege';
  END IF;
  SELECT p.content INTO content FROM {schema}.payloads p WHERE p.digest = p_digest;
  RETURN content;
END
"""

HASHES_BODY = """
  SELECT p.digest::text, 'sha256:' || encode(sha256(p.content), 'hex')
    FROM {schema}.payloads p WHERE p.digest = ANY(p_digests)
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
        TABLE,
        sa.Column("access_seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("reader", sa.String(length=64), nullable=False),
        sa.Column("xact", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("access_seq", name=op.f("pk_content_readers")),
    )
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    schema = _schema()
    values = {"schema": schema, "pattern": DIGEST_PATTERN}
    readers = conn.exec_driver_sql(CONTENT_READERS).scalars().all()
    _run_raw(
        [
            f"CREATE FUNCTION {schema}.audit_content_window() RETURNS interval LANGUAGE sql "
            f"IMMUTABLE AS $window$ SELECT interval '{WINDOW}' $window$",
            f"CREATE FUNCTION {schema}.audit_note_reader() RETURNS trigger LANGUAGE plpgsql "
            f"{DEFINER} AS $note${NOTE_BODY.format(**values)}$note$",
            "CREATE TRIGGER events_content_reader AFTER INSERT ON events FOR EACH ROW "
            f"WHEN (NEW.kind = 'access') EXECUTE FUNCTION {schema}.audit_note_reader()",
            f"CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
            "FOR EACH ROW EXECUTE FUNCTION audit_refuse_change()",
            f"CREATE TRIGGER {TABLE}_no_truncate BEFORE TRUNCATE ON {TABLE} "
            "FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change()",
            f"CREATE FUNCTION {schema}.audit_read_content(p_access_seq integer, p_digest text) "
            f"RETURNS bytea LANGUAGE plpgsql VOLATILE {DEFINER} "
            f"AS $read${READ_BODY.format(**values)}$read$",
            f"CREATE FUNCTION {schema}.audit_content_hashes(p_digests text[]) "
            "RETURNS TABLE (digest text, content_hash text) LANGUAGE sql STABLE "
            f"{DEFINER} AS $hashes${HASHES_BODY.format(**values)}$hashes$",
        ]
    )
    for role in readers:
        conn.exec_driver_sql(f"REVOKE SELECT ON {schema}.payloads FROM {role}")
        conn.exec_driver_sql(f"GRANT SELECT (digest, size) ON {schema}.payloads TO {role}")


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        schema = _schema()
        for role in conn.exec_driver_sql(DIGEST_READERS).scalars().all():
            conn.exec_driver_sql(f"GRANT SELECT ON {schema}.payloads TO {role}")
        _run_raw(
            [
                f"DROP FUNCTION IF EXISTS {schema}.audit_content_hashes(text[])",
                f"DROP FUNCTION IF EXISTS {schema}.audit_read_content(integer, text)",
                "DROP TRIGGER IF EXISTS events_content_reader ON events",
                f"DROP FUNCTION IF EXISTS {schema}.audit_note_reader()",
                f"DROP FUNCTION IF EXISTS {schema}.audit_content_window()",
            ]
        )
    op.drop_table(TABLE)
