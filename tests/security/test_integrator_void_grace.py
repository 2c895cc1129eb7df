"""The integrator role cannot void a seq that a live writer reserved, inside its grace.

It voids the seqs of writers that died after reserving, and could void any reserved seq at
once: a writer that had just reserved one then failed on the primary key (its request
failed closed), again and again. The database now lets that role void a seq only once it
has itself seen the seq reserved for ``audit_void_grace()``. Real PostgreSQL, roles as
`gateway db grant` makes them; the live writer is a real transaction left open after its
reservation.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.canonical import canonical_bytes
from audit.sequenced.integrator import Integrator
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.store.sequenced import void_row
from audit.store.signing import Signer
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

INTEGRATOR_KEY = "5e" * 32
INTEGRATOR = Signer.from_text(INTEGRATOR_KEY)
WRITER = Signer.from_text("01" * 32)
INSERT_VOID = (
    "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, body, prev_hash, hash, "
    "signature, key_id) VALUES (%(seq)s, %(event_id)s, %(request_id)s, 'void', "
    "%(recorded_at)s, %(body)s, '', %(hash)s, %(signature)s, %(key_id)s)"
)


def role(server: PostgresServer, url: str, name: str, **kind: bool) -> str:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {name} LOGIN")
    grant(url, name, **kind)
    return name


@pytest.fixture
def database(pg_url: str) -> str:
    upgrade(pg_url)
    AuditStore.open(pg_url, log_format=2).close()
    with AuditStore.open(pg_url, signer=WRITER) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r0"))
    return pg_url.rsplit("/", 1)[1]


def test_the_integrator_role_cannot_void_a_seq_a_writer_just_reserved(
    database: str, postgres_server: PostgresServer
) -> None:
    app = role(postgres_server, postgres_server.url(database), "grace_app")
    integrator = role(postgres_server, postgres_server.url(database), "grace_int", integrator=True)
    with psycopg.connect(postgres_server.dsn(database, app)) as writer:
        (seq,) = writer.execute("SELECT audit_reserve(1)").fetchone()  # type: ignore[misc]
        with psycopg.connect(postgres_server.dsn(database, integrator), autocommit=True) as conn:
            conn.execute("SELECT audit_mark_reserved()")  # even a mark of its own: too recent
            void = void_row(seq, INTEGRATOR, "x", canonical_bytes("fsync"), store_id="any")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(INSERT_VOID, void)
        writer.rollback()


def test_an_integrator_with_a_short_grace_waits_for_the_databases_and_the_writer_commits(
    database: str, postgres_server: PostgresServer
) -> None:
    """The integrator role's own grace (0.05 s) is shorter than the database's (30 s): its
    voids are refused and reported, the writer's row commits, and the pass links it."""
    integrator = role(postgres_server, postgres_server.url(database), "short_int", integrator=True)
    with (
        psycopg.connect(postgres_server.dsn(database)) as writer,
        AuditStore.open(postgres_server.url(database, integrator)) as store,
    ):
        writer.execute("SELECT audit_reserve(1)")  # a live writer, in its transaction
        running = Integrator(store, bytes.fromhex(INTEGRATOR_KEY), grace_s=0.05)
        assert running.step().linked == 1
        assert running.step().waiting_on == 2
        time.sleep(0.1)
        refused = running.step()
        assert (refused.voided, refused.waiting_on) == (0, 2)
        assert any("refused to void" in w for w in refused.warnings), refused.warnings
        writer.rollback()  # the writer gives up (or commits): a void is for the database then


def test_the_integrator_role_voids_once_the_databases_grace_has_passed(
    database: str, postgres_server: PostgresServer
) -> None:
    integrator = role(postgres_server, postgres_server.url(database), "due_int", integrator=True)
    with psycopg.connect(postgres_server.dsn(database), autocommit=True) as owner:
        owner.execute(
            "CREATE OR REPLACE FUNCTION audit_void_grace() RETURNS interval LANGUAGE sql "
            "IMMUTABLE AS $$ SELECT interval '0.2 seconds' $$"
        )
        owner.execute("SELECT nextval('events_seq')")  # a writer that died after reserving
    with AuditStore.open(postgres_server.url(database, integrator)) as store:
        running = Integrator(store, bytes.fromhex(INTEGRATOR_KEY), grace_s=0.05)
        assert running.step().linked == 1
        assert running.step().waiting_on == 2
        time.sleep(0.3)
        assert running.step().voided == 1
        assert running.step().head == 2
