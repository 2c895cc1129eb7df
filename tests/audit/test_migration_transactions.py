"""Each migration is its own transaction; a new SQLite file is created whole, once.

A migration that fails must leave the database at the revision before it (with everything
that revision made), not roll the whole upgrade back to nothing and not leave half of itself
behind.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import inspect
from sqlalchemy.exc import SQLAlchemyError

from audit import AuditStore, EventDraft, EventKind
from audit.store.backend import Backend
from audit.store.migrate import MIGRATIONS_DIR, current, head_revision, upgrade_engine
from audit.verify import verify_log

ROOT = Path(__file__).resolve().parents[2]
# Opens the store at a given moment (argv: URL, UNIX time).
OPEN_AT = """
import sys, time
from audit import AuditStore
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
AuditStore.open(sys.argv[1]).close()
"""
FAILING = '''"""Test only: makes a table, then fails."""

import sqlalchemy as sa
from alembic import op

revision = "ffff0001"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("half_done", sa.Column("x", sa.Integer()))
    op.execute("INSERT INTO no_such_table VALUES (1)")


def downgrade() -> None:
    op.drop_table("half_done")
'''


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request: pytest.FixtureRequest) -> str:
    """An empty database: a SQLite file that does not exist yet, or a new PostgreSQL one."""
    fixture = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(fixture)
    return url


def _migrations_with_a_failing_one(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "versions" / "ffff0001_fails.py").write_text(FAILING.format(head=head_revision()))
    return folder


def test_a_failing_migration_leaves_the_database_at_the_revision_before_it(
    fresh_url: str, tmp_path: Path
) -> None:
    folder = _migrations_with_a_failing_one(tmp_path)
    backend = Backend.connect(fresh_url, "fsync")  # the engine `gateway db upgrade` uses
    try:
        with pytest.raises(SQLAlchemyError, match="no_such_table"):
            upgrade_engine(backend.writer, script_location=folder)
        with backend.reader.connect() as conn:
            tables = set(inspect(conn).get_table_names())
    finally:
        backend.dispose()
    assert current(fresh_url) == head_revision()
    assert {"events", "payloads", "policies", "audit_meta", "alembic_version"} <= tables
    assert "half_done" not in tables  # the failed migration left nothing of itself
    with AuditStore.open(fresh_url) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r"))
        assert verify_log(store).ok


@pytest.mark.slow  # several processes opening one file
def test_a_new_sqlite_file_opened_by_several_processes_at_once_is_created_once(
    sqlite_url: str,
) -> None:
    # A race: were the schema made a transaction per migration, another process could take
    # the lock between two of them and fail (or migrate too). It shows only on some runs.
    start = time.time() + 3  # every process has imported the store by then, so they collide
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AT, sqlite_url, str(start)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
    assert current(sqlite_url) == head_revision()
    with AuditStore.open(sqlite_url) as store:
        assert verify_log(store).ok
