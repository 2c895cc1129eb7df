"""`gateway db grant` run by a role that does not own the audit tables fails and says why.

PostgreSQL answers such a GRANT with a WARNING only ("no privileges were granted"), so the
command used to print its statements and exit 0 having granted nothing.
"""

from __future__ import annotations

import psycopg
import pytest
from click.testing import CliRunner

from audit.store.migrate import upgrade
from audit.store.roles import grant
from gateway.cli import main
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres


def _create_role(server: PostgresServer, role: str) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {role} LOGIN")


def _privileges(server: PostgresServer, db: str, role: str) -> int:
    with psycopg.connect(server.dsn(db), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = %s",
            (role,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_grant_by_a_role_that_does_not_own_the_tables_fails_naming_the_owner(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    upgrade(pg_url)
    db = pg_url.rsplit("/", 1)[1]
    _create_role(postgres_server, "grant_app")
    _create_role(postgres_server, "grant_reviewer")
    grant(pg_url, "grant_app")  # by the owner: the application may read and append
    as_app = postgres_server.url(db, "grant_app")
    result = CliRunner().invoke(
        main, ["db", "grant", "grant_reviewer", "--read-only"], env={"GATEWAY_DATABASE_URL": as_app}
    )
    assert result.exit_code != 0, result.output
    assert "does not own the audit tables" in result.stderr
    assert "nothing was granted" in result.stderr and "Traceback" not in result.output
    assert "GRANT" not in result.stdout
    assert _privileges(postgres_server, db, "grant_reviewer") == 0
