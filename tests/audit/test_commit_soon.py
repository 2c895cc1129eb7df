"""Appends handed over without a waiting thread (``append_soon``): the store's committer
thread commits them in the same groups, in the same order, and tells each caller only once
its own event is durable, through a callback, on a real database.

The chain lock is held from outside (the way another writer process would) so that appends
queue up behind it; what the callbacks saw is checked against the rows.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.errors import AppendFailed, InvalidEvent
from audit.store._group import GroupCommitter
from audit.store.models import Appended
from tests.audit.test_group_commit import ChainLockHolder, _with_lock_timeout


def _until(condition: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"still not {what} after {seconds} s"
        time.sleep(0.001)


def _draft(n: int) -> EventDraft:
    return EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}")


def test_soon_appends_wait_in_one_group_with_no_thread_each(any_url: str) -> None:
    outcomes: dict[int, tuple[Appended | None, BaseException | None, int]] = {}
    told = threading.Condition()

    def done_for(n: int) -> Callable[[Appended | None, BaseException | None], None]:
        def done(appended: Appended | None, error: BaseException | None) -> None:
            # Durable when told: a fresh reader sees the event already.
            with AuditStore.open(any_url) as reader:
                visible = reader.head()[0]
            with told:
                outcomes[n] = (appended, error, visible)
                told.notify_all()

        return done

    with AuditStore.open(any_url) as store:
        before = threading.active_count()
        with ChainLockHolder(any_url):
            store.append_soon(_draft(0), done_for(0))
            _until(lambda: not store._committer._queue, "the first append taken to commit")
            for n in range(1, 32):
                store.append_soon(_draft(n), done_for(n))
            # One committer thread waits at the lock; the 31 others wait in the queue, each
            # without a thread of its own.
            _until(lambda: len(store._committer._queue) == 31, "31 appends queued", 10)
            assert threading.active_count() <= before + 1
            assert not outcomes
        with told:
            assert told.wait_for(lambda: len(outcomes) == 32, 30)
        assert store.group_commits == 2  # the first in, then everyone queued behind it
        seqs = {n: o[0].seq for n, o in outcomes.items() if o[0] is not None}
        assert [seqs[n] for n in range(32)] == list(range(1, 33))  # order as submitted
        assert all(o[1] is None and o[2] >= o[0].seq for o in outcomes.values() if o[0])
        assert [e.request_id for e in store.iter_events()] == [f"r{n}" for n in range(32)]
        assert len({e.recorded_at for e in store.iter_events()}) == 2  # two commits


def test_soon_and_blocking_appends_share_the_queue_and_order(any_url: str) -> None:
    with AuditStore.open(any_url) as store:
        results: dict[str, int] = {}
        lock = threading.Lock()

        def soon(name: str) -> Callable[[Appended | None, BaseException | None], None]:
            def done(appended: Appended | None, error: BaseException | None) -> None:
                assert appended is not None and error is None
                with lock:
                    results[name] = appended.seq

            return done

        def blocking(name: str) -> None:
            appended = store.append(EventDraft(kind=EventKind.REQUEST, request_id=name))
            with lock:
                results[name] = appended.seq

        with ChainLockHolder(any_url):
            store.append_soon(EventDraft(kind=EventKind.REQUEST, request_id="s0"), soon("s0"))
            # Taken to commit, not only queued: ``_busy`` is set before the committer thread
            # takes s0, and a queue of one would then still be s0 alone.
            _until(lambda: not store._committer._queue, "s0 taken to commit")
            waiter = threading.Thread(target=blocking, args=("t1",))
            waiter.start()
            _until(lambda: len(store._committer._queue) == 1, "t1 queued")
            store.append_soon(EventDraft(kind=EventKind.REQUEST, request_id="s2"), soon("s2"))
        waiter.join(30)
        _until(lambda: len(results) == 3, "all three appended")
        assert results == {"s0": 1, "t1": 2, "s2": 3}
        assert [e.request_id for e in store.iter_events()] == ["s0", "t1", "s2"]


def test_a_failed_soon_batch_tells_every_caller(any_url: str) -> None:
    errors: list[BaseException | None] = []
    told = threading.Event()

    def done(appended: Appended | None, error: BaseException | None) -> None:
        errors.append(error)
        if len(errors) == 3:
            told.set()

    with AuditStore.open(_with_lock_timeout(any_url, 0.5)) as store:
        with ChainLockHolder(any_url):
            for n in range(3):
                store.append_soon(_draft(n), done)
            assert told.wait(30)
        assert all(isinstance(e, AppendFailed) for e in errors)
        # An invalid draft is refused as it is handed over: nothing is queued.
        with pytest.raises(InvalidEvent):
            store.append_soon(
                EventDraft(kind=EventKind.REQUEST, request_id="x", data={"f": float("nan")}),
                done,
            )
        assert store.append(_draft(9)).seq == 1  # the store goes on


def test_close_commits_what_was_queued_then_refuses() -> None:
    committed: list[list[int]] = []
    gate = threading.Event()

    def commit(batch: list[int]) -> list[int]:
        gate.wait(30)
        committed.append(batch)
        return batch

    committer: GroupCommitter[int, int] = GroupCommitter(commit)
    told: list[tuple[int | None, BaseException | None]] = []
    for n in range(1, 4):
        committer.submit_soon(n, lambda r, e: told.append((r, e)))
    closing = threading.Thread(target=committer.close)
    closing.start()
    gate.set()
    closing.join(30)
    assert not closing.is_alive()
    assert [n for batch in committed for n in batch] == [1, 2, 3]
    assert [r for r, _ in told] == [1, 2, 3]
    committer.submit_soon(4, lambda r, e: told.append((r, e)))
    assert told[-1][0] is None and isinstance(told[-1][1], RuntimeError)
    assert committer.submit(5) == 5  # a thread of its own still leads its own append


def test_an_event_loop_is_answered_through_its_own_thread(any_url: str) -> None:
    """The recorder's awaitable append: answered on the loop, the event durable by then."""
    from gateway.request import AuditThreads
    from gateway.request._recording import Recorder

    async def run(recorder: Recorder) -> tuple[list[int], set[int]]:
        loop_thread = threading.get_ident()
        seen: set[int] = set()

        async def one(n: int) -> int:
            appended = await recorder.aappend(_draft(n))
            seen.add(threading.get_ident())
            return appended.seq

        seqs = await asyncio.gather(*(one(n) for n in range(16)))
        return list(seqs), seen - {loop_thread}

    with AuditStore.open(any_url) as store:
        recorder = Recorder(store, threads=AuditThreads())
        try:
            seqs, elsewhere = asyncio.run(run(recorder))
        finally:
            recorder.threads.close()
        assert sorted(seqs) == list(range(1, 17)) and not elsewhere
        assert store.head()[0] == 16


def test_close_during_a_batch_with_more_queued_still_stops_the_committer() -> None:
    """close() while the committer leads one batch and another waits: its wake-up falls in
    with the one that hands the committer the next batch (several sets make one wake-up),
    so the committer must read the state before it waits again. It waited for ever after
    that batch, and close() waited for it."""
    entered, gate = threading.Event(), threading.Event()

    def commit(batch: list[int]) -> list[int]:
        entered.set()
        gate.wait(30)
        return batch

    committer: GroupCommitter[int, int] = GroupCommitter(commit)
    told: list[int | None] = []
    committer.submit_soon(1, lambda r, e: told.append(r))
    assert entered.wait(30)  # the committer leads [1], held at the gate
    committer.submit_soon(2, lambda r, e: told.append(r))  # queued behind it
    closing = threading.Thread(target=committer.close, daemon=True)
    closing.start()
    time.sleep(0.2)  # close() has set the wake-up and joins the committer
    gate.set()
    closing.join(10)
    assert not closing.is_alive(), "close() waits for a committer that never wakes"
    assert told == [1, 2]


def test_close_while_a_thread_leads_commits_the_soon_items_behind_it_first() -> None:
    """close() while a ``submit`` thread leads a batch and a ``submit_soon`` item waits behind
    it: the committer stays for that item (it stopped at once, and the item was committed
    after close() returned, by a committer thread nobody joined)."""
    entered, gate = threading.Event(), threading.Event()

    def commit(batch: list[int]) -> list[int]:
        if 1 in batch:
            entered.set()
            gate.wait(30)
        return batch

    committer: GroupCommitter[int, int] = GroupCommitter(commit)
    told: list[int | None] = []
    committer.submit_soon(0, lambda r, e: told.append(r))  # the committer thread exists
    deadline = time.monotonic() + 30
    while told != [0]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    leader = threading.Thread(target=committer.submit, args=(1,), daemon=True)
    leader.start()
    assert entered.wait(30)  # a thread of its own leads [1], held at the gate
    committer.submit_soon(2, lambda r, e: told.append(r))
    closing = threading.Thread(target=committer.close, daemon=True)
    closing.start()
    time.sleep(0.2)
    assert closing.is_alive()  # still waiting for item 2
    gate.set()
    closing.join(10)
    assert not closing.is_alive()
    assert told == [0, 2]  # committed before close() returned
