"""The append path's "already committed" content set is a hint that never outlives its evidence.

An append skips payload and policy rows this process saw committed. If the database no longer
holds them (PostgreSQL with ``synchronous_commit=off`` losing its last commits in a crash, a
restore from backup), a later event would reference a missing row. Here the "lost" row is
deleted by the owner with the guards off: the same state a lost commit or a restore leaves.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from audit import AppendFailed, AuditStore, EventDraft, EventKind, InvalidEvent
from audit.canonical import canonical_bytes, digest
from audit.store.migrate import upgrade
from audit.verify import verify_log
from tests.audit.conftest import Raw
from tests.support.postgres import PostgresServer, _as_postgres_user

PROMPT = b"the same prompt, sent again"


def _request(rid: str) -> EventDraft:
    return EventDraft(kind=EventKind.REQUEST, request_id=rid, payloads={"b": PROMPT})


def _lose_payload(url: str) -> None:
    """Remove the payload row as a lost commit or an older backup would."""
    raw = Raw(url)
    try:
        raw.unguard()
        raw.execute("DELETE FROM payloads WHERE digest = ?", (digest(PROMPT),))
        assert raw.execute("SELECT count(*) FROM payloads") == [(0,)]
    finally:
        raw.close()


def test_policy_content_is_compared_as_canonical_bytes(any_url: str) -> None:
    fingerprint = digest(canonical_bytes({"x": 1}))
    with AuditStore.open(any_url) as store:
        store.append(
            EventDraft(
                kind=EventKind.REQUEST,
                request_id="a",
                policy_content={"x": 1},
                policy_fingerprint=fingerprint,
            )
        )
        # {"x": True} == {"x": 1} in Python, but its bytes hash to another fingerprint
        with pytest.raises(InvalidEvent, match="policy_fingerprint"):
            store.append(
                EventDraft(
                    kind=EventKind.REQUEST,
                    request_id="b",
                    policy_content={"x": True},
                    policy_fingerprint=fingerprint,
                )
            )
        same = store.append(
            EventDraft(
                kind=EventKind.REQUEST,
                request_id="c",
                policy_content={"x": 1},
                policy_fingerprint=fingerprint,
            )
        )
        assert same.seq == 2
        assert verify_log(store).ok


def test_sqlite_failed_commit_forgets_committed_content(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/audit.db?lock_timeout=0.2"
    with AuditStore.open(url) as store:
        store.append(_request("r1"))
        _lose_payload(url.split("?")[0])
        path = make_url(url).database or ""
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock: this append fails
        try:
            with pytest.raises(AppendFailed):
                store.append(_request("r2"))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        store.append(_request("r3"))  # writes the payload again instead of trusting the set
        report = verify_log(store)
    assert report.ok, report.defects


def _crash(server: PostgresServer) -> None:
    """A server crash: no shutdown checkpoint, clients see their connections die."""
    _as_postgres_user(["pg_ctl", "-D", str(server.datadir), "-m", "immediate", "-w", "stop"])
    server.start()


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_crash_then_lost_row_is_written_again(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    upgrade(pg_url)
    with AuditStore.open(pg_url) as store:  # fsync: the set is used until the crash
        store.append(_request("r1"))
        _crash(postgres_server)
        _lose_payload(pg_url)  # as if the crash (or a restore) had lost it
        appended = []
        for n in range(3):  # a stale pooled connection fails closed first
            with contextlib.suppress(AppendFailed):
                appended.append(store.append(_request(f"after-{n}")).seq)
        assert appended
        report = verify_log(store)
    assert report.ok, report.defects


@pytest.mark.postgres
def test_postgres_os_durability_never_skips_content(pg_url: str) -> None:
    upgrade(pg_url)
    with AuditStore.open(pg_url, durability="os") as store:
        store.append(_request("r1"))
        _lose_payload(pg_url)  # what synchronous_commit=off can lose in a server crash
        store.append(_request("r2"))  # same connection, no error: only "never skip" saves it
        report = verify_log(store)
    assert report.ok, report.defects


def test_sqlite_reuses_the_set_while_the_connection_lives(tmp_path: Path) -> None:
    """The control: the skip is real, so the tests above can fail."""
    url = f"sqlite:///{tmp_path}/audit.db"
    with AuditStore.open(url) as store:
        store.append(_request("r1"))
        _lose_payload(url)
        store.append(_request("r2"))  # SQLite has no chain guard: the dangling reference lands
        kinds = {d.kind.value for d in verify_log(store).defects}
    assert kinds == {"missing_content"}


@pytest.mark.postgres
def test_postgres_guard_refuses_a_dangling_reference_then_the_row_is_written(pg_url: str) -> None:
    """PostgreSQL's chain guard (0005) refuses an event whose payload is not stored; that
    failed commit empties the set, so the retry writes the payload."""
    upgrade(pg_url)
    with AuditStore.open(pg_url) as store:
        store.append(_request("r1"))
        _lose_payload(pg_url)
        with pytest.raises(AppendFailed, match="not stored"):
            store.append(_request("r2"))
        assert store.append(_request("r3")).seq == 2
        report = verify_log(store)
    assert report.ok, report.defects
