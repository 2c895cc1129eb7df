"""PostgreSQL: every inserted event must extend the chain, and its columns must match its body.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

Row-level security (0003) lets a reviewer insert only rows whose ``kind`` column is ``export``
or ``checkpoint``, but a column is not the event: the hashed body could say ``response`` with
forged data, or the row could sit at seq 1,000,000, so verify reports defects forever and the
next append continues from a bogus head. A BEFORE INSERT trigger, for every role, now takes
the chain lock the append path takes (``pg_advisory_xact_lock(CHAIN_LOCK_KEY)``; the store
already holds it, so for the gateway it is a no-op re-entry) and refuses the row unless:

- ``seq`` is the highest seq >= 1 plus one (1 on an empty chain), and ``prev_hash`` is that
  row's ``hash`` (the genesis value on an empty chain);
- ``hash = 'sha256:' || hex(sha256(prev_hash || body))``, as ``audit.store.chain.link_hash``;
- the body is a version-1 event body whose ``seq``, ``event_id``, ``request_id``, ``kind``,
  ``task``, ``caller``, ``policy_fingerprint``, ``request_hash`` and ``recorded_at`` (the
  fixed-width UTC form) equal the columns, with JSON types (``"1"`` is not ``1``);
- every payload and policy the body references exists (the store inserts them first in the
  same transaction), so a forged row cannot leave ``missing_content`` behind.

The function runs with ``search_path = pg_catalog, pg_temp`` and names the table by the
schema it lives in at migration time, so an inserting role cannot swap in its own ``events``
or ``sha256``. The refusal is SQLSTATE 23514 (check_violation), which the store reports as
``AppendFailed``. Rows already stored are not re-checked (verify does that). A superuser with
``session_replication_role = replica`` (or the owner dropping the trigger) bypasses it;
checkpoints exist for that. SQLite has no roles, so it keeps its triggers of 0001/0002.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = "events_chain_guard"
TRIGGER = "events_chain_guard"
CHAIN_LOCK_KEY = 0x41554454  # audit.store.backend.CHAIN_LOCK_KEY, frozen here as migrations are
GENESIS = "sha256:" + "0" * 64  # audit.store.chain.GENESIS
TIME_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'  # audit.store.chain.format_time

# {schema} is filled in at migration time (quoted); the rest is the function body.
BODY = """
DECLARE
  head_seq integer;
  head_hash text;
  b jsonb;
  ref text;
  wrong text[] := '{{}}';
BEGIN
  PERFORM pg_advisory_xact_lock({lock});
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
      END IF;
    END LOOP;
  END IF;
  IF jsonb_typeof(b->'policy_ref') = 'string' THEN
    PERFORM 1 FROM {schema}.policies p WHERE p.fingerprint = b->>'policy_ref';
    IF NOT FOUND THEN
      RAISE EXCEPTION 'audit chain: seq % references policy % that is not stored',
        NEW.seq, b->>'policy_ref'
        USING ERRCODE = 'foreign_key_violation';
    END IF;
  END IF;
  RETURN NEW;
END
"""


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    schema = conn.exec_driver_sql(
        "SELECT quote_ident(n.nspname) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'events'::regclass"
    ).scalar_one()
    body = BODY.format(schema=schema, lock=CHAIN_LOCK_KEY, genesis=GENESIS, time_format=TIME_FORMAT)
    # Dollar quoting: the body holds single quotes. The % of RAISE are PL/pgSQL's, so the
    # statements go to the driver's own cursor, which formats nothing without parameters.
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(
            f"CREATE FUNCTION {schema}.{FUNCTION}() RETURNS trigger LANGUAGE plpgsql "
            f"SET search_path = pg_catalog, pg_temp AS $guard${body}$guard$"
        )
        cursor.execute(
            f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON events "
            f"FOR EACH ROW EXECUTE FUNCTION {schema}.{FUNCTION}()"
        )
    finally:
        cursor.close()


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {TRIGGER} ON events")
    conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {FUNCTION}()")
