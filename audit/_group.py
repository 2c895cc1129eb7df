"""Group commit: appends that wait for the chain lock are committed together.

    committer = GroupCommitter(commit_batch)     # commit_batch(list[item]) -> list[result]
    result = committer.submit(item)              # from any thread; blocks until durable

The first thread in becomes the leader and commits everything queued so far in one
transaction (one fsync). Threads that arrive meanwhile queue up; when the leader is done it
hands leadership to the oldest waiter, which commits the next batch. If a batch fails, each
of its items is retried alone, so one bad item cannot fail the others.
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


class GroupCommitter(Generic[T, R]):
    def __init__(self, commit_batch: Callable[[list[T]], list[R]]) -> None:
        self._commit_batch = commit_batch
        self._lock = threading.Lock()
        self._queue: list[_Pending[T, R]] = []
        self._busy = False
        self.batches = 0  # for the benchmark: appends / batches = mean group size

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
        self.batches += 1
        try:
            results = self._commit_batch([p.item for p in batch])
        except Exception as exc:  # noqa: BLE001 - any batch failure: retry each item alone
            if len(batch) == 1:
                batch[0].error = exc
            else:
                for p in batch:
                    self._run([p])
                return
        except BaseException as exc:  # interrupted: nobody may wait forever
            for p in batch:
                p.error = exc
                p.event.set()
            raise
        else:
            for p, r in zip(batch, results, strict=True):
                p.result = r
        for p in batch:
            p.event.set()
