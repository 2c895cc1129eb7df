"""Alembic owns the schema: empty → head, round trips, `alembic check`, refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text

from audit import AuditStore, DatabaseUnavailable, EventDraft, EventKind, SchemaMismatch
from audit.store.migrate import (
    MIGRATIONS_DIR,
    alembic_config,
    current,
    downgrade_engine,
    head_revision,
    upgrade,
)
from audit.verify import verify_log
from tests.audit.conftest import Raw

ROOT = Path(__file__).resolve().parents[2]


def test_migrations_are_shipped_inside_the_package() -> None:
    # audit/_migrations is what the wheel carries (package-data in pyproject.toml)
    assert (MIGRATIONS_DIR / "env.py").is_file()
    assert (MIGRATIONS_DIR / "script.py.mako").is_file()
    assert list((MIGRATIONS_DIR / "versions").glob("0001_*.py"))


def test_empty_database_upgrades_to_head_with_guards(any_url: str) -> None:
    # any_url is already migrated on PostgreSQL; SQLite is migrated here on first use
    AuditStore.open(any_url).close()
    assert current(any_url) == head_revision()
    sqlite = any_url.startswith("sqlite")
    query = (
        "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        if sqlite
        else "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"
    )
    engine = create_engine(any_url)
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        triggers = {r[0] for r in conn.execute(text(query))}
    engine.dispose()
    assert {"events", "payloads", "policies", "audit_meta", "alembic_version"} <= tables
    expected = (
        {"events_no_update", "events_no_delete", "events_no_seq_reuse", "payloads_no_replace"}
        if sqlite
        else {"events_append_only", "events_no_truncate", "payloads_append_only"}
    )
    assert expected <= triggers


def test_downgrade_and_upgrade_round_trip(any_url: str) -> None:
    AuditStore.open(any_url).close()
    engine = create_engine(any_url)
    try:
        downgrade_engine(engine, "base")
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
        upgrade(any_url)
    finally:
        engine.dispose()
    with AuditStore.open(any_url) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r"))
        assert verify_log(store).ok


def test_models_match_migrations_alembic_check(any_url: str) -> None:
    AuditStore.open(any_url).close()
    engine = create_engine(any_url)
    try:
        with engine.connect() as conn:
            command.check(alembic_config(conn))  # raises if a model change lacks a migration
    finally:
        engine.dispose()


@pytest.mark.slow  # alembic as a process
def test_alembic_cli_check_with_the_root_alembic_ini(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    upgrade(url)
    env = {**os.environ, "GATEWAY_DATABASE_URL": url}
    alembic = Path(sys.executable).with_name("alembic")
    done = subprocess.run(
        [str(alembic), "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "No new upgrade operations detected" in done.stdout + done.stderr


def test_postgres_behind_head_is_refused_naming_the_command(pg_url: str) -> None:
    with pytest.raises(SchemaMismatch, match="gateway db upgrade"):
        AuditStore.open(pg_url)  # never migrated implicitly
    upgrade(pg_url)
    engine = create_engine(pg_url)
    try:
        downgrade_engine(engine, "base")
    finally:
        engine.dispose()
    with pytest.raises(SchemaMismatch, match="gateway db upgrade"):
        AuditStore.open(pg_url)


def test_database_from_a_newer_schema_is_refused(any_url: str) -> None:
    AuditStore.open(any_url).close()
    raw = Raw(any_url)
    raw.execute("UPDATE alembic_version SET version_num = 'ffff9999'")
    raw.close()
    with pytest.raises(SchemaMismatch, match="newer"):
        AuditStore.open(any_url)
    with pytest.raises(SchemaMismatch, match="newer"):
        upgrade(any_url)


def test_corrupt_sqlite_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    with pytest.raises(DatabaseUnavailable, match="not a database") as caught:
        AuditStore.open(f"sqlite:///{path}")
    assert "\n" not in str(caught.value)
    assert path.read_bytes() == garbage


def test_sqlite_file_of_another_application_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x)")
    with pytest.raises(DatabaseUnavailable, match="not an audit database"):
        AuditStore.open(f"sqlite:///{path}")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "not a database URL"),
        ("mysql://u@h/db", "does not support"),
        ("sqlite://", "must be a file"),
        ("sqlite:////no/such/folder/audit.db", "does not exist"),
        ("postgresql+psycopg://nobody@127.0.0.1:1/x", "cannot open"),
    ],
)
def test_unusable_urls_get_one_line(url: str, message: str) -> None:
    with pytest.raises(DatabaseUnavailable, match=message) as caught:
        AuditStore.open(url)
    assert "\n" not in str(caught.value)
