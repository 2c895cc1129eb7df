"""Group commit under failure: a batch-wide error fails the batch at once; an item-specific
one is retried alone; an interrupt never leaves a waiter hanging.

Lock timeouts are real: a raw connection holds the SQLite write lock (or the PostgreSQL chain
lock) while appenders queue behind it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from audit import AppendFailed, AuditStore, EventDraft, EventKind
from audit.store._append import Appender, item_specific
from audit.store._group import GroupCommitter
from audit.store._prepare import Prepared, prepare
from audit.store.backend import CHAIN_LOCK_SQL, Backend
from audit.store.models import Appended
from tests.audit.conftest import Raw


def _queued(committer: GroupCommitter[object, object]) -> int:
    """Submitters waiting behind the batch being committed."""
    return len(committer._queue)


def _until(condition: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"still not {what} after {seconds} s"
        time.sleep(0.001)


def _with_lock_timeout(url: str, seconds: float) -> str:
    return f"{url}{'&' if '?' in url else '?'}lock_timeout={seconds}"


class ChainLockHolder:
    """Holds the chain lock from outside the store, the way another writer process would."""

    def __init__(self, url: str) -> None:
        self.raw = Raw(url)

    def __enter__(self) -> ChainLockHolder:
        if self.raw.dialect == "sqlite":
            self.raw.execute("BEGIN IMMEDIATE")
        else:
            self.raw.execute("BEGIN")  # the row lock is held to the end of the transaction
            self.raw.execute(CHAIN_LOCK_SQL)
        return self

    def __exit__(self, *exc: object) -> None:
        self.raw.execute("ROLLBACK")
        self.raw.close()


@pytest.fixture
def timed_store(any_url: str) -> Iterator[AuditStore]:
    AuditStore.open(any_url).close()  # migrate the SQLite file before the lock is taken
    with AuditStore.open(_with_lock_timeout(any_url, 1)) as opened:
        yield opened


def test_lock_timeout_fails_the_whole_batch_at_once(any_url: str, timed_store: AuditStore) -> None:
    """8 threads, lock_timeout=1 s: all fail in about 2 s (two batches), not 1 + 7 x 1 s."""
    failed_after: list[float] = []
    others: list[BaseException] = []
    lock = threading.Lock()

    def append(n: int) -> None:
        try:
            timed_store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}"))
        except AppendFailed:
            with lock:
                failed_after.append(time.monotonic() - start)
        except BaseException as exc:
            others.append(exc)

    with ChainLockHolder(any_url):
        start = time.monotonic()
        workers = [threading.Thread(target=append, args=(n,), daemon=True) for n in range(8)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=30)
    assert not others
    assert len(failed_after) == 8
    # One batch with the first thread, one with the seven that queued behind it; retried one
    # by one, each would wait its own second (a batch each). The wall time, about two lock
    # time-outs, is measured by bench/lock_timeout_bench.py.
    assert timed_store.group_commits <= 3, sorted(failed_after)
    assert timed_store.append(EventDraft(kind=EventKind.REQUEST, request_id="after")).seq == 1


def test_an_item_specific_error_is_retried_alone_on_a_real_database(any_url: str) -> None:
    """The same prepared event twice in a group (duplicate event_id: an integrity error)
    fails only the second copy; the other events of the group are committed."""
    AuditStore.open(any_url).close()
    backend = Backend.connect(any_url, "fsync")
    appender = Appender(backend)
    taken: list[int] = []  # each batch's size as it is committed

    def commit(batch: list[Prepared]) -> list[Appended]:
        taken.append(len(batch))
        return appender.commit(batch)

    committer: GroupCommitter[Prepared, Appended] = GroupCommitter(
        commit, retry_alone=item_specific
    )
    twice = prepare(EventDraft(kind=EventKind.REQUEST, request_id="twice"))
    items = [twice, twice] + [
        prepare(EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}")) for n in range(6)
    ]
    outcomes: list[Appended | BaseException | None] = [None] * len(items)

    def submit(i: int) -> None:
        try:
            outcomes[i] = committer.submit(items[i])
        except AppendFailed as exc:
            outcomes[i] = exc

    try:
        with ChainLockHolder(any_url):  # so that the submissions queue into one group
            workers = [threading.Thread(target=submit, args=(i,), daemon=True) for i in range(8)]
            for w in workers:
                w.start()
            # Every submission is in: the first batch (blocked on the lock) or queued behind.
            _until(lambda: bool(taken) and taken[0] + _queued(committer) == 8, "all queued")
        for w in workers:
            w.join(timeout=30)
    finally:
        backend.dispose()
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1, outcomes
    assert "twice" not in str(errors[0])  # the message says why, not which request
    committed = sorted(o.seq for o in outcomes if isinstance(o, Appended))
    assert committed == list(range(1, 8))


class Interrupt(BaseException):
    """Like KeyboardInterrupt, without interrupting pytest."""


def test_an_interrupt_during_retries_releases_every_waiter() -> None:
    calls: list[list[int]] = []
    leading, release = threading.Event(), threading.Event()

    def commit(batch: list[int]) -> list[int]:
        calls.append(batch)
        if batch == [10]:
            leading.set()
            release.wait(30)  # the others queue up behind the first leader meanwhile
        elif len(batch) > 1:
            raise ValueError("one bad item")  # item-specific: retried one by one
        elif batch == [13]:
            raise Interrupt
        return [n * 2 for n in batch]

    committer: GroupCommitter[int, int] = GroupCommitter(commit)
    outcomes: dict[int, object] = {}

    def submit(n: int) -> None:
        try:
            outcomes[n] = committer.submit(n)
        except BaseException as exc:
            outcomes[n] = exc

    workers = [threading.Thread(target=submit, args=(n,), daemon=True) for n in range(10, 18)]
    workers[0].start()
    assert leading.wait(30)
    for queued, w in enumerate(workers[1:], start=1):
        w.start()
        _until(lambda n=queued: _queued(committer) == n, "queued")  # queue order 11, 12, ... 17
    release.set()
    for w in workers:
        w.join(timeout=5)
    assert not [w for w in workers if w.is_alive()], "a waiter was left hanging"
    assert calls[1] == list(range(11, 18))
    assert outcomes[10] == 20 and outcomes[12] == 24
    # 11 led the second batch: the interrupt surfaces in its thread, where it happened
    for n in (11, *range(13, 18)):
        assert isinstance(outcomes[n], Interrupt), (n, outcomes[n])
    assert committer.submit(99) == 198  # the committer is usable afterwards


def test_the_classifier_separates_item_errors_from_batch_errors(any_url: str) -> None:
    with AuditStore.open(_with_lock_timeout(any_url, 1)) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r"))
        with ChainLockHolder(any_url), pytest.raises(AppendFailed) as locked:
            store.append(EventDraft(kind=EventKind.REQUEST, request_id="r2"))
    assert not item_specific(locked.value)
    assert item_specific(ValueError("a bug in one item"))


def test_a_served_gateways_concurrent_appends_share_one_commit(any_url: str) -> None:
    """32 requests in flight on one event loop hand their appends to the gateway's audit
    threads: all 32 reach the committer and are committed in two groups (the first in,
    then everyone who queued behind it), not in groups no bigger than a small thread pool."""
    from gateway.request import AuditThreads  # the served path's hand-off to the store

    async def append_all(store: AuditStore, threads: AuditThreads) -> list[int]:
        with ChainLockHolder(any_url):
            jobs = [
                threads.submit(store.append, EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}"))
                for n in range(32)
            ]
            await asyncio.to_thread(
                _until, lambda: _queued(store._committer) == 31, "31 appends queued", 10
            )
        return [(await job).seq for job in jobs]

    threads = AuditThreads()
    try:
        with AuditStore.open(any_url) as store:
            seqs = asyncio.run(append_all(store, threads))
            assert sorted(seqs) == list(range(1, 33))
            assert store.group_commits == 2
            times = {e.recorded_at for e in store.iter_events()}
            assert len(times) == 2  # one commit, one recorded_at
    finally:
        threads.close()
