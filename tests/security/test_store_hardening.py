"""The audit store's own guards against the roles and hands that can write its database.

Each test is one attack from the trust-boundary review, run against the real database:

- SQLite ``INSERT OR REPLACE`` reusing an existing ``event_id`` at a new seq, which deleted
  the old event without firing the DELETE trigger;
- a payload or policy row written ahead of time under the digest of a future request, which
  insert-if-absent then took for the bytes that were sent;
- PostgreSQL's chain lock, an advisory lock that any role could hold and hang every gateway;
- a NUL character in a text column or the data, which PostgreSQL refuses and SQLite stores.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from audit import AppendFailed, AuditStore, EventDraft, EventKind, InvalidEvent
from audit.canonical import canonical_bytes, canonical_digest, digest
from audit.errors import ContentConflict
from audit.proofs import take_checkpoint
from audit.store.backend import Backend
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.verify import verify_log
from tests.audit.conftest import POLICY, Raw, fill
from tests.audit.test_postgres_roles import _create_role, _owned_database
from tests.support.postgres import PostgresServer

COLUMNS = (
    "seq, event_id, request_id, kind, recorded_at, task, caller, policy_fingerprint, "
    "request_hash, body, prev_hash, hash"
)
DB_ERRORS = (sqlite3.DatabaseError, psycopg.Error)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'audit.db'}"
        AuditStore.open(url).close()  # created and migrated on first use
        return url
    pg: str = request.getfixturevalue("pg_url")
    upgrade(pg)
    return pg


@pytest.fixture
def store(any_url: str) -> Iterator[AuditStore]:
    with AuditStore.open(any_url) as opened:
        yield opened


@pytest.fixture
def raw(any_url: str) -> Iterator[Raw]:
    handle = Raw(any_url)
    yield handle
    handle.close()


def _row(raw: Raw, seq: int) -> list[Any]:
    return list(raw.execute(f"SELECT {COLUMNS} FROM events WHERE seq = ?", (seq,))[0])


# -- 1. REPLACE that reuses an event_id -------------------------------------------------------


def test_sqlite_replace_reusing_an_event_id_at_a_new_seq_is_refused(tmp_path: Any) -> None:
    """The first of the two statements that rewrite a row in place: REPLACE at the next seq
    with the event_id of seq 3 would delete seq 3 (no DELETE trigger fires). A BEFORE INSERT
    trigger's RAISE(ABORT) aborts the statement whatever its OR clause says."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url) as store:
        fill(store)  # six events
        raw = Raw(url)
        try:
            row = _row(raw, 3)
            row[0] = 7  # a new seq, the event_id of seq 3
            marks = ", ".join("?" for _ in row)
            for verb in ("INSERT OR REPLACE", "REPLACE", "INSERT OR IGNORE", "INSERT"):
                with pytest.raises(sqlite3.IntegrityError, match="event_id already used"):
                    raw.execute(f"{verb} INTO events ({COLUMNS}) VALUES ({marks})", tuple(row))
            with pytest.raises(sqlite3.IntegrityError, match="event_id already used"):
                raw.execute(
                    f"INSERT INTO events ({COLUMNS}) VALUES ({marks}) "
                    "ON CONFLICT (event_id) DO UPDATE SET caller = 'mallory'",
                    tuple(row),
                )
            assert [r[0] for r in raw.execute("SELECT seq FROM events ORDER BY seq")] == [
                1, 2, 3, 4, 5, 6,
            ]  # fmt: skip
            assert _row(raw, 3)[1] == row[1]
        finally:
            raw.close()
        assert verify_log(store).ok
        assert store.append(EventDraft(kind=EventKind.REQUEST, request_id="after")).seq == 7


# -- 2. content written ahead of its event ----------------------------------------------------

FUTURE_BODY = b'{"prompt": "transfer 9,800 EUR to the usual account"}'


def _unguarded(any_url: str) -> Raw:
    """The owner's (or the SQLite file's) hand: on PostgreSQL with the triggers off, since
    the content guard refuses such a row from every role."""
    raw = Raw(any_url)
    if raw.dialect == "postgresql":
        raw.unguard()
    return raw


def test_a_payload_written_ahead_fails_the_append_closed(any_url: str, store: AuditStore) -> None:
    fill(store, requests=1)
    key = digest(FUTURE_BODY)
    raw = _unguarded(any_url)
    try:
        raw.execute(
            "INSERT INTO payloads (digest, size, content) VALUES (?, ?, ?)",
            (key, 5, b"other"),
        )
    finally:
        raw.close()
    head = store.head()
    with pytest.raises(ContentConflict, match=key) as caught:
        store.append(
            EventDraft(kind=EventKind.REQUEST, request_id="r9", payloads={"body": FUTURE_BODY})
        )
    assert caught.value.table == "payloads" and caught.value.digests == (key,)
    assert isinstance(caught.value, AppendFailed)
    assert store.head() == head  # nothing written
    from gateway._store_adapter import audit_failure
    from gateway.errors import AuditWriteError

    assert isinstance(audit_failure(caught.value), AuditWriteError)
    # Other appends are unaffected, and the same bytes stored twice are no conflict.
    with AuditStore.open(any_url) as fresh:  # nothing known: every content row is compared
        fill(fresh, requests=1)
        assert fresh.append(EventDraft(kind=EventKind.REQUEST, request_id="ok")).seq > head[0]


def test_a_policy_written_ahead_fails_the_append_closed(any_url: str, store: AuditStore) -> None:
    fingerprint = canonical_digest(POLICY)
    raw = _unguarded(any_url)
    try:
        raw.execute(
            "INSERT INTO policies (fingerprint, content) VALUES (?, ?)",
            (fingerprint, canonical_bytes({"task": "anything goes"})),
        )
    finally:
        raw.close()
    with pytest.raises(ContentConflict, match="policies"):
        store.append(
            EventDraft(kind=EventKind.REQUEST, request_id="r1", policy_fingerprint=fingerprint,
                       policy_content=POLICY)
        )  # fmt: skip
    assert store.head()[0] == 0


def test_a_conflicting_event_in_a_group_fails_alone(any_url: str, store: AuditStore) -> None:
    raw = _unguarded(any_url)
    try:
        raw.execute(
            "INSERT INTO payloads (digest, size, content) VALUES (?, ?, ?)",
            (digest(FUTURE_BODY), 5, b"other"),
        )
    finally:
        raw.close()
    outcomes: dict[int, object] = {}

    def append(n: int) -> None:
        payloads = {"request_body": FUTURE_BODY if n == 0 else b"%d" % n}
        try:
            outcomes[n] = store.append(
                EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}", payloads=payloads)
            ).seq
        except AppendFailed as exc:
            outcomes[n] = exc

    threads = [threading.Thread(target=append, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert isinstance(outcomes.pop(0), ContentConflict)
    assert sorted(str(v) for v in outcomes.values()) == ["1", "2", "3", "4", "5"]
    assert verify_log(store).ok


@pytest.mark.postgres
def test_postgres_refuses_a_content_row_that_does_not_hash_to_its_key(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    upgrade(pg_url)
    _create_role(postgres_server, "gateway_app")
    grant(pg_url, "gateway_app")
    db = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server.dsn(db, "gateway_app"), autocommit=True) as conn:
        for sql, params in (
            ("INSERT INTO payloads (digest, size, content) VALUES (%s, 5, 'other')",
             (digest(FUTURE_BODY),)),
            ("INSERT INTO payloads (digest, size, content) VALUES (%s, 99, 'other')",
             (digest(b"other"),)),
            ("INSERT INTO policies (fingerprint, content) VALUES (%s, 'other')",
             (canonical_digest(POLICY),)),
        ):  # fmt: skip
            with pytest.raises(psycopg.errors.CheckViolation, match="audit content"):
                conn.execute(sql, params)
        conn.execute(
            "INSERT INTO payloads (digest, size, content) VALUES (%s, 5, 'other')",
            (digest(b"other"),),
        )  # a true content row goes in: it can stand only for its own bytes


# -- 3. the PostgreSQL chain lock -------------------------------------------------------------


def _append_in_thread(url: str) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        start = time.monotonic()
        try:
            with AuditStore.open(url) as store:
                outcome["seq"] = store.append(
                    EventDraft(kind=EventKind.REQUEST, request_id=f"r-{time.time_ns()}")
                ).seq
        except AppendFailed as exc:
            outcome["error"] = exc
        outcome["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


@pytest.fixture
def roles_db(postgres_server: PostgresServer) -> tuple[str, str]:
    """A database owned by a plain role, an appender ``gateway_app``, a reviewer ``auditor``
    and ``monitor``, a role that may connect and nothing more."""
    db = _owned_database(postgres_server, "audit_owner")
    owner_url = postgres_server.url(db, "audit_owner")
    upgrade(owner_url)
    for role in ("gateway_app", "auditor", "monitor"):
        _create_role(postgres_server, role)
    grant(owner_url, "gateway_app")
    grant(owner_url, "auditor", read_only=True)
    return db, owner_url


@pytest.mark.postgres
def test_no_other_role_can_hold_the_chain_lock_to_hang_the_gateway(
    postgres_server: PostgresServer, roles_db: tuple[str, str]
) -> None:
    db, _ = roles_db
    app_url = postgres_server.url(db, "gateway_app")
    for role in ("auditor", "monitor"):
        with psycopg.connect(postgres_server.dsn(db, role)) as conn:  # one open transaction
            conn.execute("SELECT pg_advisory_lock(%s)", (0x41554454,))  # the old chain lock
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x41554454,))
            for sql in (
                "SELECT 1 FROM audit_meta WHERE key = 'chain_lock' FOR UPDATE",
                "LOCK TABLE audit_meta IN EXCLUSIVE MODE",
            ):
                conn.execute("SAVEPOINT s")
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql)
                conn.execute("ROLLBACK TO SAVEPOINT s")
            if role == "monitor":
                conn.execute("SELECT audit_chain_lock()")  # takes nothing: it may not append
            thread, outcome = _append_in_thread(app_url)
            thread.join(timeout=30)
            assert not thread.is_alive(), f"the append hung while {role} held its locks"
            assert "seq" in outcome, outcome
            assert outcome["seconds"] < 10


@pytest.mark.postgres
def test_a_role_that_holds_the_chain_lock_makes_appends_fail_fast_never_hang(
    postgres_server: PostgresServer, roles_db: tuple[str, str]
) -> None:
    """A reviewer may append (its exports record themselves), so it can take the lock like
    any appender, and so hold appends up while it keeps a transaction open. They fail closed
    after the lock time-out, naming the lock; they never hang."""
    db, _ = roles_db
    app_url = postgres_server.url(db, "gateway_app") + "?lock_timeout=1"
    with psycopg.connect(postgres_server.dsn(db, "auditor")) as conn:
        conn.execute("SELECT audit_chain_lock()")
        thread, outcome = _append_in_thread(app_url)
        thread.join(timeout=30)
        assert not thread.is_alive(), "the append hung"
    error = outcome.get("error")
    assert isinstance(error, AppendFailed), outcome
    assert "chain lock was not granted within 1 s" in str(error)
    assert "Nothing was written" in str(error)
    assert outcome["seconds"] < 10
    with AuditStore.open(postgres_server.url(db, "auditor")) as reviewer:  # lock released
        assert take_checkpoint(reviewer, None).seq == 1  # the reviewer's own record still goes in
        assert verify_log(reviewer).ok


@pytest.mark.postgres
def test_postgres_sessions_have_a_lock_timeout_by_default(pg_url: str) -> None:
    for url, expected in ((pg_url, "1min"), (pg_url + "?lock_timeout=2.5", "2500ms")):
        backend = Backend.connect(url, "fsync")
        try:
            with backend.writer.connect() as conn:
                assert conn.exec_driver_sql("SHOW lock_timeout").scalar_one() == expected
        finally:
            backend.dispose()


# -- 4. NUL in a text column or the data ------------------------------------------------------

NUL_DRAFTS: dict[str, dict[str, Any]] = {
    "caller": {"caller": "svc\x00probe"},
    "task": {"task": "compliance\x00review"},
    "request_id": {"request_id": "r\x00"},
    "request_hash": {"request_hash": "sha256:\x00"},
    "policy_fingerprint": {"policy_fingerprint": "\x00"},
    "data value": {"data": {"reason": "unknown task 'x\x00y'"}},
    "data key": {"data": {"k\x00": 1}},
    "nested data": {"data": {"a": [{"b": ["\x00"]}]}},
    "payload name": {"payloads": {"body\x00": b"x"}},
}


@pytest.mark.parametrize("case", NUL_DRAFTS)
def test_nul_is_refused_alike_on_every_backend(store: AuditStore, case: str) -> None:
    fields: dict[str, Any] = {"kind": EventKind.REJECTED, "request_id": "r1", **NUL_DRAFTS[case]}
    with pytest.raises(InvalidEvent, match="NUL"):
        store.append(EventDraft(**fields))
    assert store.head()[0] == 0  # nothing written
    escaped = {**fields, **{k: v.replace("\x00", "\\0") for k, v in fields.items()
                            if isinstance(v, str)}}  # fmt: skip
    if case not in {"data key", "data value", "nested data", "payload name"}:
        assert store.append(EventDraft(**escaped)).seq == 1  # the escaped form is recorded


def test_nul_is_refused_before_the_chain_lock(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url + "?lock_timeout=10") as store:
        holder = sqlite3.connect(tmp_path / "audit.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the chain lock, held by another writer
        try:
            start = time.monotonic()
            with pytest.raises(InvalidEvent):
                store.append(EventDraft(kind=EventKind.REJECTED, request_id="r", caller="\x00"))
            assert time.monotonic() - start < 5  # refused at once, not after the lock wait
        finally:
            holder.execute("ROLLBACK")
            holder.close()
