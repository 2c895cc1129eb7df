"""Schema management: which revision a database is at, and upgrading it.

    from audit.store.migrate import upgrade, current_revision
    upgrade("sqlite:///gateway-audit.db")      # what `gateway db upgrade` runs

Opening a store does not come here: it reads the revision and creates a new SQLite file
without Alembic (audit.store._revisions).

The migrations ship inside the package (``audit/_migrations`` points at the top-level
``migrations/`` folder and is packaged into the wheel), so this works from a non-editable
install without ``alembic.ini``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from audit.errors import DatabaseUnavailable, SchemaMismatch
from audit.store.backend import Backend, db_reason

MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "_migrations"


def alembic_config(
    connection: Connection | None = None, *, script_location: Path = MIGRATIONS_DIR
) -> Config:
    """Alembic's configuration for the packaged migrations (or those at ``script_location``),
    running on ``connection`` when one is given."""
    config = Config()
    config.set_main_option("script_location", str(script_location))
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships a revision
        raise RuntimeError("no migrations are packaged")
    return head


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


# The engine functions hand Alembic a connection that is not in a transaction yet. Given one
# that is (``engine.begin()``), Alembic takes that transaction for the caller's and runs every
# migration inside it, whatever ``transaction_per_migration`` says; given a fresh one, it
# begins and commits a transaction per migration (SQLAlchemy's autobegin of its first query
# joins the first one).


def upgrade_engine(
    engine: Engine, revision: str = "head", *, script_location: Path = MIGRATIONS_DIR
) -> None:
    """Upgrade to ``revision``, each migration in its own transaction: if one fails, the
    database is left at the revision before it. (On SQLite that needs an engine that really
    begins, as the backend's does: pysqlite on its own runs DDL outside any transaction.)"""
    with engine.connect() as conn:
        command.upgrade(alembic_config(conn, script_location=script_location), revision)


def downgrade_engine(
    engine: Engine, revision: str, *, script_location: Path = MIGRATIONS_DIR
) -> None:
    """Downgrade to ``revision``, each migration in its own transaction."""
    with engine.connect() as conn:
        command.downgrade(alembic_config(conn, script_location=script_location), revision)


def create_schema(connection: Connection) -> None:
    """Migrate an empty database to head inside the transaction ``connection`` is in: the
    schema is created whole or not at all, under whatever lock that transaction holds."""
    if not connection.in_transaction():
        raise RuntimeError("create_schema runs inside the caller's transaction")
    command.upgrade(alembic_config(connection), "head")


def _refuse_newer(current: str | None) -> None:
    script = ScriptDirectory.from_config(alembic_config())
    if current is None or current in {s.revision for s in script.walk_revisions()}:
        return
    raise SchemaMismatch(
        f"the audit database is at schema revision {current}, which is newer than this "
        f"gateway knows (head {head_revision()}).",
        hint="Use the gateway version that wrote this database (or a newer one).",
    )


def revisions() -> tuple[str, ...]:
    """Every packaged revision, oldest first (what ``_sqlite_snapshot.REVISIONS`` holds)."""
    script = ScriptDirectory.from_config(alembic_config())
    return tuple(reversed([s.revision for s in script.walk_revisions()]))


# sqlite_master's types in the order a replay creates them: a trigger or an index names
# its table, so every table comes first.
_SNAPSHOT_ORDER = ("table", "index", "trigger", "view")


def sqlite_schema(url: str) -> list[str]:
    """The statements that made the SQLite database at ``url``, as SQLite stores them
    (``sqlite_master``; its own objects and automatic indexes left out), in replay order."""
    backend = Backend.connect(url, "fsync")
    try:
        with backend.reader.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT type, sql FROM sqlite_master "
                "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
            ).all()
    finally:
        backend.dispose()
    return [sql for kind in _SNAPSHOT_ORDER for (t, sql) in rows if t == kind]


def sqlite_snapshot_source() -> str:
    """The text of ``audit/store/_sqlite_snapshot.py``: the packaged revisions, and the
    schema they make of a new SQLite file (migrated here, in a temporary folder)."""
    with tempfile.TemporaryDirectory(prefix="audit-snapshot-") as folder:
        url = f"sqlite:///{Path(folder) / 'audit.db'}"
        upgrade(url)
        statements = sqlite_schema(url)
    lines = [
        '"""Generated by scripts/sqlite_schema_snapshot.py from the migrations: do not edit.',
        "",
        "The packaged schema revisions, oldest first, and the statements that make a new SQLite",
        "file what they make of it (audit.store._revisions replays them;",
        "tests/audit/test_sqlite_snapshot.py holds both to the migrations).",
        '"""',
        "",
        "REVISIONS = (",
        *(f"    {_quoted(revision)}," for revision in revisions()),
        ")",
        "",
        "SQLITE_SCHEMA = (",
        *(f"    {_quoted(statement)}," for statement in statements),
        ")",
        "",
    ]
    return "\n".join(lines)


def _quoted(value: str) -> str:
    # Python's literal, in the double quotes `ruff format` prefers where that adds no escape.
    literal = repr(value)
    if literal.startswith("'") and '"' not in value:
        literal = '"' + literal[1:-1].replace("\\'", "'") + '"'
    return literal


def _engine_call(url: str, action: str) -> str | None:
    backend = Backend.connect(url, "fsync")
    try:
        if action == "upgrade":
            with backend.reader.connect() as conn:
                _refuse_newer(current_revision(conn))
            upgrade_engine(backend.writer)
        with backend.reader.connect() as conn:
            return current_revision(conn)
    except SQLAlchemyError as exc:
        reason = db_reason(exc)
        raise DatabaseUnavailable(
            f"cannot {action} the audit database ({reason}).",
            hint="Check GATEWAY_DATABASE_URL and that the database is reachable and writable.",
        ) from exc
    finally:
        backend.dispose()


def upgrade(url: str) -> str | None:
    """Upgrade the database at ``url`` to head; returns the revision it is now at."""
    return _engine_call(url, "upgrade")


def current(url: str) -> str | None:
    return _engine_call(url, "read")
