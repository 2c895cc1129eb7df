"""Under log format 2 a caller key's revocation applies however late its seq commits.

Format-2 writers take their seqs from a sequence and commit in any order, so a revocation
at seq S can commit after S+1 was read. The key ring of `gateway serve` then has to read S
when it commits, not skip it for good (the revoked key went on answering every request).

The late commit is a real one: a second writer's transaction holds an uncommitted payload
row that the revocation's transaction must insert too, so PostgreSQL makes it wait after
its seqs were reserved, while other writers commit higher seqs. Real PostgreSQL, real
stores, the ring `gateway serve` uses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.canonical import digest
from audit.store.migrate import upgrade
from audit.store.signing import Signer
from gateway.callers import KEY_PREFIX, CallerKeys, KeyRing, hash_key
from gateway.settings import Settings
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

RECORD_KEY = "07" * 32


@pytest.fixture
def settings(pg_url: str) -> Settings:
    upgrade(pg_url)
    return Settings(database_url=pg_url, audit_format=2, record_key=RECORD_KEY, durability="os")


@pytest.fixture
def keys(settings: Settings) -> Iterator[CallerKeys]:
    with CallerKeys.open(settings) as opened:
        yield opened


def key_drafts(key_id: str, caller: str, key: str) -> tuple[EventDraft, EventDraft]:
    """What `gateway keys create` and `keys revoke` append for a key."""
    created = EventDraft(
        kind=EventKind.CALLER_KEY,
        request_id=key_id,
        caller=caller,
        data={"key_id": key_id, "caller": caller, "key_hash": hash_key(key)},
    )
    revoked = EventDraft(
        kind=EventKind.CALLER_KEY_REVOKED,
        request_id=key_id,
        caller=caller,
        data={"key_id": key_id, "caller": caller},
    )
    return created, revoked


def waiting_on_a_lock(admin: psycopg.Connection, database: str, count: int) -> None:
    deadline = time.monotonic() + 20
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'"
    while admin.execute(query, (database,)).fetchone() != (count,):
        assert time.monotonic() < deadline, "the late writer never reached its insert"
        time.sleep(0.01)


def test_a_revocation_committed_after_a_higher_seq_was_read_still_applies(
    settings: Settings, keys: CallerKeys, pg_url: str, postgres_server: PostgresServer
) -> None:
    issued = keys.create("desk-a")
    ring = KeyRing(keys)
    ring.refresh()
    assert ring.authenticate(issued.key) is not None

    # A key created in the same late transaction, and a payload row that makes it wait.
    late_key = KEY_PREFIX + "late" + "x" * 39
    late_created, _ = key_drafts("key_late", "desk-b", late_key)
    _, revoked = key_drafts(issued.key_id, "desk-a", issued.key)
    held = b"a body another writer is inserting"
    request = EventDraft(kind=EventKind.REQUEST, request_id="r-late", payloads={"body": held})

    database = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server.dsn(database)) as second_writer:
        second_writer.execute(
            "INSERT INTO payloads (digest, size, content) VALUES (%s, %s, %s)",
            (digest(held), len(held), held),
        )  # uncommitted: the late transaction's insert of the same row waits for it
        with (
            AuditStore.open(pg_url, signer=Signer.from_text(RECORD_KEY)) as late_store,
            ThreadPoolExecutor(1) as pool,
        ):
            late = pool.submit(late_store.append_many, [revoked, late_created, request])
            with psycopg.connect(postgres_server.dsn(database), autocommit=True) as admin:
                waiting_on_a_lock(admin, database, 1)
            later = keys.create("desk-c")  # a higher seq commits first
            ring.refresh()
            assert not late.done()
            assert ring.authenticate(issued.key) is not None  # not revoked yet: not committed
            second_writer.rollback()
            appended = late.result(timeout=20)
    assert appended[0].seq < later.seq  # the revocation's seq is below one already read

    ring.refresh()
    assert ring.authenticate(issued.key) is None
    assert ring.authenticate(late_key) is not None
    assert ring.authenticate(later.key) is not None


@pytest.mark.slow
def test_two_hundred_revocations_racing_other_writers_all_apply(
    settings: Settings, keys: CallerKeys
) -> None:
    """No injected delay: revocations and other writes from several threads commit in
    whatever order PostgreSQL gives them, while the ring refreshes all along."""
    issued = [keys.create(f"desk-{n}") for n in range(200)]
    ring = KeyRing(keys)
    ring.refresh()
    stop = threading.Event()

    def refreshing() -> None:
        while not stop.is_set():
            ring.refresh()

    def revoke(chunk: list[int]) -> None:
        with CallerKeys.open(settings) as own:
            for n in chunk:
                own.revoke(issued[n].key_id)
                own.create(f"noise-{n}")

    refresher = threading.Thread(target=refreshing)
    refresher.start()
    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(revoke, [list(range(k, 200, 4)) for k in range(4)]))
    finally:
        stop.set()
        refresher.join()
    ring.refresh()
    still = [n for n, key in enumerate(issued) if ring.authenticate(key.key) is not None]
    assert still == []
