"""The content functions are for granted roles only, and the integrator selects no content
(migration 0016). PostgreSQL lets PUBLIC execute a new function: up to 0015 a role granted
nothing could hash every stored payload through ``audit_content_hashes``, and the integrator
(which never reads a prompt or an answer) kept SELECT on ``payloads``."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa

from audit import AuditStore, EventKind
from audit.store.migrate import downgrade_engine, upgrade, upgrade_engine
from audit.store.roles import grant
from tests.gateway.conftest import MakeGateway
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

HASHES = "SELECT * FROM audit_content_hashes(%s)"


def _role(postgres_server: PostgresServer, name: str) -> None:
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {name} LOGIN")


def _answered(make_gateway: MakeGateway, postgres_server: PostgresServer) -> tuple[str, str]:
    """A database with one answered request: its name and the answer's digest."""
    db = postgres_server.create_database()
    url = postgres_server.url(db)
    upgrade(url)
    gw = make_gateway(database_url=url, record_key="47" * 32)
    result = gw.complete("compliance_review", "Clause 4?", caller="desk")
    with AuditStore.open(url) as store:
        (response,) = store.iter_events(kind=EventKind.RESPONSE, request_ids=[result.request_id])
    return db, response.payload_digests["response_body"]


def test_a_role_granted_nothing_cannot_call_the_content_functions(
    make_gateway: MakeGateway, postgres_server: PostgresServer
) -> None:
    db, ref = _answered(make_gateway, postgres_server)
    _role(postgres_server, "fn_stranger")
    with psycopg.connect(postgres_server.dsn(db, "fn_stranger")) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="audit_content_hashes"):
            conn.execute(HASHES, ([ref],))
        conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="audit_read_content"):
            conn.execute("SELECT audit_read_content(1, %s)", (ref,))


def test_an_integrator_selects_no_content_yet_hashes_it(
    make_gateway: MakeGateway, postgres_server: PostgresServer
) -> None:
    db, ref = _answered(make_gateway, postgres_server)
    _role(postgres_server, "fn_integrator")
    grant(postgres_server.url(db), "fn_integrator", integrator=True)
    with psycopg.connect(postgres_server.dsn(db, "fn_integrator")) as conn:
        assert conn.execute("SELECT size FROM payloads WHERE digest = %s", (ref,)).fetchone()
        assert conn.execute(HASHES, ([ref],)).fetchone()  # verify checks content as any role
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="payloads"):
            conn.execute("SELECT content FROM payloads")


def test_the_upgrade_changes_the_roles_granted_before_it(
    make_gateway: MakeGateway, postgres_server: PostgresServer
) -> None:
    db, ref = _answered(make_gateway, postgres_server)
    for name in ("fn_old_reviewer", "fn_old_integrator", "fn_stranger"):
        _role(postgres_server, name)
    url = postgres_server.url(db)
    grant(url, "fn_old_reviewer", read_only=True)
    grant(url, "fn_old_integrator", integrator=True)
    engine = sa.create_engine(url)
    try:
        downgrade_engine(engine, "0015")  # as those roles were before 0016
        with psycopg.connect(postgres_server.dsn(db, "fn_stranger")) as conn:
            assert conn.execute(HASHES, ([ref],)).fetchone()  # PUBLIC could, before
        upgrade_engine(engine)
    finally:
        engine.dispose()
    with psycopg.connect(postgres_server.dsn(db, "fn_old_reviewer")) as conn:
        assert conn.execute(HASHES, ([ref],)).fetchone()
    stranger = psycopg.connect(postgres_server.dsn(db, "fn_stranger"))
    with stranger, pytest.raises(psycopg.errors.InsufficientPrivilege):
        stranger.execute(HASHES, ([ref],))
    integrator = psycopg.connect(postgres_server.dsn(db, "fn_old_integrator"))
    with integrator, pytest.raises(psycopg.errors.InsufficientPrivilege, match="payloads"):
        integrator.execute("SELECT content FROM payloads")
