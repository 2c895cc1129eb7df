"""Format 2: the reviewer role cannot reserve seqs by the hundred thousand.

It records its own reads (export, checkpoint and access events), so it needs seqs; with
USAGE on ``events_seq`` it burned 200,000 in 0.2 s, each a hole the integrator had to wait
out and void (152 s of voids while real events waited unlinked). Now it reserves through
``audit_reserve()``: a few at a time, none while many are open. Real PostgreSQL, roles as
`gateway db grant` makes them, raw SQL as the attacker.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.sequenced.integrator import Integrator
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.store.signing import Signer
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

WRITER = Signer.from_text("01" * 32)
MAX_OPEN = 256  # migration 0011's bound


def role(server: PostgresServer, url: str, name: str, *, read_only: bool = True) -> str:
    """A role granted as `gateway db grant` does (roles are the cluster's: made once)."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {name} LOGIN")
    grant(url, name, read_only=read_only)
    return name


def database(url: str) -> str:
    return url.rsplit("/", 1)[1]


@pytest.fixture
def format_2(pg_url: str) -> str:
    upgrade(pg_url)
    AuditStore.open(pg_url, log_format=2).close()
    with AuditStore.open(pg_url, signer=WRITER) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r0"))
    return pg_url


def test_the_reviewer_cannot_call_nextval(format_2: str, postgres_server: PostgresServer) -> None:
    with (
        psycopg.connect(
            postgres_server.dsn(database(format_2), role(postgres_server, format_2, "nextval_rv")),
            autocommit=True,
        ) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT nextval('events_seq') FROM generate_series(1, 200000)")


def test_the_reviewer_reserves_a_bounded_number_then_is_refused_until_they_are_voided(
    format_2: str, postgres_server: PostgresServer
) -> None:
    name = role(postgres_server, format_2, "burning_rv")
    with psycopg.connect(postgres_server.dsn(database(format_2), name), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.CheckViolation, match="at most"):
            conn.execute("SELECT audit_reserve(1000)")
        burned = 0
        with pytest.raises(psycopg.errors.CheckViolation, match="reserved and not committed"):
            for _ in range(200_000):
                conn.execute("SELECT audit_reserve(16)")
                burned += 16
    assert burned <= MAX_OPEN

    # The integrator voids the holes after its grace; then the reviewer may record again.
    with AuditStore.open(format_2, log_format=2) as store:
        integrator = Integrator(store, bytes.fromhex("5e" * 32), grace_s=0.05)
        integrator.step()
        time.sleep(0.1)
        integrator.run(0.01, threading.Event(), once=True)
    as_reviewer = postgres_server.url(database(format_2), name)
    with AuditStore.open(as_reviewer, signer=WRITER) as store:
        recorded = store.append(EventDraft(kind=EventKind.EXPORT, request_id="export-1"))
    assert recorded.seq > burned


def test_the_application_role_still_reserves_what_it_needs(
    format_2: str, postgres_server: PostgresServer
) -> None:
    name = role(postgres_server, format_2, "busy_app", read_only=False)
    app = postgres_server.url(database(format_2), name)
    with AuditStore.open(app, signer=WRITER) as store:
        appended = store.append_many(
            [EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}") for n in range(1, 1001)]
        )
    assert len({a.seq for a in appended}) == 1000
