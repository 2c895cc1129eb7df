"""PostgreSQL's chain guard (migration 0005): an inserted event must extend the chain.

Every row put into ``events`` - the reviewer's (through ``CALL audit_review_append``,
migration 0013), the application's, the owner's - is refused unless the row is the next link
(seq, prev_hash, hash) and its columns are what its hashed body says. The gateway's own
appends already are, so they pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine

from audit import AuditStore, EventDraft, EventKind
from audit.canonical import canonical_bytes
from audit.proofs import take_checkpoint
from audit.store.chain import event_body, link_hash
from audit.store.migrate import downgrade_engine, upgrade, upgrade_engine
from audit.store.roles import grant
from audit.verify import verify_log
from tests.audit.test_postgres_roles import _create_role, _owned_database
from tests.support.postgres import PostgresServer
from tests.support.reviewer_rows import review_append

pytestmark = pytest.mark.postgres

INSERT = (
    "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, task, caller, "
    "policy_fingerprint, request_hash, body, prev_hash, hash) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
WHEN = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _head(conn: psycopg.Connection[Any]) -> tuple[int, str]:
    row = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def _row(seq: int, prev: str, **change: Any) -> dict[str, Any]:
    """A well-formed next event, as the store would write it; ``change`` edits it after."""
    fields: dict[str, Any] = {
        "event_id": f"hand{seq}",
        "request_id": "req1",
        "kind": "export",
        "task": None,
        "caller": "auditor",
        "policy_fingerprint": None,
        "request_hash": None,
    }
    body = event_body(
        seq=seq,
        recorded_at=WHEN,
        durability="fsync",
        data={"format": "jsonl"},
        payloads={},
        policy_ref=None,
        **fields,
    )
    row = {"seq": seq, **fields, "recorded_at": WHEN, "body": body, "prev_hash": prev}
    row["hash"] = link_hash(prev, body)
    row.update(change)
    return row


def _insert(conn: psycopg.Connection[Any], row: dict[str, Any]) -> None:
    conn.execute(
        INSERT,
        (
            row["seq"], row["event_id"], row["request_id"], row["kind"], row["recorded_at"],
            row["task"], row["caller"], row["policy_fingerprint"], row["request_hash"],
            row["body"], row["prev_hash"], row["hash"],
        ),
    )  # fmt: skip


def test_reviewer_forgeries_are_refused(postgres_server: PostgresServer) -> None:
    """The reviewer's two forgeries: a ``response`` body under an ``export`` column tied to a
    real request, and an ``export`` at seq 1,000,000."""
    db = _owned_database(postgres_server, "audit_owner")
    owner_url = postgres_server.url(db, "audit_owner")
    upgrade(owner_url)
    _create_role(postgres_server, "auditor")
    grant(owner_url, "auditor", read_only=True)
    with AuditStore.open(owner_url) as owner:
        owner.append(
            EventDraft(kind=EventKind.REQUEST, request_id="req1", request_hash="h1",
                       payloads={"b": b"x"})
        )  # fmt: skip
    with psycopg.connect(postgres_server.dsn(db, "auditor"), autocommit=True) as conn:
        seq, prev = _head(conn)
        body = canonical_bytes(
            {"v": 1, "seq": seq + 1, "event_id": "f1", "request_id": "req1", "kind": "response",
             "recorded_at": "2026-01-01T00:00:00.000000Z", "task": None, "caller": None,
             "policy_fingerprint": None, "request_hash": "h1", "durability": "fsync",
             "data": {"ok": True, "text": "FORGED"}, "payloads": {}, "policy_ref": None}
        )  # fmt: skip
        forged = {"seq": seq + 1, "event_id": "f1", "request_id": "req1", "kind": "export",
                  "recorded_at": datetime(2026, 1, 1, tzinfo=UTC), "request_hash": "h1",
                  "body": body, "prev_hash": prev, "hash": link_hash(prev, body)}  # fmt: skip
        with pytest.raises(psycopg.errors.CheckViolation, match=r"column\(s\) kind of seq 2"):
            review_append(conn, forged)
        # Not at the head: refused before the guard (the reviewer's store links again).
        far = _row(1000000, "sha256:" + "0" * 64)
        with pytest.raises(psycopg.errors.SerializationFailure, match="head moved on"):
            review_append(conn, far)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="audit_review_append"):
            _insert(conn, _row(seq + 1, prev))  # the reviewer's own INSERT (0012)
        review_append(conn, _row(seq + 1, prev))  # a true next export link is still let in
    with AuditStore.open(postgres_server.url(db, "auditor")) as store:
        assert take_checkpoint(store, None).seq == 3  # and the store's own records too
        report = verify_log(store)
    assert report.ok and report.head_seq == 3


BAD_ROWS: dict[str, tuple[Callable[[int, str], dict[str, Any]], str]] = {
    "gap": (lambda seq, prev: _row(seq + 1, prev), "does not follow the head"),
    "below the chain": (lambda seq, prev: _row(0, prev), "does not follow the head"),
    "replayed seq": (lambda seq, prev: _row(seq - 1, prev), "does not follow the head"),
    "wrong prev_hash": (lambda seq, prev: _row(seq, "sha256:" + "1" * 64), "prev_hash"),
    "wrong hash": (lambda seq, prev: _row(seq, prev, hash="sha256:" + "2" * 64), "hash of seq"),
    "column edited": (lambda seq, prev: _row(seq, prev, caller="mallory"), r"caller"),
    "time edited": (
        lambda seq, prev: _row(seq, prev, recorded_at=datetime(2020, 1, 1, tzinfo=UTC)),
        "recorded_at",
    ),
    "null column for a value": (lambda seq, prev: _row(seq, prev, caller=None), "caller"),
    "not JSON": (
        lambda seq, prev: _row(seq, prev, body=b"x", hash=link_hash(prev, b"x")),
        "not a version-1",
    ),
    "dangling payload": (
        lambda seq, prev: _dangling(seq, prev),
        "payload sha256:dead that is not stored",
    ),
}


def _dangling(seq: int, prev: str) -> dict[str, Any]:
    row = _row(seq, prev)
    body = row["body"].replace(b'"payloads":{}', b'"payloads":{"b":"sha256:dead"}')
    return {**row, "body": body, "hash": link_hash(prev, body)}


@pytest.mark.parametrize("case", BAD_ROWS)
def test_app_role_forged_rows_are_refused(
    postgres_server: PostgresServer, pg_url: str, case: str
) -> None:
    upgrade(pg_url)
    _create_role(postgres_server, "gateway_app")
    grant(pg_url, "gateway_app")
    db = pg_url.rsplit("/", 1)[1]
    with AuditStore.open(postgres_server.url(db, "gateway_app")) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="req1", payloads={"b": b"x"}))
    make, message = BAD_ROWS[case]
    with psycopg.connect(postgres_server.dsn(db, "gateway_app"), autocommit=True) as conn:
        seq, prev = _head(conn)
        with pytest.raises(psycopg.errors.IntegrityError, match=message):
            _insert(conn, make(seq + 1, prev))
        _insert(conn, _row(seq + 1, prev))  # the control: the well-formed row goes in
    with AuditStore.open(pg_url) as store:
        assert store.append(EventDraft(kind=EventKind.RESPONSE, request_id="req1")).seq == 3
        assert verify_log(store).ok


def test_group_commits_pass_the_guard(pg_url: str) -> None:
    upgrade(pg_url)
    with AuditStore.open(pg_url) as store:
        drafts = [
            EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}", task="t", caller="c",
                       request_hash=f"h{n}", payloads={"b": b"%d" % n})
            for n in range(20)
        ]  # fmt: skip
        assert [a.seq for a in store.append_many(drafts)] == list(range(1, 21))
        assert verify_log(store).ok


def _guard(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM pg_trigger WHERE tgname = 'events_chain_guard'), "
            "(SELECT count(*) FROM pg_proc WHERE proname = 'events_chain_guard')"
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


def test_downgrade_drops_the_guard(postgres_server: PostgresServer, pg_url: str) -> None:
    db = pg_url.rsplit("/", 1)[1]
    engine = create_engine(pg_url)
    try:
        upgrade_engine(engine)
        assert _guard(postgres_server.dsn(db)) == (1, 1)
        downgrade_engine(engine, "0004")
        assert _guard(postgres_server.dsn(db)) == (0, 0)
        with psycopg.connect(postgres_server.dsn(db), autocommit=True) as conn:
            _insert(conn, _row(5, "sha256:x"))  # unguarded again, as under 0004
            conn.execute("SET session_replication_role = replica")
            conn.execute("DELETE FROM events")
        upgrade_engine(engine)
        assert _guard(postgres_server.dsn(db)) == (1, 1)
    finally:
        engine.dispose()
