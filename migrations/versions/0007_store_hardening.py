"""Harden the store's own guards: event_id reuse, content rows, and a chain lock with a privilege.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05

SQLite: ``INSERT OR REPLACE`` resolves a conflict on *any* unique column by deleting the old
row, without firing DELETE triggers. 0001 refuses a reused ``seq``, but a row that reuses an
existing ``event_id`` at a new seq deleted the old event; a second statement could then put
an edited copy back at the old seq. ``events_no_event_id_reuse`` refuses any insert whose
``event_id`` is already stored: a BEFORE INSERT trigger runs before the conflict is
resolved, and ``RAISE(ABORT)`` aborts the statement whatever its ``OR`` clause says. (``seq``
and ``event_id`` are the table's only unique columns.)

PostgreSQL:

- ``payloads`` and ``policies`` rows are content-addressed and inserted once, so a row written
  ahead of time under the digest of a future request body would silently stand in for the
  bytes that were sent. ``content_digest_guard`` refuses, for every role, a row whose key is
  not ``sha256`` of its content (and a payload whose ``size`` is not the content's length).
  SQLite has no ``sha256`` in SQL; there the store compares the bytes on every insert
  (``audit.store._append``), as it also does here.
- The chain lock was ``pg_advisory_xact_lock``, which any role that can connect may take
  (``pg_advisory_lock`` even for the whole session) and so hang every gateway. It is now a
  row lock, ``SELECT ... FOR UPDATE`` on the ``chain_lock`` row of ``audit_meta``, taken by
  ``audit_chain_lock()``. Nobody but the owner may UPDATE ``audit_meta``, so nobody else can
  lock the row directly; the function (``SECURITY DEFINER``, pinned ``search_path``) takes it
  only for a session whose user may INSERT into ``events`` (and does nothing for any other):
  the roles that can append (the application and, for their own ``export``/``checkpoint``
  records, reviewers). It follows the privilege, not role names, so roles granted before this
  revision keep working. A role that
  can append can always hold appends up for as long as it keeps a transaction open (a pending
  row at the next seq does the same); the store's default ``lock_timeout`` turns that into a
  prompt ``AppendFailed`` rather than a hang.
- The chain guard of 0005 takes the same lock through ``audit_chain_lock()`` instead of the
  advisory lock (re-entry for the store, which holds it already), and refuses an event that
  references a payload or policy row whose bytes do not hash to its key (SQLSTATE 23A01,
  which the store reports as ``ContentConflict``): a row stored before this revision, or by
  the owner with the triggers off, cannot stand in for the content an event was sent with.

Downgrading restores the advisory lock in the chain guard and drops the rest; the
``chain_lock`` row of ``audit_meta`` stays (audit_meta is append-only) and is harmless.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_TRIGGER = (
    "CREATE TRIGGER events_no_event_id_reuse BEFORE INSERT ON events "
    "WHEN EXISTS (SELECT 1 FROM events WHERE event_id = NEW.event_id) "
    "BEGIN SELECT RAISE(ABORT, 'audit events are append-only: event_id already used'); END"
)

LOCK_FUNCTION = "audit_chain_lock"
LOCK_KEY = "chain_lock"  # the audit_meta row that is locked
GUARD_FUNCTION = "events_chain_guard"  # 0005's trigger function, replaced in place
CONTENT_FUNCTION = "content_digest_guard"
CONTENT_TABLES = {"payloads": "digest", "policies": "fingerprint"}
ADVISORY_KEY = 0x41554454  # 0005's pg_advisory_xact_lock key, for the downgrade
GENESIS = "sha256:" + "0" * 64
TIME_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'

# A session that may not append gets no lock and no error: its INSERT is then refused with
# the usual "permission denied for table events", and it has held nothing up.
LOCK_BODY = """
BEGIN
  IF has_table_privilege(session_user, '{schema}.events'::regclass, 'INSERT') THEN
    PERFORM 1 FROM {schema}.audit_meta m WHERE m.key = '{key}' FOR UPDATE;
  END IF;
END
"""

CONTENT_BODY = """
DECLARE
  k text;
BEGIN
  -- one branch per table: a statement may name only fields that table's rows have
  IF TG_TABLE_NAME = 'payloads' THEN
    k := NEW.digest;
    IF NEW.size IS DISTINCT FROM length(NEW.content) THEN
      RAISE EXCEPTION 'audit content: the size of payload % is not its length', k
        USING ERRCODE = 'check_violation';
    END IF;
  ELSE
    k := NEW.fingerprint;
  END IF;
  IF k IS DISTINCT FROM 'sha256:' || encode(sha256(NEW.content), 'hex') THEN
    RAISE EXCEPTION 'audit content: the % row % does not hold the bytes of that digest',
      TG_TABLE_NAME, k
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
"""

# The referenced content must be intact, too: a row stored before this revision (or by the
# owner with the triggers off) under the digest of an event's content, holding other bytes,
# refuses the event. CONTENT_CONFLICT tells the store which refusal this is (ContentConflict);
# DETAIL names the row as "TABLE DIGEST".
CONTENT_CONFLICT = "23A01"  # audit.store.backend.CONTENT_CONFLICT; class 23, integrity
PAYLOAD_INTACT = """
      PERFORM 1 FROM {schema}.payloads p WHERE p.digest = ref
        AND p.size = length(p.content) AND p.digest = 'sha256:' || encode(sha256(p.content), 'hex');
      IF NOT FOUND THEN
        RAISE EXCEPTION 'audit content: seq % references payload % whose stored bytes are not it',
          NEW.seq, ref
          USING ERRCODE = '{code}', DETAIL = 'payloads ' || ref;
      END IF;"""
POLICY_INTACT = """
    PERFORM 1 FROM {schema}.policies p WHERE p.fingerprint = b->>'policy_ref'
      AND p.fingerprint = 'sha256:' || encode(sha256(p.content), 'hex');
    IF NOT FOUND THEN
      RAISE EXCEPTION 'audit content: seq % references policy % whose stored bytes are not it',
        NEW.seq, b->>'policy_ref'
        USING ERRCODE = '{code}', DETAIL = 'policies ' || (b->>'policy_ref');
    END IF;"""

# 0005's chain guard, verbatim but for the lock statement ({lock}) and the content checks.
GUARD_BODY = """
DECLARE
  head_seq integer;
  head_hash text;
  b jsonb;
  ref text;
  wrong text[] := '{{}}';
BEGIN
  {lock}
  SELECT e.seq, e.hash INTO head_seq, head_hash
    FROM {schema}.events e WHERE e.seq >= 1 ORDER BY e.seq DESC LIMIT 1;
  IF NOT FOUND THEN
    head_seq := 0;
    head_hash := '{genesis}';
  END IF;
  IF NEW.seq IS DISTINCT FROM head_seq + 1 THEN
    RAISE EXCEPTION 'audit chain: event seq % does not follow the head seq %', NEW.seq, head_seq
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.prev_hash IS DISTINCT FROM head_hash THEN
    RAISE EXCEPTION 'audit chain: prev_hash of seq % is not the hash of seq %', NEW.seq, head_seq
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.hash IS DISTINCT FROM
     'sha256:' || encode(sha256(convert_to(NEW.prev_hash, 'UTF8') || NEW.body), 'hex') THEN
    RAISE EXCEPTION 'audit chain: hash of seq % is not sha256(prev_hash || body)', NEW.seq
      USING ERRCODE = 'check_violation';
  END IF;
  BEGIN
    b := convert_from(NEW.body, 'UTF8')::jsonb;
  EXCEPTION WHEN others THEN
    b := NULL;
  END;
  IF b IS NULL OR jsonb_typeof(b) <> 'object' OR b->'v' IS DISTINCT FROM '1'::jsonb THEN
    RAISE EXCEPTION 'audit chain: the body of seq % is not a version-1 event body', NEW.seq
      USING ERRCODE = 'check_violation';
  END IF;
  IF b->'seq' IS DISTINCT FROM to_jsonb(NEW.seq) THEN wrong := wrong || 'seq'::text; END IF;
  IF b->'event_id' IS DISTINCT FROM to_jsonb(NEW.event_id) THEN
    wrong := wrong || 'event_id'::text; END IF;
  IF b->'request_id' IS DISTINCT FROM to_jsonb(NEW.request_id) THEN
    wrong := wrong || 'request_id'::text; END IF;
  IF b->'kind' IS DISTINCT FROM to_jsonb(NEW.kind) THEN wrong := wrong || 'kind'::text; END IF;
  -- nullable columns: SQL NULL is JSON null (verify reads a missing key as None too)
  IF coalesce(b->'task', 'null') IS DISTINCT FROM coalesce(to_jsonb(NEW.task), 'null') THEN
    wrong := wrong || 'task'::text; END IF;
  IF coalesce(b->'caller', 'null') IS DISTINCT FROM coalesce(to_jsonb(NEW.caller), 'null') THEN
    wrong := wrong || 'caller'::text; END IF;
  IF coalesce(b->'policy_fingerprint', 'null')
     IS DISTINCT FROM coalesce(to_jsonb(NEW.policy_fingerprint), 'null') THEN
    wrong := wrong || 'policy_fingerprint'::text; END IF;
  IF coalesce(b->'request_hash', 'null')
     IS DISTINCT FROM coalesce(to_jsonb(NEW.request_hash), 'null') THEN
    wrong := wrong || 'request_hash'::text; END IF;
  IF b->'recorded_at' IS DISTINCT FROM
     to_jsonb(to_char(NEW.recorded_at AT TIME ZONE 'UTC', '{time_format}')) THEN
    wrong := wrong || 'recorded_at'::text; END IF;
  IF cardinality(wrong) > 0 THEN
    RAISE EXCEPTION 'audit chain: column(s) % of seq % differ from its body',
      array_to_string(wrong, ', '), NEW.seq
      USING ERRCODE = 'check_violation';
  END IF;
  IF coalesce(jsonb_typeof(b->'payloads'), 'null') NOT IN ('object', 'null')
     OR coalesce(jsonb_typeof(b->'policy_ref'), 'null') NOT IN ('string', 'null') THEN
    RAISE EXCEPTION 'audit chain: the content references of seq % are malformed', NEW.seq
      USING ERRCODE = 'check_violation';
  END IF;
  IF b->'payloads' IS NOT NULL AND jsonb_typeof(b->'payloads') = 'object' THEN
    FOR ref IN SELECT value FROM jsonb_each_text(b->'payloads') LOOP
      PERFORM 1 FROM {schema}.payloads p WHERE p.digest = ref;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'audit chain: seq % references payload % that is not stored', NEW.seq, ref
          USING ERRCODE = 'foreign_key_violation';
      END IF;{payload_intact}
    END LOOP;
  END IF;
  IF jsonb_typeof(b->'policy_ref') = 'string' THEN
    PERFORM 1 FROM {schema}.policies p WHERE p.fingerprint = b->>'policy_ref';
    IF NOT FOUND THEN
      RAISE EXCEPTION 'audit chain: seq % references policy % that is not stored',
        NEW.seq, b->>'policy_ref'
        USING ERRCODE = 'foreign_key_violation';
    END IF;{policy_intact}
  END IF;
  RETURN NEW;
END
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


def _guard(schema: str, lock: str, *, intact: bool) -> str:
    checks = {
        name: text.format(schema=schema, code=CONTENT_CONFLICT) if intact else ""
        for name, text in (("payload_intact", PAYLOAD_INTACT), ("policy_intact", POLICY_INTACT))
    }
    body = GUARD_BODY.format(
        schema=schema, lock=lock, genesis=GENESIS, time_format=TIME_FORMAT, **checks
    )
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.{GUARD_FUNCTION}() RETURNS trigger "
        f"LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $guard${body}$guard$"
    )


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        op.execute(SQLITE_TRIGGER)
        return
    schema = _schema()
    conn.exec_driver_sql(
        "INSERT INTO audit_meta (key, value) VALUES "
        f"('{LOCK_KEY}', 'locked FOR UPDATE by every append: {LOCK_FUNCTION}()') "
        "ON CONFLICT (key) DO NOTHING"
    )
    _run_raw(
        [
            f"CREATE FUNCTION {schema}.{LOCK_FUNCTION}() RETURNS void LANGUAGE plpgsql "
            "SECURITY DEFINER SET search_path = pg_catalog, pg_temp "
            f"AS $lock${LOCK_BODY.format(schema=schema, key=LOCK_KEY)}$lock$",
            f"CREATE FUNCTION {schema}.{CONTENT_FUNCTION}() RETURNS trigger LANGUAGE plpgsql "
            f"SET search_path = pg_catalog, pg_temp AS $content${CONTENT_BODY}$content$",
            *(
                f"CREATE TRIGGER {table}_digest_guard BEFORE INSERT ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION {schema}.{CONTENT_FUNCTION}()"
                for table in CONTENT_TABLES
            ),
            _guard(schema, f"PERFORM {schema}.{LOCK_FUNCTION}();", intact=True),
        ]
    )


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        op.execute("DROP TRIGGER IF EXISTS events_no_event_id_reuse")
        return
    schema = _schema()
    _run_raw([_guard(schema, f"PERFORM pg_advisory_xact_lock({ADVISORY_KEY});", intact=False)])
    for table in CONTENT_TABLES:
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {table}_digest_guard ON {table}")
    conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {schema}.{CONTENT_FUNCTION}()")
    conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {schema}.{LOCK_FUNCTION}()")
