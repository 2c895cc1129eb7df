"""PostgreSQL: the application role may INSERT and SELECT only; a restart fails closed."""

from __future__ import annotations

import io
import json

import psycopg
import pytest

from audit import AppendFailed, AuditStore, DatabaseUnavailable, EventDraft, EventKind
from audit.proofs import take_checkpoint
from audit.store.roles import grant
from audit.verify import verify_log
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
    from audit.store.migrate import upgrade

    upgrade(pg_url)
    _create_role(postgres_server, "gateway_app")
    statements = grant(pg_url, "gateway_app")
    assert any("GRANT INSERT" in s for s in statements)
    db = _database(pg_url)
    with AuditStore.open(postgres_server.url(db, "gateway_app")) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r1", payloads={"b": b"x"}))
        assert verify_log(store).ok
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


def _owned_database(server: PostgresServer, owner: str) -> str:
    """A new database owned by a LOGIN role that is not a superuser, as in production."""
    _create_role(server, owner)
    name = server.create_database()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" OWNER TO {owner}')
    with psycopg.connect(server.dsn(name), autocommit=True) as conn:
        conn.execute(f"ALTER SCHEMA public OWNER TO {owner}")
    return name


# What a reviewer's store hears for any other kind (migration 0013).
REVIEW_KINDS_ONLY = "records export, checkpoint, access and evidence_pack events only"
REVIEWER_FORBIDDEN = (
    "UPDATE events SET caller = 'x'",
    "DELETE FROM events",
    "TRUNCATE events",
    "INSERT INTO payloads (digest, size, content) VALUES ('sha256:x', 1, 'x')",
    "INSERT INTO policies (fingerprint, content) VALUES ('sha256:x', 'x')",
    "ALTER TABLE events DISABLE ROW LEVEL SECURITY",
    "ALTER TABLE events DISABLE TRIGGER USER",
    "DROP POLICY events_append ON events",
    "CREATE POLICY mine ON events FOR INSERT WITH CHECK (true)",
)
# A forged event row straight through the driver: refused before the chain guard, since a
# reviewer inserts no format-1 row itself (migration 0013).
FORGED_EVENT = (
    "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, body, prev_hash, hash) "
    "VALUES (99, 'e99', 'forged', 'request', now(), 'x', 'p', 'h')"
)


def test_reviewer_appends_only_the_records_of_its_own_reads(
    postgres_server: PostgresServer,
) -> None:
    from audit.reports.export import export_events
    from audit.store.migrate import upgrade

    db = _owned_database(postgres_server, "audit_owner")
    owner_url = postgres_server.url(db, "audit_owner")
    upgrade(owner_url)  # the owner is not a superuser: it bypasses row security as owner
    _create_role(postgres_server, "auditor")
    statements = grant(owner_url, "auditor", read_only=True)
    assert "GRANT INSERT ON events TO auditor" in statements  # not merkle_nodes: planted nodes
    with AuditStore.open(owner_url) as owner:
        owner.append(EventDraft(kind=EventKind.REQUEST, request_id="r1", payloads={"b": b"x"}))

    with AuditStore.open(postgres_server.url(db, "auditor")) as store:
        assert verify_log(store).ok
        signed = take_checkpoint(store, None)
        out = io.StringIO()
        summary = export_events(store, out, "jsonl", reviewer="auditor")
        assert (signed.seq, summary.export_seq, summary.events) == (2, 3, 2)
        assert [json.loads(line)["kind"] for line in out.getvalue().splitlines()] == [
            "request",
            "checkpoint",
        ]
        for kind in (EventKind.REQUEST, EventKind.RESPONSE, EventKind.CACHE_HIT):
            with pytest.raises(AppendFailed, match=REVIEW_KINDS_ONLY):
                store.append(EventDraft(kind=kind, request_id="forged"))
        with pytest.raises(AppendFailed, match="records no content"):
            store.append(EventDraft(kind=EventKind.EXPORT, request_id="e", payloads={"b": b"y"}))
        assert store.head()[0] == 3
    refused = 0
    with psycopg.connect(postgres_server.dsn(db, "auditor"), autocommit=True) as conn:
        for sql in REVIEWER_FORBIDDEN:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)
            refused += 1
        # A reviewer's own INSERT of a format-1 row is refused before the chain guard
        # (migration 0013): it records through CALL audit_review_append(...) only.
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="audit_review_append"):
            conn.execute(FORGED_EVENT)
    assert refused == len(REVIEWER_FORBIDDEN)
    with AuditStore.open(owner_url) as owner:
        report = verify_log(owner)
        assert report.ok and report.head_seq == 3
        assert [e.kind for e in owner.iter_events()] == [
            EventKind.REQUEST,
            EventKind.CHECKPOINT,
            EventKind.EXPORT,
        ]


def test_reviewer_records_its_content_reads_and_nothing_with_content(
    postgres_server: PostgresServer,
) -> None:
    """`audit show --content` appends an ACCESS event before it shows anything (0008)."""
    from audit.store.migrate import upgrade

    db = _owned_database(postgres_server, "audit_owner")
    owner_url = postgres_server.url(db, "audit_owner")
    upgrade(owner_url)
    _create_role(postgres_server, "auditor")
    grant(owner_url, "auditor", read_only=True)
    with AuditStore.open(owner_url) as owner:
        owner.append(EventDraft(kind=EventKind.REQUEST, request_id="r1", payloads={"b": b"x"}))
    read = {"reviewer": "auditor", "read_request_id": "r1", "read": ["request"]}
    with AuditStore.open(postgres_server.url(db, "auditor")) as store:
        access = store.append(
            EventDraft(kind=EventKind.ACCESS, request_id="access-1", caller="auditor", data=read)
        )
        assert access.seq == 2
        pack = {"regime": "dora", "items": {"tamper-protection": "pass"}}  # 0012
        packed = store.append(
            EventDraft(kind=EventKind.EVIDENCE_PACK, request_id="evidence-1", data=pack)
        )
        assert packed.seq == 3
        with pytest.raises(AppendFailed, match="records no content"):
            store.append(
                EventDraft(kind=EventKind.ACCESS, request_id="access-2", payloads={"b": b"y"})
            )
        for kind in (EventKind.APPROVAL, EventKind.RESPONSE):
            with pytest.raises(AppendFailed, match=REVIEW_KINDS_ONLY):
                store.append(EventDraft(kind=kind, request_id="forged"))
    with AuditStore.open(owner_url) as owner:
        report = verify_log(owner)
    assert report.ok and report.head_seq == 3


def _rls(dsn: str) -> tuple[bool, bool, set[str]]:
    """(row security on, forced, policy names) for events."""
    with psycopg.connect(dsn) as conn:
        on = conn.execute(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class "
            "WHERE oid = 'events'::regclass"
        ).fetchone()
        names = conn.execute("SELECT policyname FROM pg_policies WHERE tablename = 'events'")
        assert on is not None
        return on[0], on[1], {r[0] for r in names}


def test_grants_from_before_row_security_keep_working_and_downgrade_restores_them(
    postgres_server: PostgresServer,
) -> None:
    from sqlalchemy import create_engine

    from audit.store.migrate import downgrade_engine, upgrade, upgrade_engine

    db = _owned_database(postgres_server, "audit_owner")
    owner_url = postgres_server.url(db, "audit_owner")
    engine = create_engine(owner_url)
    try:
        upgrade_engine(engine, "0002")
        for role in ("legacy_app", "legacy_reader"):
            _create_role(postgres_server, role)
        with psycopg.connect(postgres_server.dsn(db, "audit_owner"), autocommit=True) as conn:
            # what `gateway db grant` ran before revision 0003
            read = "events, payloads, policies, audit_meta, alembic_version"
            conn.execute(f"GRANT SELECT ON {read} TO legacy_app, legacy_reader")
            conn.execute("GRANT INSERT ON events, payloads, policies TO legacy_app")
        upgrade(owner_url)
        assert _rls(postgres_server.dsn(db)) == (
            True,
            False,
            # events_append_voids: the integrator's voids (0010); the eraser's (0014)
            {
                "events_read",
                "events_append",
                "events_append_reads",
                "events_append_voids",
                "events_append_erasures",
                "events_erasure_by_eraser",
            },
        )
        app_url = postgres_server.url(db, "legacy_app")
        reader_url = postgres_server.url(db, "legacy_reader")
        with AuditStore.open(app_url) as app:  # an appender granted earlier: every kind
            app.append(EventDraft(kind=EventKind.REQUEST, request_id="r", payloads={"b": b"x"}))
            app.append(EventDraft(kind=EventKind.RESPONSE, request_id="r"))
        with AuditStore.open(reader_url) as reader:  # read-only as granted: still no INSERT
            assert verify_log(reader).ok
            with pytest.raises(AppendFailed, match="this role may not append"):
                take_checkpoint(reader, None)
        grant(owner_url, "legacy_reader", read_only=True)  # granted again: a reviewer
        with AuditStore.open(reader_url) as reader:
            assert take_checkpoint(reader, None).seq == 3

        downgrade_engine(engine, "0002")
        assert _rls(postgres_server.dsn(db)) == (False, False, set())
        # without row security the reviewer's INSERT would allow any kind: it was revoked
        reader_dsn = postgres_server.dsn(db, "legacy_reader")
        with (
            psycopg.connect(reader_dsn, autocommit=True) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute(
                "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, body, "
                "prev_hash, hash) VALUES (9, 'e9', 'f', 'request', now(), 'x', 'p', 'h')"
            )
        with psycopg.connect(postgres_server.dsn(db, "legacy_app"), autocommit=True) as conn:
            assert conn.execute("SELECT has_table_privilege('events', 'INSERT')").fetchone() == (
                True,
            )
        upgrade(owner_url)
    finally:
        engine.dispose()
    with AuditStore.open(app_url) as app:
        app.append(EventDraft(kind=EventKind.REQUEST, request_id="again"))
        report = verify_log(app)
    assert report.ok and report.head_seq == 4


def test_grant_refuses_unknown_roles_and_sqlite(pg_url: str, sqlite_url: str) -> None:
    from audit.store.migrate import upgrade

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
    from audit.store.migrate import upgrade

    upgrade(pg_url)
    with AuditStore.open(pg_url) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="before"))
        postgres_server.stop()
        try:
            with pytest.raises(AppendFailed, match="Nothing was written"):
                store.append(EventDraft(kind=EventKind.REQUEST, request_id="down"))
        finally:
            postgres_server.start()
        outcomes: list[int | None] = []
        for n in range(3):  # stale pooled connections fail closed, then the pool reconnects
            try:
                outcomes.append(
                    store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"after-{n}")).seq
                )
            except AppendFailed:
                outcomes.append(None)
        assert outcomes[-1] is not None
        report = verify_log(store)
    assert report.ok
    assert report.head_seq == 1 + sum(1 for o in outcomes if o is not None)
