"""Group commit: appends that wait for the chain lock are committed together.

    committer = GroupCommitter(commit_batch, retry_alone=item_specific)
    result = committer.submit(item)              # from any thread; blocks until durable

``commit_batch(list[item]) -> list[result]`` commits a batch or raises. The first thread in
becomes the leader and commits everything queued so far in one transaction (one fsync).
Threads that arrive meanwhile queue up; when the leader is done it hands leadership to the
oldest waiter, which commits the next batch.

If a batch fails with an error that ``retry_alone(error)`` says belongs to one item (an
integrity error, an invalid event), each item is retried alone, so one bad item cannot fail
the others. Any other error (lock timeout, I/O, disk full, lost connection) would fail every
retry the same way, each after its own wait, so it fails the whole batch at once; it also
ends a round of retries early. Whatever happens, every waiter of a batch is released: an
interrupt (``BaseException``) surfaces in the leader's thread and, through
``interrupted(exc)``, in every waiter whose item had no outcome yet.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_BATCH = 256  # bounds one transaction's size and the leader's lock hold time


class _Pending(Generic[T, R]):
    __slots__ = ("error", "event", "item", "result")

    def __init__(self, item: T) -> None:
        self.item = item
        self.event = threading.Event()
        self.result: R | None = None
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None


def _always(_exc: BaseException) -> bool:
    return True


def _same(exc: BaseException) -> BaseException:
    return exc


class GroupCommitter(Generic[T, R]):
    def __init__(
        self,
        commit_batch: Callable[[list[T]], list[R]],
        *,
        retry_alone: Callable[[Exception], bool] = _always,
        interrupted: Callable[[BaseException], BaseException] = _same,
    ) -> None:
        self._commit_batch = commit_batch
        self._retry_alone = retry_alone
        self._interrupted = interrupted
        self._lock = threading.Lock()
        self._queue: list[_Pending[T, R]] = []
        self._busy = False
        self.batches = 0  # for the benchmark: appends / batches = mean group size

    def after_fork(self) -> None:
        """In a forked child: nobody is committing or waiting (those threads stayed in the
        parent), and the lock may have been held by one of them at the fork."""
        self._lock = threading.Lock()
        self._queue = []
        self._busy = False

    def submit(self, item: T) -> R:
        mine: _Pending[T, R] = _Pending(item)
        with self._lock:
            self._queue.append(mine)
            lead = not self._busy
            self._busy = True
        if not lead:
            mine.event.wait()  # woken either with a result or to lead the next batch
        if not mine.done:
            with self._lock:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            try:
                self._run(batch)
            finally:
                with self._lock:
                    if self._queue:
                        self._queue[0].event.set()  # hand over: it is not done, so it leads
                    else:
                        self._busy = False
        if mine.error is not None:
            raise mine.error
        assert mine.result is not None
        return mine.result

    def _run(self, batch: list[_Pending[T, R]]) -> None:
        try:
            self._commit(batch)
        except BaseException as exc:  # interrupted: every item without an outcome gets one
            for p in batch:
                if not p.done:
                    p.error = self._interrupted(exc)
            raise
        finally:
            for p in batch:  # nobody may wait forever, whatever was raised
                p.event.set()

    def _commit(self, batch: list[_Pending[T, R]]) -> None:
        """Give every item of ``batch`` a result or an error; only BaseException escapes."""
        self.batches += 1
        try:
            results = self._commit_batch([p.item for p in batch])
        except Exception as exc:  # noqa: BLE001 - classified below, handed to the callers
            if len(batch) == 1 or not self._retry_alone(exc):
                for p in batch:
                    p.error = exc
                return
            for n, p in enumerate(batch):
                self._commit([p])
                error = p.error
                if isinstance(error, Exception) and not self._retry_alone(error):
                    # The database itself is failing (lock, I/O, connection): the rest would
                    # fail the same way, each after its own wait.
                    for rest in batch[n + 1 :]:
                        rest.error = error
                    return
            return
        for p, r in zip(batch, results, strict=True):
            p.result = r
