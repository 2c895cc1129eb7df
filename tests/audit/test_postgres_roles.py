"""PostgreSQL: the application role may INSERT and SELECT only; a restart fails closed."""

from __future__ import annotations

import psycopg
import pytest

from audit import AppendFailed, AuditStore, DatabaseUnavailable, EventDraft, EventKind
from audit.roles import grant
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres


def _database(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _create_role(server: PostgresServer, role: str) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        if exists is None:
            conn.execute(f"CREATE ROLE {role} LOGIN")


def test_granted_app_role_appends_and_reads_but_cannot_change(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    from audit.migrate import upgrade

    upgrade(pg_url)
    _create_role(postgres_server, "gateway_app")
    statements = grant(pg_url, "gateway_app")
    assert any("GRANT INSERT" in s for s in statements)
    db = _database(pg_url)
    with AuditStore.open(postgres_server.url(db, "gateway_app")) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r1", payloads={"b": b"x"}))
        assert store.verify().ok
    with psycopg.connect(postgres_server.dsn(db, "gateway_app"), autocommit=True) as conn:
        for sql in (
            "UPDATE events SET caller = 'x'",
            "DELETE FROM events",
            "TRUNCATE events",
            "UPDATE payloads SET content = 'x'",
            "DROP TRIGGER events_append_only ON events",
            "ALTER TABLE events DISABLE TRIGGER USER",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)


def test_read_only_role_can_verify_but_not_append(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    from audit.migrate import upgrade

    upgrade(pg_url)
    _create_role(postgres_server, "auditor")
    grant(pg_url, "auditor", read_only=True)
    with AuditStore.open(pg_url) as owner:
        owner.append(EventDraft(kind=EventKind.REQUEST, request_id="r1"))
    with AuditStore.open(postgres_server.url(_database(pg_url), "auditor")) as store:
        assert store.verify().ok
        with pytest.raises(AppendFailed, match="permission denied"):
            store.append(EventDraft(kind=EventKind.EXPORT, request_id="e1"))
        assert store.head()[0] == 1


def test_grant_refuses_unknown_roles_and_sqlite(pg_url: str, sqlite_url: str) -> None:
    from audit.migrate import upgrade

    upgrade(pg_url)
    with pytest.raises(DatabaseUnavailable, match="no PostgreSQL role"):
        grant(pg_url, "nobody_here")
    with pytest.raises(DatabaseUnavailable, match="plain PostgreSQL role"):
        grant(pg_url, "x; DROP TABLE events")
    with pytest.raises(DatabaseUnavailable, match="only on PostgreSQL"):
        grant(sqlite_url, "gateway_app")


@pytest.mark.slow
def test_server_restart_fails_one_append_closed_then_recovers(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    from audit.migrate import upgrade

    upgrade(pg_url)
    with AuditStore.open(pg_url) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="before"))
        postgres_server.stop()
        try:
            with pytest.raises(AppendFailed, match="Nothing was written"):
                store.append(EventDraft(kind=EventKind.REQUEST, request_id="down"))
        finally:
            postgres_server.start()
        outcomes = []
        for n in range(3):  # stale pooled connections fail closed, then the pool reconnects
            try:
                outcomes.append(
                    store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"after-{n}")).seq
                )
            except AppendFailed:
                outcomes.append(None)
        assert outcomes[-1] is not None
        report = store.verify()
    assert report.ok
    assert report.head_seq == 1 + sum(1 for o in outcomes if o is not None)
