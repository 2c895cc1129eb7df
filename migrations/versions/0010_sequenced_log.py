"""Format 2 (PostgreSQL): positions from a SEQUENCE, links made by an integrator.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-08

Under format 1 every append takes the chain lock to read the head and link to it, so one
transaction at a time reaches COMMIT (docs/scaling.md). Format 2 moves the link out of the
append: a writer takes its seqs from ``events_seq`` (``nextval``, not held to COMMIT) and
commits rows that stand alone; ``gateway audit integrate`` links them afterwards into
``chain``. This revision adds what that needs; it changes nothing for a log that stays in
format 1, because the era begins only when a format-2 store first opens the database.

Both backends (so the models and ``alembic check`` agree everywhere; SQLite never uses them):

- ``chain(seq, prev_hash, hash)``: one link per seq, ``hash = sha256(prev_hash || hash of
  the event)``, the first one's ``prev_hash`` the last format-1 event's hash;
- ``chain_checkpoints(size, root, chain_head, made_at, checkpoint)``: the integrator's
  signed checkpoints (the JSON of ``audit.proofs.checkpoint.dumps``).

PostgreSQL only:

- ``events_seq`` (``CACHE 1``: one session's cached range would hand out seqs out of time
  order) and ``audit_begin_sequenced()``: under the chain lock, sets the sequence after the
  head and records that seq in ``audit_meta`` as ``sequenced_from`` (once; it returns it
  ever after). It runs for the tables' owner and the application role (a session that may
  INSERT into ``payloads``) and for no other: not a reviewer, not the integrator.
- The chain guard (0005/0007) keeps its format-1 checks for a log that has not begun
  format 2. Once it has, it takes no lock and probes no head: a row's ``prev_hash`` must be
  ``''`` and its ``hash`` ``sha256(body)`` (so ``hash`` *is* the body hash, and the existing
  ``hash = sha256(prev_hash || body)`` checks of every reader still hold), its seq must be at
  least ``sequenced_from`` and at most what ``events_seq`` has handed out (a row at a seq
  nobody reserved would make that writer's insert fail); the body, column and content checks
  are those of 0007, unchanged.
- A ``void`` event (a seq whose writer never committed) may be inserted by a full appender
  (0003's ``events_append``: a writer voiding its own seqs after a rollback) or by a role
  that may INSERT into ``chain`` (the integrator; policy ``events_append_voids``).
- ``chain`` and ``chain_checkpoints`` are append-only (0001's ``audit_refuse_change``);
  ``audit.store.roles`` grants INSERT on them to the integrator role only.

Downgrade: refused once the era has begun (format-2 rows cannot be read as format 1);
before that it restores 0007's guard and drops the rest.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEQUENCE = "events_seq"
ERA_KEY = "sequenced_from"  # audit.store.sequenced.ERA_KEY
ERA_FUNCTION = "audit_sequenced_from"
RESERVED_FUNCTION = "audit_seq_reserved"
BEGIN_FUNCTION = "audit_begin_sequenced"
VOID_POLICY = "events_append_voids"
TABLES = ("chain", "chain_checkpoints")


def _hardening() -> ModuleType:
    """0007, whose chain guard this revision extends: its text is frozen there, and one copy
    of a 100-line PL/pgSQL body is easier to review than two."""
    path = next(Path(__file__).parent.glob("0007_*.py"))
    spec = importlib.util.spec_from_file_location("_audit_migration_0007", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ERA_BODY = """
  SELECT m.value::bigint FROM {schema}.audit_meta m WHERE m.key = '{key}'
"""

# last_value is what nextval handed out last (in any session, committed or not).
RESERVED_BODY = """
  SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END
    FROM {schema}.{sequence} s
"""

BEGIN_BODY = """
DECLARE
  era bigint;
  head bigint;
BEGIN
  -- INSERT on payloads marks a full appender (0003): the tables' owner or the application
  -- role. Not a reviewer or the integrator, who may INSERT into events too: beginning
  -- format 2 cannot be undone, and it turns away every format-1 writer still running.
  IF NOT has_table_privilege(session_user, '{schema}.payloads'::regclass, 'INSERT') THEN
    RAISE EXCEPTION 'audit format 2: only the tables'' owner or the application role can begin it'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  PERFORM {schema}.audit_chain_lock();
  era := {schema}.{era_function}();
  IF era IS NOT NULL THEN
    RETURN era;
  END IF;
  SELECT coalesce(max(e.seq), 0) INTO head FROM {schema}.events e WHERE e.seq >= 1;
  -- nextval returns head + 1 next: setval(s, v, false) means v is not handed out yet
  PERFORM setval('{schema}.{sequence}'::regclass, head + 1, false);
  INSERT INTO {schema}.audit_meta (key, value) VALUES ('{key}', (head + 1)::text);
  RETURN head + 1;
END
"""

# Replaces 0007's lock statement: a format-1 log keeps the lock and the head checks that
# follow it (closed by V1_END); a format-2 row is checked on its own.
V1_BEGIN = """era := {schema}.{era_function}();
  IF era IS NULL THEN
  {lock}"""
V2_CHECKS = """  ELSE
    IF NEW.seq < era THEN
      RAISE EXCEPTION 'audit chain: seq % is before the format-2 era (seq %)', NEW.seq, era
        USING ERRCODE = 'check_violation';
    END IF;
    reserved := {schema}.{reserved_function}();
    IF NEW.seq > reserved THEN
      RAISE EXCEPTION 'audit chain: seq % was not reserved (events_seq is at %)', NEW.seq,
        reserved USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.prev_hash IS DISTINCT FROM '' THEN
      RAISE EXCEPTION 'audit chain: a format-2 event (seq %) has no prev_hash', NEW.seq
        USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.hash IS DISTINCT FROM 'sha256:' || encode(sha256(NEW.body), 'hex') THEN
      RAISE EXCEPTION 'audit chain: hash of seq % is not sha256(body)', NEW.seq
        USING ERRCODE = 'check_violation';
    END IF;
  END IF;
"""
V1_END_MARK = "  BEGIN\n    b := convert_from("
DECLARE_MARK = "  wrong text[] := '{{}}';\n"


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


def _once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"0007's chain guard changed: {old!r} is not found exactly once")
    return text.replace(old, new)


def _sequenced_guard(hardening: ModuleType, schema: str) -> str:
    """0007's chain guard (as its ``_guard`` builds it) with the format-2 branch added."""
    names = {
        "schema": schema,
        "era_function": ERA_FUNCTION,
        "reserved_function": RESERVED_FUNCTION,
    }
    body = str(hardening.GUARD_BODY)
    body = _once(body, DECLARE_MARK, DECLARE_MARK + "  era bigint;\n  reserved bigint;\n")
    body = _once(body, "{lock}", V1_BEGIN.format(**names, lock="{lock}"))
    body = _once(body, V1_END_MARK, V2_CHECKS.format(**names) + V1_END_MARK)
    code = hardening.CONTENT_CONFLICT
    body = body.format(
        schema=schema,
        lock=f"PERFORM {schema}.{hardening.LOCK_FUNCTION}();",
        genesis=hardening.GENESIS,
        time_format=hardening.TIME_FORMAT,
        payload_intact=hardening.PAYLOAD_INTACT.format(schema=schema, code=code),
        policy_intact=hardening.POLICY_INTACT.format(schema=schema, code=code),
    )
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.{hardening.GUARD_FUNCTION}() RETURNS trigger "
        f"LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $guard${body}$guard$"
    )


def _tables() -> None:
    op.create_table(
        "chain",
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("prev_hash", sa.String(length=80), nullable=False),
        sa.Column("hash", sa.String(length=80), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_chain")),
    )
    op.create_table(
        "chain_checkpoints",
        sa.Column("size", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("root", sa.String(length=80), nullable=False),
        sa.Column("chain_head", sa.String(length=80), nullable=False),
        sa.Column("made_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("checkpoint", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("size", name=op.f("pk_chain_checkpoints")),
    )


def upgrade() -> None:
    _tables()
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    schema = _schema()
    hardening = _hardening()
    names = {
        "schema": schema,
        "key": ERA_KEY,
        "sequence": SEQUENCE,
        "era_function": ERA_FUNCTION,
    }
    definer = "SECURITY DEFINER SET search_path = pg_catalog, pg_temp"
    _run_raw(
        [
            f"CREATE SEQUENCE {schema}.{SEQUENCE} AS bigint MINVALUE 1 START WITH 1 CACHE 1",
            # Read by every inserting role's guard; they need no privilege on audit_meta's
            # rows or the sequence for it.
            f"CREATE FUNCTION {schema}.{ERA_FUNCTION}() RETURNS bigint LANGUAGE sql STABLE "
            f"{definer} AS $era${ERA_BODY.format(**names)}$era$",
            f"CREATE FUNCTION {schema}.{RESERVED_FUNCTION}() RETURNS bigint LANGUAGE sql "
            f"VOLATILE {definer} AS $res${RESERVED_BODY.format(**names)}$res$",
            f"CREATE FUNCTION {schema}.{BEGIN_FUNCTION}() RETURNS bigint LANGUAGE plpgsql "
            f"{definer} AS $begin${BEGIN_BODY.format(**names)}$begin$",
            _sequenced_guard(hardening, schema),
            f"CREATE POLICY {VOID_POLICY} ON events FOR INSERT TO PUBLIC WITH CHECK "
            "(kind = 'void' AND has_table_privilege('chain'::regclass, 'INSERT'))",
            *(
                statement
                for table in TABLES
                for statement in (
                    f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                    "FOR EACH ROW EXECUTE FUNCTION audit_refuse_change()",
                    f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change()",
                )
            ),
        ]
    )


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        era = conn.exec_driver_sql(
            f"SELECT value FROM audit_meta WHERE key = '{ERA_KEY}'"
        ).scalar_one_or_none()
        if era is not None:
            raise RuntimeError(
                f"this audit log is in format 2 from seq {era}: its events cannot be read "
                "as format 1, so it cannot be downgraded below revision 0010."
            )
        schema = _schema()
        hardening = _hardening()
        lock = f"PERFORM {schema}.{hardening.LOCK_FUNCTION}();"
        _run_raw([str(hardening._guard(schema, lock, intact=True))])
        conn.exec_driver_sql(f"DROP POLICY IF EXISTS {VOID_POLICY} ON events")
        for function in (BEGIN_FUNCTION, RESERVED_FUNCTION, ERA_FUNCTION):
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {schema}.{function}()")
        conn.exec_driver_sql(f"DROP SEQUENCE IF EXISTS {schema}.{SEQUENCE}")
    for table in reversed(TABLES):
        op.drop_table(table)
