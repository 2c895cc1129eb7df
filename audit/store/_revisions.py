"""Which schema revision a database is at, and a new SQLite file's schema, without Alembic.

    check_at_head(conn)           # every open: SchemaMismatch names `gateway db upgrade`
    create_sqlite_schema(conn)    # a new SQLite file, inside the caller's BEGIN IMMEDIATE

Alembic owns the schema (``audit.store.migrate`` runs it for `gateway db upgrade`); opening a
store only reads ``alembic_version`` and compares it with the packaged revisions, and a new
SQLite file gets the schema the migrations make, replayed from ``_sqlite_snapshot`` (written
by ``scripts/sqlite_schema_snapshot.py``). Importing Alembic, and parsing every migration
file, would cost each CLI command a third of a second before it does anything.
tests/audit/test_sqlite_snapshot.py holds the snapshot and the revision list equal to what the
migrations make and name.
"""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, inspect, text

from audit.errors import SchemaMismatch
from audit.store._sqlite_snapshot import REVISIONS, SQLITE_SCHEMA

__all__ = [
    "HEAD",
    "UPGRADE_HINT",
    "check_at_head",
    "create_sqlite_schema",
    "current_revision",
    "refuse_newer",
]

HEAD = REVISIONS[-1]
VERSION_TABLE = "alembic_version"  # Alembic's own table, in the default schema
UPGRADE_HINT = "Run `gateway db upgrade` (with the same GATEWAY_DATABASE_URL) and try again."


def current_revision(connection: Connection) -> str | None:
    """The revision ``alembic_version`` names (None: no schema yet), as Alembic reads it."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    found = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(found) > 1:
        raise SchemaMismatch(
            f"the audit database names {len(found)} schema revisions at once "
            f"({', '.join(sorted(found))}).",
            hint="Restore the database from a backup, or ask whoever migrated it by hand.",
        )
    return found[0] if found else None


def refuse_newer(current: str | None) -> None:
    """Refuse a database migrated past what this code knows (a newer gateway wrote it)."""
    if current is None or current in REVISIONS:
        return
    raise SchemaMismatch(
        f"the audit database is at schema revision {current}, which is newer than this "
        f"gateway knows (head {HEAD}).",
        hint="Use the gateway version that wrote this database (or a newer one).",
    )


def check_at_head(connection: Connection) -> None:
    """Refuse a database that is behind (or ahead of) the code, naming the fix."""
    current = current_revision(connection)
    if current == HEAD:
        return
    if current is None:
        raise SchemaMismatch("the audit database has no schema yet.", hint=UPGRADE_HINT)
    refuse_newer(current)
    raise SchemaMismatch(
        f"the audit database schema is behind (at {current}, this gateway needs {HEAD}).",
        hint=UPGRADE_HINT,
    )


def create_sqlite_schema(connection: Connection) -> None:
    """Make an empty SQLite database what the migrations make of it, inside the transaction
    ``connection`` is in: the schema is created whole or not at all."""
    if not connection.in_transaction():
        raise RuntimeError("create_sqlite_schema runs inside the caller's transaction")
    # A file that holds Alembic's (empty) version table only is new too, as Alembic sees it.
    versioned = inspect(connection).has_table(VERSION_TABLE)
    for statement in SQLITE_SCHEMA:
        if versioned and statement.startswith(f"CREATE TABLE {VERSION_TABLE} "):
            continue
        connection.exec_driver_sql(statement)
    connection.execute(
        text(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES (:head)"), {"head": HEAD}
    )
    # As migration 0001 does: the identity a checkpoint names, so it cannot be checked
    # against a copy of another log.
    connection.execute(
        text("INSERT INTO audit_meta (key, value) VALUES ('store_id', :id)"),
        {"id": str(uuid.uuid4())},
    )
