"""A reviewer records through a procedure that commits: it can no longer hold the chain lock.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-10

Under 0007 and 0008 a reviewer (INSERT on ``events``, not on ``payloads``) appended its
``export``, ``checkpoint`` and ``access`` records in its own transaction, so it took the
format-1 chain lock like any appender, and could keep it: ``BEGIN; SELECT
audit_chain_lock();`` (or a pending row at the next seq) and every format-1 append failed
after its ``lock_timeout`` for as long as the reviewer wished. No setting bounds that: every
time-out is the session's own to change.

Now a reviewer never holds the head inside a transaction it controls:

- ``audit_chain_lock()`` takes the lock only for a full appender (a session that may INSERT
  into ``payloads``: the application role, the owner); for anyone else it does nothing.
- ``events_append_path`` (a BEFORE INSERT trigger, named to run before 0005's chain guard)
  refuses a format-1 row (non-empty ``prev_hash``) unless the current user may INSERT into
  ``payloads``: a reviewer's own INSERT is refused before it holds anything. Format-2 rows
  (empty ``prev_hash``) are unchanged: they hold no lock, only their own reserved seq (0011).
- ``CALL audit_review_append(...)`` is the reviewer's way in: a procedure (PL/pgSQL, not
  ``SECURITY DEFINER``, which may not commit) that calls ``audit_review_insert(...)`` and then
  ``COMMIT``s. A procedure may commit only when called outside a transaction block, so a
  reviewer who calls it inside ``BEGIN`` gets "invalid transaction termination" and its
  transaction is aborted, which releases the lock. ``audit_review_insert`` (``SECURITY
  DEFINER``, pinned ``search_path``) runs only when that procedure calls it directly from
  the session's statement (its call stack, ``PG_CONTEXT``, has no other frame, and
  ``current_query()`` shows the statement as ``CALL <schema>.audit_review_append(``,
  schema-qualified, so a look-alike in another schema does not pass), for a session that may INSERT into
  ``events`` (the privilege 0008 gave reviewers), for the kinds a reviewer records, with a
  body of at most 1 MiB; it takes the chain lock, checks that the row links to the head
  (``serialization_failure`` when the head moved on: the store links again and retries) and
  inserts it as the owner. From the lock to the commit nothing runs that the reviewer
  controls, so a writer waits at most for one bounded insert.

The signature is the client's, as before: the store reads the head without the lock, links
and signs the row, and calls the procedure; the chain guard checks link, columns and content
as for every row. A downgrade drops the trigger and the functions and restores 0007's lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCK_KEY = "chain_lock"
MAX_BODY = 1 << 20  # a reviewer's records name digests and filters, never content
HEAD_MOVED = "40001"  # serialization_failure: audit.store._review_append retries on it
# The columns of an events row, in the order the procedure takes them.
COLUMNS = (
    ("seq", "integer"),
    ("event_id", "text"),
    ("request_id", "text"),
    ("kind", "text"),
    ("recorded_at", "timestamp with time zone"),
    ("task", "text"),
    ("caller", "text"),
    ("policy_fingerprint", "text"),
    ("request_hash", "text"),
    ("body", "bytea"),
    ("prev_hash", "text"),
    ("hash", "text"),
    ("signature", "text"),
    ("key_id", "text"),
)
PARAMS = ", ".join(f"p_{name} {kind}" for name, kind in COLUMNS)
SIGNATURE = ",".join(kind for _, kind in COLUMNS)  # as PG_CONTEXT prints it
ARGS = ", ".join(f"p_{name}" for name, _ in COLUMNS)
NAMES = ", ".join(name for name, _ in COLUMNS)

LOCK_BODY = """
BEGIN
  IF has_table_privilege(session_user, '{schema}.payloads'::regclass, 'INSERT') THEN
    PERFORM 1 FROM {schema}.audit_meta m WHERE m.key = '{key}' FOR UPDATE;
  END IF;
END
"""
LOCK_BODY_BEFORE = LOCK_BODY.replace(".payloads'", ".events'")

PATH_BODY = """
BEGIN
  IF coalesce(NEW.prev_hash, '') <> ''
     AND NOT has_table_privilege(current_user, '{schema}.payloads'::regclass, 'INSERT') THEN
    RAISE EXCEPTION 'audit chain: a reviewer records through CALL {schema}.audit_review_append(...), not INSERT'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END
"""

INSERT_BODY = """
DECLARE
  stack text;
  caller text;
  top text;
  head_seq integer;
  head_hash text;
BEGIN
  -- Called by the procedure, which the session's statement calls directly: the frame
  -- above this one, and nothing above that. (A frame prints its function as compiled, under
  -- the session's search_path, so the schema is checked in the statement's own text.)
  GET DIAGNOSTICS stack = PG_CONTEXT;
  caller := split_part(stack, E'\\n', 3);
  top := current_query();
  IF array_length(string_to_array(stack, E'\\n'), 1) <> 3
     OR caller !~ '^PL/pgSQL function ({schema}\\.)?audit_review_append\\({signature}\\) line [0-9]+ at PERFORM$'
     OR top IS NULL OR top !~* '^\\s*CALL\\s+{schema}\\.audit_review_append\\s*\\(' THEN
    RAISE EXCEPTION 'audit chain: a reviewer records through CALL {schema}.audit_review_append(...) only'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NOT has_table_privilege(session_user, '{schema}.events'::regclass, 'INSERT') THEN
    RAISE EXCEPTION 'audit chain: this role may not append'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  -- The eraser (0014: DELETE on payloads, no INSERT) records its erasures and holds here too.
  IF p_kind IS NULL OR NOT (
       p_kind IN ('export', 'checkpoint', 'access', 'evidence_pack')
       OR (p_kind IN ('erasure', 'legal_hold', 'hold_release')
           AND has_table_privilege(session_user, '{schema}.payloads'::regclass, 'DELETE'))) THEN
    RAISE EXCEPTION 'audit chain: a reviewer records export, checkpoint, access and evidence_pack events only'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF octet_length(p_body) > {max_body} THEN
    RAISE EXCEPTION 'audit chain: a reviewer''s record is at most {max_body} bytes'
      USING ERRCODE = 'check_violation';
  END IF;
  PERFORM 1 FROM {schema}.audit_meta m WHERE m.key = '{key}' FOR UPDATE;
  SELECT e.seq, e.hash INTO head_seq, head_hash
    FROM {schema}.events e WHERE e.seq >= 1 ORDER BY e.seq DESC LIMIT 1;
  IF NOT FOUND THEN
    head_seq := 0;
    head_hash := NULL;
  END IF;
  IF p_seq IS DISTINCT FROM head_seq + 1
     OR (head_hash IS NOT NULL AND p_prev_hash IS DISTINCT FROM head_hash) THEN
    RAISE EXCEPTION 'audit chain: the head moved on (seq %)', head_seq
      USING ERRCODE = '{head_moved}';
  END IF;
  INSERT INTO {schema}.events ({names}) VALUES ({args});
END
"""

PROCEDURE_BODY = """
BEGIN
  PERFORM {schema}.audit_review_insert({args});
  COMMIT;
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


def _lock(schema: str, body: str) -> str:
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.audit_chain_lock() RETURNS void LANGUAGE plpgsql "
        "SECURITY DEFINER SET search_path = pg_catalog, pg_temp "
        f"AS $lock${body.format(schema=schema, key=LOCK_KEY)}$lock$"
    )


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema = _schema()
    values = {
        "schema": schema,
        "key": LOCK_KEY,
        "max_body": MAX_BODY,
        "head_moved": HEAD_MOVED,
        "signature": SIGNATURE,
        "names": NAMES,
        "args": ARGS,
    }
    _run_raw(
        [
            _lock(schema, LOCK_BODY),
            f"CREATE FUNCTION {schema}.audit_append_path() RETURNS trigger LANGUAGE plpgsql "
            f"SET search_path = pg_catalog, pg_temp AS $path${PATH_BODY.format(**values)}$path$",
            # Before events_chain_guard: triggers of one event fire in name order.
            "CREATE TRIGGER events_append_path BEFORE INSERT ON events "
            f"FOR EACH ROW EXECUTE FUNCTION {schema}.audit_append_path()",
            f"CREATE FUNCTION {schema}.audit_review_insert({PARAMS}) RETURNS void "
            "LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp "
            f"AS $insert${INSERT_BODY.format(**values)}$insert$",
            # Not SECURITY DEFINER and no SET clause: either would forbid its COMMIT.
            f"CREATE PROCEDURE {schema}.audit_review_append({PARAMS}) LANGUAGE plpgsql "
            f"AS $append${PROCEDURE_BODY.format(**values)}$append$",
        ]
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema = _schema()
    _run_raw(
        [
            f"DROP PROCEDURE IF EXISTS {schema}.audit_review_append({SIGNATURE})",
            f"DROP FUNCTION IF EXISTS {schema}.audit_review_insert({SIGNATURE})",
            "DROP TRIGGER IF EXISTS events_append_path ON events",
            f"DROP FUNCTION IF EXISTS {schema}.audit_append_path()",
            _lock(schema, LOCK_BODY_BEFORE),
        ]
    )
