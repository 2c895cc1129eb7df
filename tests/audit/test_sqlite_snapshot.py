"""A new SQLite file is created from a snapshot of the migrations, not by Alembic (so that a
command opening the store does not import it): the snapshot must make exactly the database
the migrations make, and name exactly the revisions they name."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from audit import AuditStore
from audit.store import _sqlite_snapshot
from audit.store._revisions import HEAD
from audit.store.migrate import head_revision, revisions, sqlite_snapshot_source, upgrade

REGENERATE = "run `.venv/bin/python scripts/sqlite_schema_snapshot.py` after adding a migration"


def _described(path: Path) -> dict[str, object]:
    """Everything about a SQLite file's schema and rows that is not its random store id."""
    conn = sqlite3.connect(path)
    try:
        master = sorted(
            conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
            key=repr,
        )
        tables = [r[1] for r in master if r[0] == "table"]
        rows = {
            table: sorted(conn.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)
            for table in tables
        }
        meta = dict(rows.pop("audit_meta"))  # type: ignore[arg-type]
        columns = {t: conn.execute(f'PRAGMA table_xinfo("{t}")').fetchall() for t in tables}
        user_version = conn.execute("PRAGMA user_version").fetchone()
    finally:
        conn.close()
    store_id = meta.pop("store_id")
    return {
        "master": master,
        "columns": columns,
        "rows": rows,
        "meta": meta,
        "store_id_length": len(str(store_id)),
        "user_version": user_version,
    }


def test_a_new_sqlite_file_is_exactly_what_the_migrations_make(tmp_path: Path) -> None:
    migrated, snapshot = tmp_path / "migrated.db", tmp_path / "snapshot.db"
    upgrade(f"sqlite:///{migrated}")  # Alembic, as `gateway db upgrade` runs it
    AuditStore.open(f"sqlite:///{snapshot}").close()  # created on first use, from the snapshot
    assert _described(snapshot) == _described(migrated), REGENERATE


def test_the_snapshot_names_every_packaged_revision_and_the_head() -> None:
    assert revisions() == _sqlite_snapshot.REVISIONS, REGENERATE
    assert head_revision() == HEAD, REGENERATE


def test_the_committed_snapshot_is_the_generated_one() -> None:
    committed = Path(_sqlite_snapshot.__file__).read_text(encoding="utf-8")
    assert committed == sqlite_snapshot_source(), REGENERATE


def test_two_stores_open_a_new_file_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url) as first, AuditStore.open(url) as second:
        assert first.store_id == second.store_id


def test_a_file_with_only_an_empty_version_table_is_created_as_new(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
    conn.close()
    with AuditStore.open(f"sqlite:///{path}") as store:
        assert store.store_id
